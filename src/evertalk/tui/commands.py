"""The slash commands of the terminal app: what they are, how a line is read, completion, and
the texts they show.

A line whose first word is a known command runs it; `//text` sends `/text` as a message, and a
first word with another `/` in it (`/etc/hosts is empty`) is a message too. Settings changed here
(`/model`, `/memory-model`) are saved to `config.toml` and take effect at the next start: the
system prompt, the models and the instructions stay the same for the whole session (SPEC §5).
"""

from __future__ import annotations

import os
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Final

from textual.suggester import Suggester

from evertalk.chat import Chat, ToolInputError
from evertalk.config import EFFORTS, Config, ConfigError, config_path, load_config, save_config
from evertalk.ledger import ledger_path, read_records, summarize
from evertalk.memory_cli import format_status
from evertalk.runtime import INSTRUCTIONS_NAME
from evertalk.store.errors import StoreError
from evertalk.store.secure import make_dir, write_atomic
from evertalk.usage_cli import format_summary


class CommandError(Exception):
    """A command that cannot run as typed: one line for the user."""


@dataclass(frozen=True)
class Command:
    name: str  # what selects it: `/memory zoom`
    usage: str  # how it is typed: `/memory zoom ID N`
    summary: str


HELP = Command("/help", "/help", "the keys and the commands")
MEMORY = Command("/memory", "/memory", "every line of the view, then the memory's status")
ZOOM = Command(
    "/memory zoom", "/memory zoom ID N", "the two lines line ID+N was built from; N = 1: message ID"
)
MODEL = Command("/model", "/model [NAME]", "show or set the turn model (from the next start)")
MEMORY_MODEL = Command(
    "/memory-model",
    "/memory-model [NAME] [EFFORT]",
    "show or set the compaction model and effort (from the next start)",
)
USAGE = Command("/usage", "/usage", "what the model calls cost: tokens, cache, dollars")
INSTRUCTIONS = Command(
    "/instructions", "/instructions", "edit your instructions in $EDITOR (from the next start)"
)
QUIT = Command("/quit", "/quit", "leave (Ctrl+D on an empty input does too)")

COMMANDS: Final = (HELP, MEMORY, ZOOM, MODEL, MEMORY_MODEL, USAGE, INSTRUCTIONS, QUIT)
_BY_NAME: Final = {command.name: command for command in COMMANDS}


@dataclass(frozen=True)
class Invocation:
    """A command line: the command (None when unknown), the word typed, the arguments."""

    command: Command | None
    word: str
    args: tuple[str, ...]


def read_line(text: str) -> Invocation | str:
    """What the user typed: a command to run, or the message to send."""
    if not text.startswith("/"):
        return text
    if text.startswith("//"):
        return text[1:]
    words = text.split()
    if not words or "/" in words[0][1:]:
        return text  # a path, not a command
    word, args = words[0], tuple(words[1:])
    if word == "/memory" and args and args[0] == "zoom":
        return Invocation(ZOOM, "/memory zoom", args[1:])
    return Invocation(_BY_NAME.get(word), word, args)


class SlashSuggester(Suggester):
    """Completes a command name as it is typed: `/mem` → `/memory`, `/memory z` → `/memory zoom`.

    `suggest` answers at once (the input asks on every keystroke); `get_suggestion` is the same
    for Textual's own widgets."""

    CANDIDATES: Final = tuple(
        command.name + (" " if command.usage != command.name else "") for command in COMMANDS
    )

    def __init__(self) -> None:
        super().__init__(use_cache=False, case_sensitive=True)

    def suggest(self, value: str) -> str | None:
        if not value.startswith("/") or "\n" in value or value.startswith("//"):
            return None
        for candidate in self.CANDIDATES:
            if candidate.startswith(value) and candidate.rstrip() != value.rstrip():
                return candidate
        return None

    async def get_suggestion(self, value: str) -> str | None:
        return self.suggest(value)


def matching(value: str) -> list[Command]:
    """The commands a partly typed line may become (for the hint under the input)."""
    if not value.startswith("/") or "\n" in value or value.startswith("//"):
        return []
    typed = " ".join(value.split())
    if not typed:
        return []
    found = [c for c in COMMANDS if c.name.startswith(typed) or typed.startswith(c.name + " ")]
    longest = max((len(c.name) for c in found if typed.startswith(c.name + " ")), default=0)
    return [c for c in found if len(c.name) >= longest]


# --- the texts -------------------------------------------------------------------------------

KEYS: Final = (
    ("Enter", "send the message"),
    ("Shift+Enter, Ctrl+J", "a new line in the message"),
    ("Up, Down", "messages you sent before (at the first or last line of the input)"),
    ("Tab, Right", "complete a command"),
    ("Page Up, Page Down", "scroll the chat (the mouse wheel too)"),
    ("Shift+Tab, Tab", "from the input to the tool rows (Enter or a click opens one) and back"),
    ("Ctrl+C", "cancel the running turn (what was logged stays logged)"),
    ("Ctrl+D", "quit, on an empty input (as /quit)"),
)


