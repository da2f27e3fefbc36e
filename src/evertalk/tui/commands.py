"""The app's side of the slash commands: completion as they are typed, the help, the images
`/image` attaches, and the instructions file `/instructions` opens.

The commands themselves (their names, how a line is read) are in `slash.py`; those that need the
chat run in the service (`service/commands.py`). `/instructions` takes effect when the service
next starts, as the system prompt stays the same for a whole session (SPEC §5). `/setup` is the
app's: it saves new settings and has the service start again on them.
"""

from __future__ import annotations

import shlex
import urllib.parse
from dataclasses import dataclass, field
from pathlib import Path
from typing import Final

from textual.suggester import Suggester

from evertalk.image_files import ImageError, read_image_file
from evertalk.memory.text import MESSAGE_LIMIT
from evertalk.runtime import INSTRUCTIONS_NAME
from evertalk.slash import (
    COMMANDS,
    IMAGE,
    Command,
    CommandError,
    Invocation,
    matching,
    read_line,
)
from evertalk.store.secure import make_dir, write_atomic

__all__ = ["COMMANDS", "Command", "CommandError", "Invocation", "matching", "read_line"]

Image = tuple[str, str]
"""(media type, base64 data): an attached image as the `send` request carries it."""


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


# --- the texts -------------------------------------------------------------------------------

KEYS: Final = (
    ("Enter", "send the message"),
    ("Shift+Enter, Ctrl+J", "a new line in the message"),
    ("Up, Down", "messages you sent before (at the first or last line of the input)"),
    ("Tab, Right", "complete a command (when several fit, the list under the input shows them)"),
    ("Esc", "clear the input (Ctrl+Z brings it back)"),
    ("Ctrl+U", "delete to the start of the line"),
    ("Page Up, Page Down", "scroll the chat (the mouse wheel too); at its top, earlier messages"),
    (
        "Shift+Tab, Tab",
        "to the tool rows and folded messages (Enter, a click opens one) and back; "
        "typing goes back to the input",
    ),
    ("Ctrl+C", "cancel the running turn (what was logged stays logged); else clear the input"),
    ("Tab, Left, Right", "in the dialog that asks before a tool runs: choose a button"),
    ("Enter, Esc", "answer the dialog (Deny has the focus), deny it"),
    ("y, a, n", "answer the dialog once its buttons light up: allow once, always, deny"),
    ("Ctrl+D", "quit, on an empty input (as /quit); twice while a turn runs, which goes on"),
)


BAR_WORDS: Final = (
    ("claude-sonnet-5-5", "the model that answers your messages (/model changes it)"),
    ("mem 84K/128K", "the view (what Ever reads of the chat each turn): its size, its budget"),
    ("mem …, merging", "over budget: old lines are merged into summaries until it fits again"),
    ("summaries: idle", "the summaries that condense the chat in the background are all made"),
    ("summaries: 3 running", "being written now; also N queued (to come), N failed (tried again)"),
    ("catching up: …", "the chat is far behind: summaries still to make, and about how long"),
    ("$0.42", "what the chat's model calls cost today, as the usage ledger counts them"),
    ("$4.20/$5.00", "the same beside the daily budget ([budget] daily in config.toml)"),
    ("tools unused", "the model has called no tool yet: what it says it ran may be made up"),
    ("2 subagents", "helpers Ever started, working in the background (/agents)"),
    ("working", "a turn is running (Ctrl+C cancels it)"),
)
"""The status bar's words, as they show, each with what it means: the last part of `/help`."""

MEMORY_WORDS: Final = (
    ("view", "the chat as a turn sees it: recent messages in detail, older ones summarized"),
    ("cview", "the shorter view a summary is written from (the compaction view)"),
)
"""The words of `/memory` that it does not explain where they show."""


