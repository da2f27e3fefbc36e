"""Two machines' chats on one database: each folds the other's changes in sequence order, so
both hold the same log, tree and views; a node is built once; a reopen finds it all."""

from __future__ import annotations

import random
from collections.abc import Callable, Iterator
from contextlib import ExitStack
from pathlib import Path

import pytest

from evertalk.chat import Chat
from evertalk.memory import Budget, Node
from evertalk.memory.tree import CUT
from evertalk.pgstore.session import PgSession
from evertalk.shared_chat import SharedChat

SMALL = Budget(8_000, 4_000, 4_000, 2_000)  # views that merge within a few dozen messages
Opener = Callable[[str], SharedChat]


@pytest.fixture
def machines(pg_url: str, tmp_path: Path) -> Iterator[Opener]:
    with ExitStack() as stack:

        def open_machine(name: str) -> SharedChat:
            session = PgSession(pg_url, name)
            chat = SharedChat.open_shared(session, tmp_path / name / "chat", budget=SMALL)
            stack.callback(chat.close)
            return chat

        yield open_machine


def summary(chat: Chat, node: Node) -> str:
    """A line that copies the first words below it (as a compactor might)."""
    if node[0] == 0:
        return "about: " + chat.record(node[1]).text[:60]
    halves = [chat.text_of((node[0] - 1, 2 * node[1] + n)) or "" for n in (0, 1)]
    return " / ".join(half[:100] for half in halves)


def compact_some(chat: SharedChat, rng: random.Random, most: int) -> int:
    """Build up to `most` nodes that may be built now, as a compactor would (claim first)."""
    built = 0
    for _ in range(most):
        ready = [(0, i) for i in chat.ready_leaves()] + chat.batch_parents()
        merge = chat.first_merge(set())
        if merge is not None:
            ready.append(merge)
        ready = [node for node in ready if chat.may_build(node)]
        if not ready:
            break
        node = rng.choice(ready)
        if chat.claim(node):
            chat.build(node, summary(chat, node))
            built += 1
    return built


def test_two_machines_alternating_hold_the_same_chat(machines: Opener) -> None:
    a, b = machines("home"), machines("office")
    rng = random.Random(7)
    for n in range(60):
        writer = a if n % 2 == 0 else b
        writer.append("user", f"message {n} " + "words " * rng.randrange(20, 200))
        compact_some(rng.choice((a, b)), rng, 3)
    a.follow()
    b.follow()
    assert a.t == b.t == 60
    assert [a.record(i).text for i in range(60)] == [b.record(i).text for i in range(60)]
    assert a.core.saved() == b.core.saved()
    assert a.render_view() == b.render_view()
    assert a.core.tree.flags == b.core.tree.flags
    assert b.others == [("home", i) for i in range(60) if i % 2 == 0]


def test_a_node_built_by_one_machine_is_not_built_again(machines: Opener) -> None:
    a, b = machines("home"), machines("office")
    a.append("user", "one " * 300)
    b.follow()
    leaf = (0, 0)
    assert a.claim(leaf)
    assert not b.claim(leaf)  # a holds the lease
    assert leaf not in [(0, i) for i in b.ready_leaves()]
    a.build(leaf, "a line about one")
    b.build(leaf, "a second line, from a machine that did not claim")  # refused, and counted
    assert b.text_of(leaf) == a.text_of(leaf) == "a line about one"
    assert a.shared.session.run(lambda chat: chat.refused, idempotent=True) == 1
    b.build(leaf, "once more")  # folded by now: not sent at all
    assert a.shared.session.run(lambda chat: chat.refused, idempotent=True) == 1


def test_a_reopen_finds_what_both_machines_did(machines: Opener) -> None:
    a, b = machines("home"), machines("office")
    rng = random.Random(3)
    for n in range(40):
        (a if n % 3 else b).append("user", f"note {n} " + "text " * rng.randrange(10, 150))
        compact_some(a, rng, 2)
        compact_some(b, rng, 2)
    b.close()
    a.follow()
    again = machines("office")
    assert again.t == 40
    assert again.core.tree.flags == a.core.tree.flags
    assert again.render_view() == a.render_view()


def test_a_failed_node_is_cut_for_every_machine(machines: Opener) -> None:
    a, b = machines("home"), machines("office")
    a.append("user", "long " * 400)
    leaf = (0, 0)
    for _ in range(3):
        b.fail(leaf)
    a.follow()
    assert a.is_built(leaf) and b.is_built(leaf)
    assert a.text_of(leaf) == b.text_of(leaf)
    assert a.core.tree.flag(leaf) == b.core.tree.flag(leaf) == CUT  # as a cut on both


def test_failures_are_counted_for_the_chat_not_the_machine(machines: Opener) -> None:
    a, b = machines("home"), machines("office")
    a.append("user", "long " * 400)
    leaf = (0, 0)
    a.fail(leaf)
    b.fail(leaf)
    assert not a.is_built(leaf) and not b.is_built(leaf)
    a.fail(leaf)  # the third, on either machine, cuts the node
    b.follow()
    assert a.core.tree.flag(leaf) == b.core.tree.flag(leaf) == CUT
    count = a.shared.session.run(
        lambda chat: chat.conn.execute("SELECT count(*) FROM evertalk.failures").fetchone(),
        idempotent=True,
    )
    assert count == (0,)  # a cut node's failures are done with


def test_the_shape_read_at_an_open_is_every_nodes_size_and_flag(machines: Opener) -> None:
    a = machines("home")
    texts = ["plain", "with a NUL \x00 inside", "\x01nul\x01 starts like the mark", "é \\0 ü"]
    for n in range(600):  # more than two rows of the shape table on level 0
        a.append("user", f"{n} " + texts[n % 4] * (1 + n % 50))
    rng = random.Random(5)
    while compact_some(a, rng, 50):
        pass
    snapshot = a.shared.session.run(lambda chat: chat.snapshot(), idempotent=True)
    nodes = a.shared.session.run(lambda chat: chat.read_nodes(limit=100_000), idempotent=True)
    sizes = [[0] * len(level) for level in snapshot.shape.flags]
    flags = [[0] * len(level) for level in snapshot.shape.flags]
    for node in nodes:
        if node.l < len(flags) and node.i < len(flags[node.l]):
            sizes[node.l][node.i] = len(node.text.encode("utf-8"))
            flags[node.l][node.i] = node.flag
    assert [list(level) for level in snapshot.shape.sizes] == sizes
    assert [list(level) for level in snapshot.shape.flags] == flags
    assert any(flags[1])  # merges were built: more than the leaves' level is checked
    assert any("\x00" in node.text for node in nodes)  # stored escaped, its size as written
