"""evertalk against a real local model: llama-cpp-python's OpenAI-compatible server serving
SmolLM2-135M-Instruct (issue 11, "Done means").

Every test works in a fresh evertalk home configured for `provider = "llamacpp"` and drives the
real command line: `evertalk -p`, `-p --json`, `evertalk memory compact`, `evertalk usage`.
The model is tiny and its words are not checked, only what evertalk does with them.
"""

from __future__ import annotations

import json
import os
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from chat_fixture import write_chat
from e2e_support import (
    Run,
    Server,
    compaction_figures,
    json_lines,
    ledger_records,
    memory_status,
    run_evertalk,
    tree_records,
    write_config,
)
from tool_proxy import ToolForcingProxy

TURN_TIMEOUT = float(os.environ.get("E2E_TURN_TIMEOUT", "600"))
"""Seconds for one `-p` run, the wait for the summaries in flight at its end included."""
COMPACT_TIMEOUT = float(os.environ.get("E2E_COMPACT_TIMEOUT", "3600"))
"""Seconds `memory compact` gets for the 100-message chat before it is stopped (Ctrl+C, which
keeps what was built); the figures are taken either way."""
CATCH_UP_TIMEOUT = 120
"""`[memory] catch_up_timeout` of the 100-message chat: how long its turn waits for summaries
if the compaction did not finish (evertalk's default is 300 s)."""


def _tail(text: str, lines: int = 5) -> list[str]:
    return text.strip().splitlines()[-lines:]


