"""A full disk under the running service, then room again: the service says what is wrong, never
advises a retry that cannot work, and goes on by itself once the disk takes writes (it reopens
the chat at the next message), with nothing lost and nothing logged twice.

The disk is filled for the service alone, without root: its file size limit (RLIMIT_FSIZE, set
from outside with prlimit) is lowered to a few bytes past the log's end, so that the next line
is cut short as on a full disk, then raised again.
"""

from __future__ import annotations

import json
import resource
from pathlib import Path
from typing import Any

import pytest
from test_held_crash import fake, home
from test_service_socket import run, service_pid

from agent.test_turn_support import log_of
from fakes import AnthropicFake
from fakes import chat as answer

__all__ = ["fake", "home"]  # the fixtures, used by name

pytestmark = pytest.mark.skipif(
    not hasattr(resource, "prlimit"), reason="filling a service's disk needs prlimit (Linux)"
)

FIRST = "first question: " + "the backup ran at night " * 12  # a long line: the log outgrows
# the service's own log file, which the lowered limit must leave alone


def fill_disk(home: Path, pid: int) -> None:
    """The service may grow no file past the log's end and a few bytes."""
    [day] = (home / "chat" / "main").glob("*.jsonl")
    limit = day.stat().st_size + 16
    resource.prlimit(pid, resource.RLIMIT_FSIZE, (limit, resource.RLIM_INFINITY))


def free_disk(pid: int) -> None:
    resource.prlimit(pid, resource.RLIMIT_FSIZE, (resource.RLIM_INFINITY,) * 2)


def status(home: Path) -> tuple[dict[str, Any], str]:
    as_json = run(home, "service", "status", "--json")
    text = run(home, "service", "status")
    assert as_json.returncode == 0 and text.returncode == 0, as_json.stderr + text.stderr
    found: dict[str, Any] = json.loads(as_json.stdout)
    return found, text.stdout


def test_the_service_goes_on_by_itself_once_the_disk_has_room(
    home: Path, fake: AnthropicFake
) -> None:
    started = run(home, "serve")
    assert started.returncode == 0, started.stderr
    pid = service_pid(home)
    answers = [answer(f"{n} answer") for n in ("first", "second", "third")]
    fake.behaviour.push(*answers)  # type: ignore[attr-defined]
    assert run(home, "-p", FIRST).stdout == "first answer\n"

    fill_disk(home, pid)
    full = run(home, "-p", "second question")  # accepted, then the log had no room for it
    assert full.returncode == 1 and full.stdout == ""
    assert "the turn stopped" in full.stderr and "--retry" not in full.stderr
    assert "reopen" in full.stderr  # what happens next, and that nothing need be done for it
    found, said = status(home)
    assert found["pid"] == pid and found["chat_error"]
    assert "the chat takes no changes" in said and found["chat_error"] in said

    still = run(home, "-p", "second question, again")  # no room yet: refused, nothing logged
    assert still.returncode == 1 and "--retry" not in still.stderr
    assert "the disk takes no writes" in still.stderr and "send it again" in still.stderr

    free_disk(pid)
    after = run(home, "-p", "third question")
    assert after.returncode == 0 and after.stdout.endswith("third answer\n"), after
    assert "the disk takes writes again" in after.stderr
    assert service_pid(home) == pid  # the same service: it reopened the chat by itself
    found, said = status(home)
    assert found["chat_error"] is None and "the chat takes no changes" not in said
    assert [text for kind, text in log_of(home) if kind in ("user", "ever")] == [
        FIRST,
        "first answer",
        "second question",  # accepted before the disk filled: answered first (SPEC §6.4)
        "second answer",
        "third question",
        "third answer",
    ]
    stopped = run(home, "service", "stop")
    assert stopped.returncode == 0
    opened = run(home, "memory", "status")  # the torn line was ended: no warning
    assert opened.returncode == 0 and opened.stderr == "", opened.stderr


def test_a_message_logged_before_the_disk_filled_is_retried_once_there_is_room(
    home: Path, fake: AnthropicFake
) -> None:
    """The message got into the log, its line in the tree did not: `--retry` is advised, and
    works once the disk takes writes again."""
    started = run(home, "serve")
    assert started.returncode == 0, started.stderr
    pid = service_pid(home)
    short = [f"question {k}: " + "where is the backup " * 4 for k in range(2)]
    answers = [answer(f"answer {k}: " + "it is on the shelf " * 4) for k in range(2)]
    fake.behaviour.push(*answers, answer("second answer"))  # type: ignore[attr-defined]
    for question in short:  # short lines: the tree holds each again in its free parents
        assert run(home, "-p", question).returncode == 0
    [day] = (home / "chat" / "main").glob("*.jsonl")
    [tree] = (home / "chat" / "tree").glob("*.jsonl")
    limit = day.stat().st_size + 200  # room for the question's line, none in the tree
    assert tree.stat().st_size >= limit
    resource.prlimit(pid, resource.RLIMIT_FSIZE, (limit, resource.RLIM_INFINITY))
    full = run(home, "-p", "second question")
    assert full.returncode == 1 and full.stdout == ""
    assert full.stderr.endswith("; evertalk -p --retry tries it again\n"), full.stderr
    free_disk(pid)
    retried = run(home, "-p", "--retry")
    assert (retried.returncode, retried.stdout) == (0, "second answer\n"), retried.stderr
    assert service_pid(home) == pid
    log = [text for kind, text in log_of(home) if kind in ("user", "ever")]
    assert log[4:] == ["second question", "second answer"]
