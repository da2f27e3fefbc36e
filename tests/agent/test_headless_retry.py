"""`evertalk -p` against a flaky server, and `evertalk -p --retry`: subprocesses against the fake
served on loopback, and many runs of the command line in this process (`main`, the same code
without the interpreter's start-up), each a client of the one service the first run started."""

from __future__ import annotations

import socket
import subprocess
from pathlib import Path

import pytest
from test_turn_support import is_compaction, log_of, workdir_beside, write_config

from evertalk.cli import main
from evertalk.client.connection import stop_service
from evertalk.providers.retry import DELAY_VARIABLE
from fakes import AnthropicFake, Fail, Script, serve, summarizer
from fakes import chat as answer
from fakes.behaviours import (
    cut_at_start,
    dropped,
    error_event,
    flaky,
    overloaded,
    rate_limited,
    server_error,
)
from served_home import environment, fake, home
from served_home import run as evertalk_run

__all__ = ["fake", "home"]  # the fixtures, used by name

FAST = "0.005"  # seconds: the backoff's base delay in these tests

RETRY_HINT = "; evertalk -p --retry tries it again"


def run(home: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return evertalk_run(home, *args, env=environment(home) | {DELAY_VARIABLE: FAST})


def kinds(home: Path) -> list[str]:
    return [kind for kind, _ in log_of(home)]


def test_p_retry_answers_the_failed_message_once(home: Path, fake: AnthropicFake) -> None:
    fake.behaviour.push(Fail(400, "no"), answer("Done."))  # type: ignore[attr-defined]
    failed = run(home, "-p", "rename the backups")
    assert failed.returncode == 1 and failed.stdout == ""
    assert failed.stderr.splitlines() == [
        "evertalk: the turn stopped: the model call failed: Anthropic: no" + RETRY_HINT
    ]
    retried = run(home, "-p", "--retry")
    assert retried.returncode == 0, retried.stderr
    assert retried.stdout == "Done.\n"
    assert kinds(home) == ["user", "echo", "ever"]  # the message is logged once
    again = run(home, "--retry", "-p")
    assert again.returncode == 2 and again.stdout == ""
    assert again.stderr.splitlines() == [
        "evertalk: nothing to retry: the last message has a reply (send a new one to go on)"
    ]
    assert kinds(home) == ["user", "echo", "ever"]


def test_the_retries_of_a_turn_are_said_on_stderr(home: Path, fake: AnthropicFake) -> None:
    # every turn request: a 529, then a stream cut after message_start, then the reply
    fake.behaviour.default = flaky(answer("Here."), (overloaded, cut_at_start))  # type: ignore[attr-defined]
    for n in range(2):
        result = run(home, "-p", f"message {n}")
        assert result.returncode == 0, result.stderr
        assert result.stdout == "Here.\n"
        retries = [line for line in result.stderr.splitlines() if line.startswith("retrying")]
        assert len(retries) == 2, result.stderr
        assert retries[0].startswith("retrying (2/10) after ")
        assert retries[0].endswith(" s: server overloaded (529)")
        assert retries[1].startswith("retrying (3/10) after ")
        assert retries[1].endswith(" s: the reply stream broke off")
    assert kinds(home) == ["user", "ever"] * 2


def test_a_server_that_is_not_there_is_said_at_once(tmp_path: Path) -> None:
    """No retry, no backoff (the providers' tests count the connection attempts): one line
    naming the address. The real backoff (no delay variable) would take seconds, if it ran."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    home = tmp_path / "home"
    write_config(home, base_url=f"http://127.0.0.1:{port}", settle=1)
    result = evertalk_run(home, "-p", "hello")
    assert result.returncode == 1 and result.stdout == ""
    assert result.stderr.splitlines() == [
        "evertalk: the turn stopped: the model call failed: Anthropic: could not connect "
        f"(at http://127.0.0.1:{port})" + RETRY_HINT
    ]
    assert kinds(home) == ["user", "echo"]


FAULTS = (
    (overloaded, cut_at_start),
    (),
    (dropped,),
    (rate_limited, error_event),
    (server_error,),
)


def test_fifty_runs_against_a_flaky_server_fail_no_turn(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Every request, turn or compaction, meets up to two faults before it is answered: no
    turn fails, no summary fails, and no message is logged twice."""
    monkeypatch.setenv(DELAY_VARIABLE, FAST)
    for name in ("ANTHROPIC_API_KEY", "ANTHROPIC_BASE_URL", "ANTHROPIC_AUTH_TOKEN"):
        monkeypatch.delenv(name, raising=False)
    behaviour = Script(flaky(answer("Noted."), *FAULTS))
    behaviour.route(is_compaction, flaky(summarizer(100), *FAULTS))
    fake = AnthropicFake(behaviour)
    home = tmp_path / "home"
    monkeypatch.chdir(workdir_beside(home))
    with serve(fake.app) as url:
        write_config(home, base_url=url)
        statuses = [main(["--home", str(home), "-p", f"note {n}"]) for n in range(50)]
        stop_service(home)  # its summaries in flight land before the fake goes
    out, err = capsys.readouterr()
    assert statuses == [0] * 50, err
    assert out == "Noted.\n" * 50
    assert "the turn stopped" not in err and "could not be summarized" not in err
    assert err.count("retrying (") > 50  # the faults were met, and said
    assert kinds(home) == ["user", "ever"] * 50
    assert sum(r.status != 200 or not r.finished for r in fake.records) > 50


def test_retry_flag_goes_with_p_alone(
    home: Path, fake: AnthropicFake, capsys: pytest.CaptureFixture[str]
) -> None:
    for args in (["--retry"], ["-p", "hello", "--retry"], ["-p", "--retry", "--image", "x.png"]):
        assert main(["--home", str(home), *args]) == 2, args
        err = capsys.readouterr().err
        assert len(err.splitlines()) == 1 and "--retry" in err, err
    assert main(["--home", str(home), "-p"]) == 2
    assert "-p" in capsys.readouterr().err
    assert not (home / "chat").exists()  # refused before any chat was opened
