"""The views of a shared chat are the chat's: a machine that opens at any moment, while the others
append and build, holds views byte-identical to theirs; and machines whose turn models differ
hold the same views, sized by the chat's budget (a change of it is a change in the stream)."""

from __future__ import annotations

import random
from collections.abc import Callable, Iterator
from contextlib import ExitStack
from pathlib import Path

import pytest

from evertalk.memory import Budget
from evertalk.pgstore.session import PgSession
from evertalk.shared_chat import SharedChat
from pgstore.test_shared_chat import compact_some

SMALL = Budget(8_000, 4_000, 4_000, 2_000)
SMALLER = Budget(5_000, 2_500, 2_000, 1_000)
Opener = Callable[[str, Budget | None], SharedChat]


@pytest.fixture
def machines(pg_url: str, tmp_path: Path) -> Iterator[Opener]:
    with ExitStack() as stack:

        def open_machine(name: str, budget: Budget | None = SMALL) -> SharedChat:
            session = PgSession(pg_url, name)
            chat = SharedChat.open_shared(session, tmp_path / name / "chat", budget=budget)
            stack.callback(chat.close)
            return chat

        yield open_machine


def text(rng: random.Random, n: int) -> str:
    return f"message {n} " + "words " * rng.randrange(5, 160)


def assert_same_views(chats: list[SharedChat]) -> None:
    for chat in chats:
        chat.follow()
    first = chats[0]
    for other in chats[1:]:
        assert other.t == first.t
        assert other.core.saved() == first.core.saved()
        assert other.render_view() == first.render_view()
        assert other.render_cview() == first.render_cview()


@pytest.mark.parametrize("seed", range(12))
def test_a_machine_that_opens_at_any_moment_holds_the_same_views(
    machines: Opener, seed: int
) -> None:
    rng = random.Random(seed)
    running = [machines("home"), machines("office"), machines("laptop")]
    count = 200
    opens_at = rng.randrange(20, count - 20)
    late: SharedChat | None = None
    for n in range(count):
        if n == opens_at:
            late = machines("late")
            running.append(late)
        rng.choice(running).append("user", text(rng, n))
        for chat in running:
            if rng.random() < 0.3:  # the compactors lag, each its own way
                compact_some(chat, rng, rng.randrange(0, 4))
    assert late is not None
    assert_same_views(running)
    assert running[0].core.view.shrinking or len(running[0].core.view) < count  # it merged


def test_a_machine_that_opens_after_late_builds_holds_the_views_of_the_others(
    machines: Opener,
) -> None:
    home, office = machines("home"), machines("office")
    for n in range(30):  # lines of 400 bytes: a batch starts, and waits for parents
        home.append("user", f"{n:03} " + "x" * 396)
    assert home.core.view.shrinking
    office.follow()
    for i in range(15):  # the parents come after the messages that wanted them
        assert office.claim((1, i))
        office.build((1, i), f"pair {i}: " + "y" * 200)
    late = machines("late")
    assert_same_views([home, office, late])
    home.append("user", "one more")  # the batch goes on, on every machine alike
    assert_same_views([home, office, late])


def test_machines_with_different_turn_models_hold_the_same_views(machines: Opener) -> None:
    rng = random.Random(11)
    big, small = machines("home", SMALL), machines("office", SMALLER)
    for n in range(300):
        (big if n % 2 else small).append("user", text(rng, n))
        compact_some(rng.choice((big, small)), rng, 3)
    assert_same_views([big, small])
    assert big.core.budget.sizes() == small.core.budget.sizes()


def test_a_machine_opened_again_with_the_same_model_leaves_the_budget_as_it_is(
    machines: Opener,
) -> None:
    big = machines("home", SMALL)
    big.append("user", "first")
    small = machines("office", SMALLER)  # a new machine's model: the chat takes its budget
    assert small.core.budget.sizes() == SMALLER.sizes()
    big.close()
    again = machines("home", SMALL)  # home's model did not change: it does not take it back
    assert again.core.budget.sizes() == SMALLER.sizes()
    assert_same_views([again, small])
