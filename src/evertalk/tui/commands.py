"""The slash commands of the terminal app: what they are, how a line is read, completion, and
the texts they show.

A line whose first word is a known command runs it; `//text` sends `/text` as a message, and a
first word with another `/` in it (`/etc/hosts is empty`) is a message too. `/model` and
`/memory-model` change the running agent's models (the next turn, the compactor's next call) and
the agent saves them to `config.toml`; `/instructions` takes effect at the next start, as the
system prompt stays the same for a whole session (SPEC §5). `/setup` is the app's: it reopens
the agent on new settings. `/agents` lists the subagents at work, and `/agents stop NAME` ends
one (Ever is told). `/retry` runs a new turn for the last message that has no reply (its turn
failed), without sending it again.
"""

from __future__ import annotations

import os
import textwrap
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Final

from textual.suggester import Suggester

from evertalk.agent.images import ImageError, read_image
from evertalk.agent.retry import NothingToRetry, has_unanswered
from evertalk.agent.subagents import RunningAgent, SubagentError
from evertalk.chat import Chat, ToolInputError
from evertalk.config import EFFORTS, ConfigError
from evertalk.ledger import ledger_path, read_records, summarize
from evertalk.memory_cli import format_status
from evertalk.protocol.events import TurnEnded
from evertalk.providers.base import Image
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
MODEL = Command("/model", "/model [NAME]", "show or set the turn model (from the next turn)")
MEMORY_MODEL = Command(
    "/memory-model",
    "/memory-model [NAME] [EFFORT]",
    "show or set the compaction model and effort (from its next call)",
)
AGENTS = Command("/agents", "/agents", "the subagents at work: task, time, messages logged")
AGENTS_STOP = Command(
    "/agents stop", "/agents stop NAME", "stop a subagent; Ever is told, zoom shows what it did"
)
IMAGE = Command(
    "/image", "/image [PATH|clear]", "attach an image to your next message, or show or drop them"
)
SETUP = Command("/setup", "/setup", "change the provider, the API key, the base URL or the model")
USAGE = Command("/usage", "/usage", "what the model calls cost: tokens, cache, dollars")
RETRY = Command("/retry", "/retry", "try the last unanswered message again (it is not sent twice)")
INSTRUCTIONS = Command(
    "/instructions", "/instructions", "edit your instructions in $EDITOR (from the next start)"
)
QUIT = Command("/quit", "/quit", "leave (Ctrl+D on an empty input does too)")

COMMANDS: Final = (
    HELP,
    MEMORY,
    ZOOM,
    MODEL,
    MEMORY_MODEL,
    AGENTS,
    AGENTS_STOP,
    IMAGE,
    RETRY,
    SETUP,
    USAGE,
    INSTRUCTIONS,
    QUIT,
)
_BY_NAME: Final = {command.name: command for command in COMMANDS}
_TWO_WORDS: Final = {tuple(c.name.split()): c for c in COMMANDS if " " in c.name}


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
    two = _TWO_WORDS.get((word, args[0])) if args else None
    if two is not None:  # `/memory zoom`, `/agents stop`
        return Invocation(two, two.name, args[1:])
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
    ("Tab, Left, Right", "in the dialog that asks before a tool runs: choose a button"),
    ("Enter, Esc", "answer the dialog (Deny has the focus), deny it"),
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


TASK_SHOWN = 80  # characters of a task's first line in `/agents`


def agents_text(running: Sequence[RunningAgent], args: tuple[str, ...]) -> str:
    """`/agents`: the running subagents, one line each (name, time, messages, task)."""
    if args:
        raise CommandError(f"usage: {AGENTS.usage}, or {AGENTS_STOP.usage}")
    if not running:
        return "no subagent is running"
    names = max(len(agent.name) for agent in running)
    lines = [f"{len(running)} subagent{'s' if len(running) != 1 else ''} running:"]
    for agent in running:
        messages = f"{agent.messages} message{'s' if agent.messages != 1 else ''}"
        lines.append(
            f"  {agent.name.ljust(names)}  {duration(agent.seconds):>7}  {messages:>12}  "
            + textwrap.shorten(agent.task, TASK_SHOWN, placeholder=" …")
        )
    lines.append(f"{AGENTS_STOP.usage} stops one")
    return "\n".join(lines)


def duration(seconds: float) -> str:
    """`42s`, `3m 05s`, `2h 07m`: how long a subagent has run."""
    whole = int(seconds)
    if whole < 60:
        return f"{whole}s"
    if whole < 3600:
        return f"{whole // 60}m {whole % 60:02d}s"
    return f"{whole // 3600}h {whole % 3600 // 60:02d}m"


def stop_text(stop: Callable[[str], str], args: tuple[str, ...]) -> str:
    """`/agents stop NAME` (`Subagents.stop`): the report Ever gets is shown to the user too."""
    if len(args) != 1:
        raise CommandError(f"usage: {AGENTS_STOP.usage}; /agents lists the running ones")
    try:
        report = stop(args[0])
    except SubagentError as error:
        raise CommandError(f"{error}; /agents lists the running ones") from None
    return f"stopped {args[0]}; Ever is told: {report}"