# --- plain turns -------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def turn_home(server: Server, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One home for the plain turns, the --json turn and the usage they leave behind. The
    compactor's concurrency is evertalk's default for a local provider."""
    home = tmp_path_factory.mktemp("turns") / "home"
    write_config(home, server.base_url, server.model)
    return home


def test_p_turns_answer(turn_home: Path, figures: dict[str, Any]) -> None:
    """Two `-p` turns in a row: each prints a reply and exits 0, and the chat logs them."""
    runs: list[Run] = []
    for message in (
        "Hello! In one short sentence: what is a binary tree?",
        "Thanks. Name one everyday use of it, in one sentence.",
    ):
        run = run_evertalk(turn_home, "-p", message, timeout=TURN_TIMEOUT)
        runs.append(run)
        figures.setdefault("p_turns", []).append(
            {
                "seconds": round(run.seconds, 1),
                "exit": run.returncode,
                "timed_out": run.timed_out,
                "reply_bytes": len(run.stdout.strip().encode()),
                "stderr": _tail(run.stderr),
            }
        )
        assert not run.timed_out, run.describe()
        assert run.returncode == 0, run.describe()
        assert run.stdout.strip(), "no reply on standard output\n" + run.describe()
    status = memory_status(turn_home)
    assert status["messages"] >= 4, status


def test_json_turn_prints_events(turn_home: Path, figures: dict[str, Any]) -> None:
    """`-p --json`: one JSON object a line, a turn that starts, streams text, logs its reply
    and ends "done"; the streamed text is the logged reply."""
    run = run_evertalk(
        turn_home, "-p", "List three colours, separated by commas.", "--json", timeout=TURN_TIMEOUT
    )
    assert not run.timed_out, run.describe()
    events = json_lines(run.stdout)
    kinds = Counter(str(event.get("type")) for event in events)
    usage_events = [e for e in events if e.get("type") == "call_usage"]
    figures["json_turn"] = {
        "seconds": round(run.seconds, 1),
        "exit": run.returncode,
        "event_types": dict(kinds),
        "call_usage": usage_events[:2],
        "stderr": _tail(run.stderr),
    }
    assert run.returncode == 0, run.describe()
    assert kinds["turn_started"] >= 1, kinds
    assert kinds["text_delta"] >= 1, kinds
    replies = [e for e in events if e.get("type") == "reply_logged"]
    assert replies and str(replies[-1].get("text", "")).strip(), events[-5:]
    ended = [e for e in events if e.get("type") == "turn_ended"]
    assert ended and ended[-1].get("reason") == "done", ended
    assert events[-1].get("type") == "turn_ended", events[-3:]
    streamed = "".join(str(e.get("text", "")) for e in events if e.get("type") == "text_delta")
    logged = "".join(str(e.get("text", "")) for e in replies)
    assert streamed.strip() == logged.strip()


def test_usage_shows_not_reported(turn_home: Path, figures: dict[str, Any]) -> None:
    """The server sends no token counts in its streams: `evertalk usage` says "not reported",
    rather than summing the unknown counts as zeros ("- of 0 prompt tokens")."""
    if not any(r.get("role") == "turn" for r in ledger_records(turn_home)):
        run = run_evertalk(turn_home, "-p", "Say hi.", timeout=TURN_TIMEOUT)
        assert run.returncode == 0, run.describe()
    run = run_evertalk(turn_home, "usage", timeout=60)
    as_json = run_evertalk(turn_home, "usage", "--json", timeout=60)
    turns = [r for r in ledger_records(turn_home) if r.get("role") == "turn"]
    figures["usage"] = {
        "text": run.stdout.strip().splitlines(),
        "turn_ledger_records": turns[:2],
    }
    assert run.returncode == 0, run.describe()
    assert as_json.returncode == 0, as_json.describe()
    json.loads(as_json.stdout)
    assert turns, "the turns left no ledger record"
    text = run.stdout.lower()
    assert "not reported" in text, run.stdout
    assert "of 0 prompt tokens" not in text, run.stdout


# --- a forced tool call --------------------------------------------------------------------------


def test_forced_tool_call_round_trip(
    server: Server, tmp_path: Path, figures: dict[str, Any]
) -> None:
    """The turn's first call is made to call `read` (see tool_proxy.py: the server's own
    `tool_choice`); evertalk runs it, sends its result back, and the model answers: the turn
    ends "done". Every request of that round trip must be one the server accepts."""
    work = tmp_path / "work"
    work.mkdir()
    (work / "notes.txt").write_text("The locker code is 4417.\n", encoding="utf-8")
    home = tmp_path / "home"
    with ToolForcingProxy(server.base_url, "read") as proxy:
        write_config(home, proxy.base_url, server.model)
        run = run_evertalk(
            home,
            "-p",
            "Read the file notes.txt and tell me the locker code.",
            "--json",
            "--workdir",
            str(work),
            timeout=TURN_TIMEOUT,
        )
        chats = proxy.chat_exchanges()
    events = json_lines(run.stdout)
    tools = [e for e in events if e.get("type") in ("tool_started", "tool_finished")]
    ended = [e for e in events if e.get("type") == "turn_ended"]
    figures["tool_round_trip"] = {
        "seconds": round(run.seconds, 1),
        "exit": run.returncode,
        "tool_events": tools,
        "turn_ended": ended,
        "requests": [
            {k: v for k, v in e.as_dict().items() if k != "roles"} | {"messages": len(e.roles)}
            for e in chats
        ],
        "stderr": _tail(run.stderr),
    }
    forced = [i for i, e in enumerate(chats) if e.forced]
    assert forced, "no request offered tools with tool_choice auto: nothing was forced"
    first = chats[forced[0]]
    assert first.status == 200, first.error_body
    assert "tool_calls" in first.finish_reasons, first.as_dict()
    started = [e for e in events if e.get("type") == "tool_started"]
    assert started and started[0].get("name") == "read", events[:10]
    assert any(e.get("type") == "tool_finished" for e in events), tools
    back = [e for e in chats[forced[0] + 1 :] if e.tool_results]
    assert back, "the tool's result was never sent back to the model\n" + run.describe()
    assert back[0].status == 200, (
        f"the server refused the request that carries the tool's result "
        f"(HTTP {back[0].status}; an assistant message with content null: "
        f"{back[0].null_content}): {back[0].error_body}"
    )
    assert not run.timed_out, run.describe()
    assert ended and ended[-1].get("reason") == "done", run.describe()
    assert run.returncode == 0, run.describe()


# --- memory compact on 100 messages -------------------------------------------------------------


@dataclass(frozen=True)
class Compaction:
    home: Path
    before: dict[str, Any]
    run: Run
    after: dict[str, Any]


@pytest.fixture(scope="module")
def compacted(
    server: Server, tmp_path_factory: pytest.TempPathFactory, figures: dict[str, Any]
) -> Compaction:
    """A 100-message chat with no summaries, compacted once by `evertalk memory compact` with
    the compactor's concurrency set to 1; the figures of that run."""
    home = tmp_path_factory.mktemp("compact") / "home"
    write_config(
        home, server.base_url, server.model, concurrency=1, catch_up_timeout=CATCH_UP_TIMEOUT
    )
    write_chat(home)
    before = memory_status(home)
    run = run_evertalk(home, "memory", "compact", timeout=COMPACT_TIMEOUT)
    after = memory_status(home)
    calls = compaction_figures(ledger_records(home), tree_records(home))
    usage = run_evertalk(home, "usage", "--json", timeout=60)
    try:
        summary = json.loads(usage.stdout)
    except ValueError:
        summary = {}
    done = int(before.get("unbuilt") or 0) - int(after.get("unbuilt") or 0)
    figures["memory_compact"] = {
        "messages": before.get("messages"),
        "unbuilt_before": before.get("unbuilt"),
        "unbuilt_after": after.get("unbuilt"),
        "seconds": round(run.seconds, 1),
        "seconds_per_node": round(run.seconds / done, 1) if done else None,
        "minutes_for_all_at_that_pace": round(run.seconds / done * before["unbuilt"] / 60)
        if done
        else None,
        "exit": run.returncode,
        "timed_out": run.timed_out,
        "status_after": {k: after.get(k) for k in ("built", "free", "cut", "unbuilt")},
        **calls.as_dict(),
        "usage_calls_per_node": summary.get("calls_per_node"),
        "usage_rejections": summary.get("rejections"),
        "last_lines": _tail(run.stderr, 8),
    }
    return Compaction(home, before, run, after)


