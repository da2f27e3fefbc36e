"""The app's side of the slash commands: completion as they are typed, the help, the images
`/image` attaches, and the instructions file `/instructions` opens.

The commands themselves (their names, how a line is read) are in `slash.py`; those that need the
chat run in the service (`service/commands.py`). `/instructions` takes effect when the service
next starts, as the system prompt stays the same for a whole session (SPEC §5). `/setup` is the
app's: it saves new settings and has the service start again on them.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Final

from textual.suggester import Suggester

from evertalk.image_files import ImageError, read_image_file
from evertalk.providers.base import Image
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
            image = Image(*read_image_file(path))
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


def instructions_file(home: Path) -> Path:
    """`<home>/instructions.md`, created (empty, 0600) when missing."""
    path = home / INSTRUCTIONS_NAME
    if not path.exists():
        make_dir(home)
        write_atomic(path, b"")
    return path
