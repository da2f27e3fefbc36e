"""The slash commands: their names and how they are typed, and how a line is read.

A line whose first word is a known command runs it; `//text` sends `/text` as a message, and a
first word with another `/` in it (`/etc/hosts is empty`) is a message too. The app reads lines
with this; the service runs the commands that need the chat (`service/commands.py`). Nothing
here imports the agent or Textual.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Final


class CommandError(Exception):
    """A command that cannot run as typed: one line for the user."""


@dataclass(frozen=True)
class Command:
    usage: str  # how it is typed: `/memory zoom ID N`
    summary: str

    @property
    def name(self) -> str:
        """What selects it: the usage's leading words in small letters (`/memory zoom`)."""
        words = self.usage.split()
        count = 1
        while count < len(words) and re.fullmatch(r"[a-z-]+", words[count]):
            count += 1
        return " ".join(words[:count])


HELP = Command("/help", "the keys and the commands")
MEMORY = Command("/memory", "every line of the view, then the memory's status")
ZOOM = Command("/memory zoom ID N", "the two lines line ID+N was built from; N = 1: message ID")
SEARCH = Command(
    "/memory search QUERY",
    "find words in every message and summary, with the view line each falls in",
)
MODEL = Command("/model [NAME]", "show or set the turn model (from the next turn)")
MEMORY_MODEL = Command(
    "/memory-model [NAME] [EFFORT]",
    "show or set the compaction model and effort (from its next call)",
)
AGENTS = Command("/agents", "the subagents at work: task, time, messages logged")
AGENTS_STOP = Command("/agents stop NAME", "stop a subagent; Ever is told, zoom shows what it did")
IMAGE = Command("/image [PATH|clear]", "attach an image to your next message, or show or drop them")
SETUP = Command("/setup", "change the provider, the API key, the base URL or the model")
USAGE = Command("/usage", "what the model calls cost: tokens, cache, dollars")
RETRY = Command("/retry", "try the last unanswered message again (it is not sent twice)")
INSTRUCTIONS = Command(
    "/instructions",
    "the instructions in force: the folder's AGENTS.md (else CLAUDE.md), and yours",
)
INSTRUCTIONS_EDIT = Command(
    "/instructions edit",
    "edit your instructions in $EDITOR (from the next start)",
)
COMPACT = Command("/compact", "build the summaries now, as evertalk memory compact does")
CLEAR = Command(
    "/clear", "clear the screen; the chat and Ever's memory of it are kept (Page Up brings it back)"
)
EDIT = Command("/edit", "put the last message you sent back in the input, to send again")
QUIT = Command("/quit", "leave (Ctrl+D on an empty input does too)")
FORGET = Command(
    "/forget A[-B] [yes] [REASON]",
    "take messages A-B out of the whole memory: shows what changes; `yes` does it",
)
UNDO = Command(
    "/undo [TURN]",
    "restore the files the last turn (or turn TURN) changed with write and edit",
)

COMMANDS: Final = (
    HELP,
    MEMORY,
    ZOOM,
    SEARCH,
    MODEL,
    MEMORY_MODEL,
    COMPACT,
    AGENTS,
    AGENTS_STOP,
    IMAGE,
    RETRY,
    EDIT,
    CLEAR,
    SETUP,
    USAGE,
    INSTRUCTIONS,
    INSTRUCTIONS_EDIT,
    FORGET,
    UNDO,
    QUIT,
)
RETRY_HINT: Final = "/retry tries the turn again (the message is not sent twice)"

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
