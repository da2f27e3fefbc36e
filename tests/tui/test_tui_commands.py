"""The slash commands' reading and completion, and the status bar's text (no app running)."""

from __future__ import annotations

import tomllib
from pathlib import Path

import pytest
from tui_support import MODEL, write_config

from evertalk.agent.session import AgentStatus
from evertalk.config import load_config
from evertalk.tui import commands
from evertalk.tui.commands import CommandError, Invocation, SlashSuggester, matching, read_line
from evertalk.tui.status import MemoryWatch, dollars, kilobytes, status_line


def test_a_line_is_a_command_or_a_message() -> None:
    assert read_line("hello") == "hello"
    assert read_line("/memory") == Invocation(commands.MEMORY, "/memory", ())
    assert read_line("/memory zoom 0 8") == Invocation(commands.ZOOM, "/memory zoom", ("0", "8"))
    assert read_line("/model  claude-x ") == Invocation(commands.MODEL, "/model", ("claude-x",))
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
    assert suggester.suggest("/i") == "/instructions"
    assert suggester.suggest("hello") is None
    assert suggester.suggest("/memory\nmore") is None
    assert [c.name for c in matching("/mem")] == ["/memory", "/memory zoom", "/memory-model"]
    assert [c.name for c in matching("/memory zoom 3")] == ["/memory zoom"]
    assert [c.name for c in matching("/model x")] == ["/model"]
    assert matching("hello") == [] and matching("//x") == []


def test_the_help_lists_every_command_and_key() -> None:
    text = commands.help_text()
    for command in commands.COMMANDS:
        assert command.usage in text
    for key in ("Enter", "Ctrl+J", "Ctrl+C", "Ctrl+D"):
        assert key in text


def test_model_commands_save_to_the_config_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    write_config(tmp_path)
    shown = commands.model_text(tmp_path, MODEL, ())
    assert shown.startswith(f"turn model: {MODEL}\n")
    monkeypatch.setenv("EVERTALK_MODEL", "pinned")
    said = commands.model_text(tmp_path, MODEL, ("claude-next",))
    assert "next start" in said and "EVERTALK_MODEL is set and overrides it" in said
    monkeypatch.delenv("EVERTALK_MODEL")
    assert load_config(tmp_path).model == "claude-next"
    assert "claude-next from the next start" in commands.model_text(tmp_path, MODEL, ())
    with pytest.raises(CommandError):
        commands.model_text(tmp_path, MODEL, ("two", "words"))
    said = commands.memory_model_text(tmp_path, "claude-haiku-5-5", "high", ("medium",))
    assert "claude-haiku-5-5, effort medium" in said
    saved = tomllib.loads((tmp_path / "config.toml").read_text())
    assert saved["memory"]["effort"] == "medium"
    assert saved["api_key"]  # the rest of the file is kept
    with pytest.raises(CommandError, match="effort is one of"):
        commands.memory_model_text(tmp_path, "m", "high", ("m", "hard"))


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
    assert status_line(status()) == "claude-sonnet-5-5 · mem 84K/128K · memory idle · $0.42"
    busy = status_line(status(compactor_running=3, compactor_queued=12, busy=True, subagents=2))
    assert busy == (
        "claude-sonnet-5-5 · mem 84K/128K · summarizing 3, queued 12 · $0.42 · 2 subagents"
        " · working (Ctrl+C cancels)"
    )
    assert kilobytes(470) == "470B" and kilobytes(9_940) == "9.9K" and kilobytes(128_000) == "128K"
    assert dollars(0) == "$0.00" and dollars(0.00123) == "$0.0012" and dollars(12.3) == "$12.30"


def test_a_sharp_drop_of_the_view_is_a_memory_row() -> None:
    watch = MemoryWatch()
    assert watch.sample(120_000) is None
    assert watch.sample(128_500) is None  # it grows
    assert watch.sample(127_000) is None  # a summary replaced a message: a small drop
    assert watch.sample(63_400) == "memory: merged, view now 63.4 KB (was 127.0 KB)"
    assert watch.sample(64_000) is None
    small = MemoryWatch()
    small.sample(3_000)
    assert small.sample(1_000) is None  # a new chat: kilobytes are no batch
