"""The slash commands' reading and completion, and the status bar's text (no app running)."""

from __future__ import annotations

from pathlib import Path

import pytest
from msgspec.structs import replace
from rich.cells import cell_len
from tui_support import MODEL

from evertalk import slash
from evertalk.agent.session import AgentStatus
from evertalk.agent.subagents import RunningAgent, SubagentError
from evertalk.config import ConfigError
from evertalk.protocol.events import CatchingUp
from evertalk.service import commands as served
from evertalk.tui import commands
from evertalk.tui.commands import CommandError, Invocation, SlashSuggester, matching, read_line
from evertalk.tui.status import MemoryWatch, dollars, kilobytes, status_line
from evertalk.tui.turn_rows import refused_key
from evertalk.tui.widgets import describe_call


def test_a_line_is_a_command_or_a_message() -> None:
    assert read_line("hello") == "hello"
    assert read_line("/memory") == Invocation(slash.MEMORY, "/memory", ())
    assert read_line("/memory zoom 0 8") == Invocation(slash.ZOOM, "/memory zoom", ("0", "8"))
    assert read_line("/model  claude-x ") == Invocation(slash.MODEL, "/model", ("claude-x",))
    assert read_line("/agents") == Invocation(slash.AGENTS, "/agents", ())
    stop = Invocation(slash.AGENTS_STOP, "/agents stop", ("Scout",))
    assert read_line("/agents stop Scout") == stop
    assert read_line("/nope") == Invocation(None, "/nope", ())
    assert read_line("//memory is a word") == "/memory is a word"
    assert read_line("/etc/hosts is empty") == "/etc/hosts is empty"


def test_completion_follows_what_is_typed() -> None:
    suggester = SlashSuggester()
    assert suggester.suggest("/") == "/help"
    assert suggester.suggest("/m") == "/memory"
    assert suggester.suggest("/memory") == "/memory zoom "
    assert suggester.suggest("/memory-") == "/memory-model "
    assert suggester.suggest("/mo") == "/model "
    assert suggester.suggest("/model") is None
    assert suggester.suggest("/i") == "/image " and suggester.suggest("/in") == "/instructions"
    assert suggester.suggest("/s") == "/setup" and suggester.suggest("/setup") is None
    assert [c.name for c in matching("/se")] == ["/setup"]
    assert suggester.suggest("hello") is None
    assert suggester.suggest("/memory\nmore") is None
    memory = ["/memory", "/memory zoom", "/memory search", "/memory-model"]
    assert [c.name for c in matching("/mem")] == memory
    assert [c.name for c in matching("/memory zoom 3")] == ["/memory zoom"]
    assert [c.name for c in matching("/model x")] == ["/model"]
    assert suggester.suggest("/a") == "/agents" and suggester.suggest("/agents") == "/agents stop "
    assert [c.name for c in matching("/agents stop Sc")] == ["/agents stop"]
    assert matching("hello") == [] and matching("//x") == []


def test_the_help_lists_every_command_and_key() -> None:
    text = commands.help_text()
    for command in slash.COMMANDS:
        assert command.usage in text
    for key in ("Enter", "Ctrl+J", "Ctrl+C", "Ctrl+D"):
        assert key in text


def test_agents_lists_and_stops_subagents() -> None:
    assert served.agents_text([], ()) == "no subagent is running"
    running = [
        RunningAgent("Scout", "count the files", 4.2, 1),
        RunningAgent("Digger-2", "find " + "where " * 30, 3725, 17),
    ]
    lines = served.agents_text(running, ()).splitlines()
    assert lines[0] == "2 subagents running:" and lines[-1] == "/agents stop NAME stops one"
    assert lines[1] == "  Scout          4s     1 message  count the files"
    assert lines[2].startswith("  Digger-2   1h 02m   17 messages  find where where")
    assert lines[2].endswith("where …") and len(lines[2]) < 40 + served.TASK_SHOWN
    assert [served.duration(s) for s in (0, 59.9, 60, 185, 7260)] == [
        "0s",
        "59s",
        "1m 00s",
        "3m 05s",
        "2h 01m",
    ]
    with pytest.raises(CommandError, match="usage: /agents"):
        served.agents_text(running, ("list",))

    stopped: list[str] = []

    def stop(name: str) -> str:
        if name != "Scout":
            raise SubagentError(f"no subagent named {name} is running")
        stopped.append(name)
        return "[Scout] stopped by the user"

    assert served.stop_text(stop, ("Scout",)) == (
        "stopped Scout; Ever is told: [Scout] stopped by the user"
    )
    assert stopped == ["Scout"]
    with pytest.raises(CommandError, match=r"^no subagent named Nope is running; /agents lists"):
        served.stop_text(stop, ("Nope",))
    with pytest.raises(CommandError, match="usage: /agents stop NAME"):
        served.stop_text(stop, ())