def help_text() -> str:
    width = max(len(key) for key, _ in KEYS)
    usage_width = max(len(command.usage) for command in COMMANDS)
    lines = ["Keys"]
    lines += [f"  {key.ljust(width)}  {what}" for key, what in KEYS]
    lines.append("Commands")
    lines += [f"  {c.usage.ljust(usage_width)}  {c.summary}" for c in COMMANDS]
    lines.append("A message that starts with / but is not a command: type // for its /.")
    return "\n".join(lines)


def memory_text(chat: Chat, running: int, queued: int) -> tuple[str, str]:
    """(every line of the view, the status) for `/memory`."""
    status = format_status(chat.status())
    activity = f"compactor summarizing {running}, queued {queued}"
    return chat.render_view(), f"{status}\n{activity}"


def zoom_text(chat: Chat, args: tuple[str, ...]) -> str:
    if len(args) != 2:
        raise CommandError(f"usage: {ZOOM.usage}, e.g. /memory zoom 0 8")
    try:
        start, count = int(args[0]), int(args[1])
    except ValueError:
        raise CommandError(f"ID and N are whole numbers: {ZOOM.usage}") from None
    try:
        return chat.zoom(start, count)
    except (ToolInputError, StoreError) as error:
        raise CommandError(str(error)) from None


def _variable_note(variable: str) -> str:
    if os.environ.get(variable):
        return f" ({variable} is set and overrides it)"
    return ""


def model_text(home: Path, session_model: str, args: tuple[str, ...]) -> str:
    """`/model`: the turn model of this session, or a new one saved for the next start."""
    if not args:
        saved = _load(home).model
        line = f"turn model: {session_model}"
        if saved != session_model:
            line += f" (this session); {saved} from the next start"
        return line + "\nset it with /model NAME"
    if len(args) != 1:
        raise CommandError(f"usage: {MODEL.usage}: a model name is one word")
    config = _load(home)
    _save(home, replace(config, model=args[0]))
    return (
        f"turn model set to {args[0]} in {config_path(home)}: it takes effect at the next "
        f"start; this session goes on with {session_model}" + _variable_note("EVERTALK_MODEL")
    )


def memory_model_text(
    home: Path, session_model: str, session_effort: str, args: tuple[str, ...]
) -> str:
    """`/memory-model`: the compaction model and effort, or new ones for the next start.
    An effort name alone sets the effort only."""
    if not args:
        memory = _load(home).memory
        line = f"compaction model: {session_model}, effort {session_effort}"
        if (memory.model, memory.effort) != (session_model, session_effort):
            line += f" (this session); {memory.model}, effort {memory.effort} from the next start"
        return line + "\nset them with /memory-model [NAME] [EFFORT]"
    if len(args) > 2:
        raise CommandError(f"usage: {MEMORY_MODEL.usage}")
    model: str | None = args[0]
    effort: str | None = args[1] if len(args) == 2 else None
    if len(args) == 1 and args[0] in EFFORTS:
        model, effort = None, args[0]
    if effort is not None and effort not in EFFORTS:
        raise CommandError(f"the effort is one of {', '.join(EFFORTS)}, not {effort!r}")
    config = _load(home)
    memory = config.memory
    memory = replace(memory, model=model or memory.model, effort=effort or memory.effort)
    _save(home, replace(config, memory=memory))
    return (
        f"compaction model set to {memory.model}, effort {memory.effort}, in "
        f"{config_path(home)}: it takes effect at the next start"
        + _variable_note("EVERTALK_MEMORY_MODEL")
    )


def _load(home: Path) -> Config:
    try:
        return load_config(home)
    except ConfigError as error:
        raise CommandError(str(error)) from None


def _save(home: Path, config: Config) -> None:
    try:
        save_config(home, config)
    except (ConfigError, ValueError) as error:
        raise CommandError(str(error)) from None
    except OSError as error:
        raise CommandError(f"cannot write {config_path(home)}: {error.strerror or error}") from None


def usage_text(home: Path) -> str:
    path = ledger_path(home)
    try:
        contents = read_records(path)
    except FileNotFoundError:
        return f"No model calls yet: {path} gets a line for each one."
    except OSError as error:
        raise CommandError(f"cannot read {path}: {error.strerror or error}") from None
    if not contents.records:
        return f"No model calls yet: {path} gets a line for each one."
    text = format_summary(summarize(contents.records))
    if contents.skipped:
        text += f"\n(skipped {contents.skipped:,} unreadable lines of {path})"
    return text


def instructions_file(home: Path) -> Path:
    """`<home>/instructions.md`, created (empty, 0600) when missing."""
    path = home / INSTRUCTIONS_NAME
    if not path.exists():
        make_dir(home)
        write_atomic(path, b"")
    return path