def help_text() -> str:
    width = max(len(key) for key, _ in KEYS)
    usage_width = max(len(command.usage) for command in COMMANDS)
    lines = ["Keys"]
    lines += [f"  {key.ljust(width)}  {what}" for key, what in KEYS]
    lines.append("Commands")
    lines += [f"  {c.usage.ljust(usage_width)}  {c.summary}" for c in COMMANDS]
    lines.append("A message that starts with / but is not a command: type // for its /.")
    lines.append(
        "A big paste shows folded in the chat (a click opens it); it is sent whole. A message "
        f"over {MESSAGE_LIMIT:,} characters is logged as several, in order."
    )
    lines += _glossary("The status bar", BAR_WORDS)
    lines += _glossary("In /memory", MEMORY_WORDS)
    return "\n".join(lines)


def _glossary(title: str, words: tuple[tuple[str, str], ...]) -> list[str]:
    width = max(len(word) for word, _ in words)
    return [title, *(f"  {word.ljust(width)}  {meaning}" for word, meaning in words)]


@dataclass
class Attachments:
    """The images `/image` attached, waiting for the next message to be sent with it."""

    files: list[tuple[Path, Image]] = field(default_factory=list)

    def command(self, args: tuple[str, ...], workdir: Path) -> str:
        """`/image PATH` attaches (a relative path is from the working folder, as the tools'
        are), `/image clear` drops them all, `/image` alone lists them. A path may come as a
        terminal drops a file: quoted, with its spaces escaped, or as a `file://` address; a
        drop of several files attaches each."""
        if not args:
            if not self.files:
                return f"no image attached: {IMAGE.usage}"
            return "attached to your next message: " + self.names()
        if args[0] == "clear":
            if len(args) > 1:
                raise CommandError(f"usage: {IMAGE.usage}: /image clear takes nothing after it")
            count, self.files = len(self.files), []
            return f"dropped {count} image{'s' if count != 1 else ''}"
        found: list[tuple[Path, Image]] = []
        for path in image_paths(" ".join(args), workdir):
            try:
                found.append((path, read_image_file(path)))
            except ImageError as error:
                raise CommandError(str(error)) from None
        self.files += found  # all of them or, when one cannot be read, none
        shown = ", ".join(f"{path.name} ({file_size(decoded_size(i))})" for path, i in found)
        goes = "it goes" if len(found) == 1 else "they go"
        return f"attached {shown}; {goes} with your next message"

    def names(self) -> str:
        return ", ".join(path.name for path, _ in self.files)

    def images(self) -> list[Image]:
        return [image for _, image in self.files]

    def clear(self) -> None:
        """The message went: its images with it (kept if it could not be sent)."""
        self.files = []


def image_paths(typed: str, workdir: Path) -> list[Path]:
    """The files `/image` was given. The words as typed name one file when it is there (a path
    with spaces typed as it is); else they are read as a shell reads them, which undoes the
    quotes and escapes a drop adds. Several paths come from a drop of several files, when each
    of them is there; otherwise the words name one file, which the error then names."""

    def located(word: str) -> Path:
        if word.startswith("file://"):  # how some terminals drop a file
            word = urllib.parse.unquote(urllib.parse.urlsplit(word).path)
        path = Path(word).expanduser()
        return path if path.is_absolute() else workdir / path

    typed = typed.strip()
    as_typed = located(typed)
    if as_typed.exists():
        return [as_typed]
    try:
        words = shlex.split(typed)
    except ValueError:  # an unclosed quote: taken as typed
        return [as_typed]
    paths = [located(word) for word in words]
    if len(paths) > 1 and all(path.exists() for path in paths):
        return paths
    return [located(" ".join(words))] if words else [as_typed]


def decoded_size(image: Image) -> int:
    """The file's size, from its base64."""
    data = image[1]
    return len(data) * 3 // 4 - data.count("=", -2)


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


def instructions_file(home: Path) -> Path:
    """`<home>/instructions.md`, created (empty, 0600) when missing."""
    path = home / INSTRUCTIONS_NAME
    if not path.exists():
        make_dir(home)
        write_atomic(path, b"")
    return path