def test_model_commands_change_the_agent(monkeypatch: pytest.MonkeyPatch) -> None:
    used: list[str] = []
    shown = served.model_text(MODEL, used.append, ())
    assert shown.startswith(f"turn model: {MODEL}\n") and used == []
    monkeypatch.setenv("EVERTALK_MODEL", "pinned")
    said = served.model_text(MODEL, used.append, ("claude-next",))
    assert used == ["claude-next"]
    assert said.startswith("turn model: claude-next from the next turn on")
    assert "EVERTALK_MODEL is set: it overrides config.toml at the next start" in said
    with pytest.raises(CommandError):
        served.model_text(MODEL, used.append, ("two", "words"))

    def refuse(model: str) -> None:
        raise ConfigError(f"config.toml: bad model {model!r}")

    with pytest.raises(CommandError, match="bad model 'x y'"):
        served.model_text(MODEL, refuse, ("x y",))
    assert used == ["claude-next"]


def test_memory_model_commands_change_the_compactor() -> None:
    calls: list[tuple[str, str | None]] = []

    def use(model: str, effort: str | None) -> None:
        calls.append((model, effort))

    shown = served.memory_model_text("claude-haiku-5-5", "high", use, ())
    assert shown.startswith("compaction model: claude-haiku-5-5, effort high\n") and not calls
    said = served.memory_model_text("claude-haiku-5-5", "high", use, ("medium",))
    assert calls == [("claude-haiku-5-5", "medium")]  # an effort alone keeps the model
    assert "claude-haiku-5-5, effort medium from the compactor's next call" in said
    said = served.memory_model_text("claude-haiku-5-5", "high", use, ("claude-x",))
    assert calls[-1] == ("claude-x", None) and "claude-x, effort high" in said
    with pytest.raises(CommandError, match="effort is one of"):
        served.memory_model_text("m", "high", use, ("m", "hard"))
    assert len(calls) == 2


def test_a_refused_key_is_told_by_its_kind_never_by_its_words() -> None:
    assert refused_key("auth")
    for other in ("overloaded", "bad_request", "server", None):
        assert not refused_key(other), other


def test_instructions_file_is_created_private(tmp_path: Path) -> None:
    path = commands.instructions_file(tmp_path / "home")
    assert path == tmp_path / "home" / "instructions.md"
    assert path.read_text() == "" and path.stat().st_mode & 0o777 == 0o600
    path.write_text("Be brief.")
    assert commands.instructions_file(tmp_path / "home").read_text() == "Be brief."


def status(**changes: object) -> AgentStatus:
    fields: dict[str, object] = {
        "model": "claude-sonnet-5-5",
        "view_bytes": 84_213,
        "view_ceiling": 128_000,
        "view_floor": 64_000,
        "merging": False,
        "view_merges": 0,
        "compactor_running": 0,
        "compactor_queued": 0,
        "cost": 0.4213,
        "turn_cost": 0.4,
        "busy": False,
        "subagents": 0,
    }
    fields.update(changes)
    return AgentStatus(**fields)  # type: ignore[arg-type]


def test_the_status_line() -> None:
    assert status_line(status()) == "claude-sonnet-5-5 · mem 84K/128K · summaries: idle · $0.42"
    busy = status_line(status(compactor_running=3, compactor_queued=12, busy=True, subagents=2))
    assert busy == (
        "claude-sonnet-5-5 · mem 84K/128K · summaries: 3 running, 12 queued · $0.42 · 2 subagents"
        " · working (Ctrl+C cancels)"
    )
    merging = status_line(status(view_bytes=131_200, merging=True, compactor_running=8))
    assert merging.startswith("claude-sonnet-5-5 · mem 131K/128K, merging · summaries: 8 running ·")
    assert "mem 84K/32K · " in status_line(status(view_ceiling=32_000))  # the agent's ceiling
    assert kilobytes(470) == "470B" and kilobytes(9_940) == "9.9K" and kilobytes(128_000) == "128K"
    assert dollars(0) == "$0.00" and dollars(0.00123) == "$0.0012" and dollars(12.3) == "$12.30"


def test_the_status_line_counts_failed_summaries() -> None:
    failing = status(compactor_running=3, compactor_queued=12, compactor_failed=1)
    assert " · summaries: 3 running, 12 queued, 1 failed · " in status_line(failing)
    only = status_line(status(compactor_failed=2, compactor_error="12+1: Anthropic: Overloaded"))
    assert only == "claude-sonnet-5-5 · mem 84K/128K · summaries: 2 failed · $0.42"
    assert " · summaries: 1 failed · " in status_line(status(compactor_failed=1))


def test_the_status_line_says_summaries_are_paused_not_failed() -> None:
    """The compactor's model cannot be reached (or used): the nodes it tried are not failures,
    and no count of them or time to go means much until it can."""
    why = "12+1: Anthropic: could not connect (at http://localhost:11434)"
    paused = status(compactor_queued=40, compactor_failed=8, compactor_error=why)
    paused = replace(paused, compactor_paused=True)
    assert status_line(paused) == (
        "claude-sonnet-5-5 · mem 84K/128K · summaries paused (48 to go) · $0.42"
    )
    far = replace(paused, catching_up=CatchingUp(3_137, 3_900.0))
    assert " · summaries paused (3,137 to go) · " in status_line(far)
    assert status_line(replace(paused, busy=True), 62) == (
        "claude-sonnet-5-5 · mem 84K/128K · summaries paused · working"
    )