def test_memory_compact_builds_every_node(compacted: Compaction) -> None:
    """With concurrency 1, `memory compact` ends on its own with every node of the 100-message
    chat built (a node cut from its input after three failures counts as built)."""
    assert compacted.before["messages"] == 100, compacted.before
    assert compacted.before["unbuilt"] > 0, compacted.before
    assert not compacted.run.timed_out, (
        f"not done after {COMPACT_TIMEOUT:.0f} s "
        f"({compacted.after.get('unbuilt')} nodes still unbuilt)\n" + compacted.run.describe()
    )
    assert compacted.run.returncode == 0, compacted.run.describe()
    assert compacted.after["unbuilt"] == 0, compacted.after


def test_turn_in_the_hundred_message_chat(compacted: Compaction, figures: dict[str, Any]) -> None:
    """A turn in the 100-message chat, once `memory compact` is over, fits the 8,192-token
    window and is answered. If the compaction did not finish, the chat is still behind: the
    turn waits for summaries at most `catch_up_timeout` (set to CATCH_UP_TIMEOUT here), then
    goes on with coarse lines; it must not fail for that either."""
    run = run_evertalk(
        compacted.home, "-p", "Which flight did we book to Lisbon?", timeout=TURN_TIMEOUT
    )
    status = memory_status(compacted.home)
    figures["turn_in_the_hundred_message_chat"] = {
        "seconds": round(run.seconds, 1),
        "exit": run.returncode,
        "chat_behind": bool(compacted.after.get("unbuilt")),
        "view_bytes": status.get("view_bytes"),
        "stderr": _tail(run.stderr),
    }
    assert not run.timed_out, run.describe()
    assert run.returncode == 0, run.describe()
    assert run.stdout.strip(), run.describe()
