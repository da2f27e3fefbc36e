"""The daily budget of a `-p` turn is the service's to check: a retry over the budget is refused
as a new message is, in the service's words, unless `--over-budget`; a client that does not ask
for the check (the app, which asks its user first) is not refused."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import pytest

from agent.test_turn_support import MODEL, log_of
from evertalk.client.connection import connect
from evertalk.protocol.replies import Accepted, Error
from evertalk.protocol.requests import Send
from fakes import AnthropicFake, Fail
from fakes import chat as answer
from served_home import fake, run, served_home
from spending import spent

__all__ = ["fake"]  # the fixture, used by name

REFUSED = (
    "evertalk: not sent: today's spending, $6.00, is over the daily budget of $5.00 "
    "([budget] daily in config.toml); --over-budget sends it all the same\n"
)


@pytest.fixture
def home(tmp_path: Path, fake: AnthropicFake) -> Iterator[Path]:
    with served_home(tmp_path, fake, stop=True) as home:
        with (home / "config.toml").open("a") as config:
            config.write("\n[budget]\ndaily = 5.00\n")
        yield home


def test_a_retry_over_the_budget_is_refused_unless_asked_for(
    home: Path, fake: AnthropicFake
) -> None:
    fake.behaviour.push(Fail(400, "no"), answer("Done."))  # type: ignore[attr-defined]
    assert run(home, "-p", "rename the backups").returncode == 1
    spent(home, 6.00, model=MODEL)
    refused = run(home, "-p", "--retry")
    assert (refused.returncode, refused.stdout, refused.stderr) == (1, "", REFUSED)
    allowed = run(home, "-p", "--retry", "--over-budget")
    assert (allowed.returncode, allowed.stdout) == (0, "Done.\n"), allowed.stderr
    assert [kind for kind, _ in log_of(home)] == ["user", "echo", "ever"]


def test_only_a_send_that_asks_for_the_check_is_refused(home: Path, fake: AnthropicFake) -> None:
    fake.behaviour.push(answer("Started."))  # type: ignore[attr-defined]
    assert run(home, "-p", "start the service").returncode == 0
    spent(home, 6.00, model=MODEL)
    with connect(home, "app") as connection:
        connection.send(Send(text="checked", key="k-1", within_budget=True))
        refused = connection.receive()
        assert isinstance(refused, Error) and refused.kind == "over_budget"
        # the turn that started the service cost a cent or so, by the ledger's prices
        pattern = re.escape(REFUSED.removeprefix("evertalk: ").removesuffix("\n"))
        assert re.fullmatch(pattern.replace(r"\$6\.00", r"\$6\.\d\d"), refused.message)
        connection.send(Send(text="asked in the app", key="k-2"))
        while not isinstance(frame := connection.receive(), Accepted):
            assert not isinstance(frame, Error), frame
    assert "checked" not in [text for _, text in log_of(home)]