def test_the_status_line_fits_its_width_dropping_the_least_first() -> None:
    busy = status(compactor_running=3, compactor_queued=12, busy=True, subagents=2)
    assert status_line(busy, 200) == status_line(busy)
    assert status_line(busy, 78) == (
        "claude-sonnet-5-5 · mem 84K/128K · $0.42 · 2 subagents · working"
    )  # the compactor's activity and the Ctrl+C reminder went, "working" stays whole
    idle = status(busy=True)
    assert status_line(idle, 58) == "claude-sonnet-5-5 · mem 84K/128K · $0.42 · working"
    failing = status(compactor_running=3, compactor_failed=1, busy=True)
    assert status_line(failing, 75) == (
        "claude-sonnet-5-5 · mem 84K/128K · summaries: 1 failed · $0.42 · working"
    )
    assert status_line(failing, 69) == (
        "claude-sonnet-5-5 · mem 84K/128K · summaries: 1 failed · working"
    )
    for width in range(1, 120):
        line = status_line(busy, width)
        assert cell_len(line) <= width, width
        assert "(Ctrl+C" not in line or line.endswith("(Ctrl+C cancels)"), line
    assert status_line(busy, 20) == "claude-sonnet-5-5…"  # cut only as a last resort


def test_the_status_line_keeps_a_model_that_calls_no_tools_in_view() -> None:
    unused = status(tools_unused=True, busy=True)
    assert status_line(unused).startswith("claude-sonnet-5-5 · tools unused · mem 84K/128K · ")
    assert status_line(unused, 64) == "claude-sonnet-5-5 · tools unused · mem 84K/128K · working"
    assert status_line(unused, 50) == "claude-sonnet-5-5 · mem 84K/128K · working"
    assert "tools unused" not in status_line(status())


def test_the_write_question_counts_lines_in_words() -> None:
    assert describe_call("write", {"path": "out.txt", "content": "one\n"}).startswith(
        "out.txt: 1 line\n"
    )
    assert describe_call("write", {"path": "out.txt", "content": "a\nb"}).startswith(
        "out.txt: 2 lines\n"
    )


def test_file_sizes_read_as_people_say_them() -> None:
    sizes = (0, 312, 999, 1_000, 4_123, 9_990, 86_000, 999_600, 2_400_000)
    assert [commands.file_size(size) for size in sizes] == [
        "0 B",
        "312 B",
        "999 B",
        "1.0 KB",
        "4.1 KB",
        "10 KB",
        "86 KB",
        "1.0 MB",
        "2.4 MB",
    ]


STARTED = "memory: the view passed 128 KB, merging it down to 64 KB as summaries come"


def test_a_batch_that_waits_gets_a_row_when_seen_and_one_when_done() -> None:
    watch = MemoryWatch()
    assert watch.sample(status(view_bytes=127_900, view_merges=40)) is None
    started = watch.sample(status(view_bytes=131_200, view_merges=40, merging=True))
    assert started == f"{STARTED} (now 131.2 KB)"
    # it merges part of the way and grows by a message: no more rows until it ends
    assert watch.sample(status(view_bytes=98_000, view_merges=70, merging=True)) is None
    assert watch.sample(status(view_bytes=99_000, view_merges=70, merging=True)) is None
    ended = watch.sample(status(view_bytes=63_800, view_merges=95))
    assert ended == "memory: merged, view now 63.8 KB (was 131.2 KB)"
    assert watch.sample(status(view_bytes=64_300, view_merges=95)) is None


def test_a_batch_done_between_two_samples_gets_one_row() -> None:
    watch = MemoryWatch()
    assert watch.sample(status(view_bytes=120_000, view_merges=12)) is None
    assert watch.sample(status(view_bytes=127_600, view_merges=12)) is None  # it grows
    assert watch.sample(status(view_bytes=127_000, view_merges=12)) is None  # a leaf got built
    ended = watch.sample(status(view_bytes=63_400, view_merges=80))
    assert ended == "memory: merged, view now 63.4 KB (was 127.0 KB)"
    assert watch.sample(status(view_bytes=64_000, view_merges=80)) is None


def test_a_chat_opened_during_a_batch_says_so_first() -> None:
    watch = MemoryWatch()
    assert watch.sample(status(view_bytes=128_512, merging=True)) == f"{STARTED} (now 128.5 KB)"
    assert watch.sample(status(view_bytes=128_520, view_merges=3, merging=True)) is None
    assert watch.sample(status(view_bytes=60_000, view_merges=80)) == (
        "memory: merged, view now 60.0 KB (was 128.5 KB)"
    )
    opened = MemoryWatch()
    assert opened.sample(status(view_merges=500)) is None  # merges before this session