@dataclass
class Attachments:
    """The images `/image` attached, waiting for the next message to be sent with it."""

    files: list[tuple[Path, Image]] = field(default_factory=list)

    def command(self, args: tuple[str, ...], workdir: Path) -> str:
        """`/image PATH` attaches (a relative path is from the working folder, as the tools'
        are), `/image clear` drops them all, `/image` alone lists them."""
        if not args:
            if not self.files:
                return f"no image attached: {IMAGE.usage}"
            return "attached to your next message: " + self.names()
        if args == ("clear",):
            count, self.files = len(self.files), []
            return f"dropped {count} image{'s' if count != 1 else ''}"
        path = Path(" ".join(args)).expanduser()  # a path may hold spaces
        path = path if path.is_absolute() else workdir / path
        try:
            image = read_image(path)
        except ImageError as error:
            raise CommandError(str(error)) from None
        self.files.append((path, image))
        size = len(image.data) * 3 // 4 - image.data.count("=", -2)  # base64 decoded
        return f"attached {path.name} ({file_size(size)}); it goes with your next message"

    def names(self) -> str:
        return ", ".join(path.name for path, _ in self.files)

    def images(self) -> list[Image]:
        return [image for _, image in self.files]

    def clear(self) -> None:
        """The message went: its images with it (kept if it could not be sent)."""
        self.files = []


def file_size(size: int) -> str:
    """`312 B`, `4.1 KB`, `86 KB`, `2.4 MB`."""
    if size < 1000:
        return f"{size} B"
    for unit, scale in (("KB", 1e3), ("MB", 1e6)):
        value = size / scale
        if round(value, 1) < 10:  # rounded as shown: 9,990 bytes is `10 KB`, not `10.0 KB`
            return f"{value:.1f} {unit}"
        if round(value) < 1000:
            return f"{value:.0f} {unit}"
    return f"{size / 1e9:.1f} GB"


def model_text(current: str, use_model: Callable[[str], None], args: tuple[str, ...]) -> str:
    """`/model`: the turn model in use, or a new one (`Agent.use_model`: it applies from the
    next turn and is saved to config.toml)."""
    if not args:
        return f"turn model: {current}\nset it with /model NAME"
    if len(args) != 1:
        raise CommandError(f"usage: {MODEL.usage}: a model name is one word")
    _apply(lambda: use_model(args[0]))
    return (
        f"turn model: {args[0]} from the next turn on (a running turn ends on the model it "
        "began with); saved to config.toml" + _variable_note("EVERTALK_MODEL")
    )


def memory_model_text(
    current: str,
    effort: str | None,
    use_memory_model: Callable[[str, str | None], None],
    args: tuple[str, ...],
) -> str:
    """`/memory-model`: the compactor's model and effort in use, or new ones
    (`Agent.use_memory_model`: from its next call, saved to config.toml). An effort name alone
    sets the effort only."""
    if not args:
        return f"compaction {_model_and_effort(current, effort)}\n" + (
            "set them with /memory-model [NAME] [EFFORT]"
        )
    if len(args) > 2:
        raise CommandError(f"usage: {MEMORY_MODEL.usage}")
    model, new_effort = args[0], (args[1] if len(args) == 2 else None)
    if len(args) == 1 and args[0] in EFFORTS:
        model, new_effort = current, args[0]
    if new_effort is not None and new_effort not in EFFORTS:
        raise CommandError(f"the effort is one of {', '.join(EFFORTS)}, not {new_effort!r}")
    _apply(lambda: use_memory_model(model, new_effort))
    return (
        f"compaction {_model_and_effort(model, new_effort or effort)} from the compactor's "
        "next call on; saved to config.toml" + _variable_note("EVERTALK_MEMORY_MODEL")
    )


def _model_and_effort(model: str, effort: str | None) -> str:
    return f"model: {model}, effort {effort or 'left to the model'}"


def _variable_note(variable: str) -> str:
    if os.environ.get(variable):
        return f" ({variable} is set: it overrides config.toml at the next start)"
    return ""


def _apply(change: Callable[[], None]) -> None:
    """Run a model change of the agent; its ConfigError (a bad name, a file that cannot be
    written: nothing changed) is the command's."""
    try:
        change()
    except (ConfigError, ValueError) as error:
        raise CommandError(str(error)) from None


RETRY_HINT: Final = "/retry tries the turn again (the message is not sent twice)"


def retry_text(retry: Callable[[], list[int]], args: tuple[str, ...]) -> str:
    """`/retry` (`Agent.retry`): a new turn for the last message that has no reply, without
    sending it again."""
    if args:
        raise CommandError(f"usage: {RETRY.usage}: it takes no argument")
    try:
        ids = retry()
    except NothingToRetry as error:
        raise CommandError(str(error)) from None
    return f"trying the turn again for message {ids[0]}"


def retry_hint(chat: Chat, ended: TurnEnded) -> str | None:
    """What to tell after a turn that stopped (an error, a limit) and left its message
    without a reply: how to try it again. None otherwise."""
    if ended.reason in ("done", "cancelled"):
        return None
    return RETRY_HINT if has_unanswered(chat) else None


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
