"""The working folder's own instructions: its `AGENTS.md`, else its `CLAUDE.md`, as other agents
read them.

The file reaches the model on every turn whose tools work in that folder, verbatim, read afresh
each turn (an edit counts from the next turn). It goes in the turn's opening, after the view and
before the turn's header (SPEC §6.2), never in the system prompt: the system prompt, the tools
and the view stay byte-identical, so the provider's cache of them is kept, and a window in
another folder does not change them either. What it costs is its own tokens in every turn's
first call (written to the cache with the rest of the opening, then read from it by the turn's
later calls).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Final

NAMES: Final = ("AGENTS.md", "CLAUDE.md")
"""Looked for in this order: the first found is the one in force."""
MOST_BYTES: Final = 32_000
"""The most of the file sent each turn: a larger one is cut there, and says so."""


@dataclass(frozen=True)
class FolderInstructions:
    path: Path
    text: str  # as sent: the whole file, or its first MOST_BYTES
    size: int  # the file's bytes

    @property
    def cut(self) -> bool:
        return self.size > MOST_BYTES


def find(folder: Path) -> FolderInstructions | None:
    """The instructions in force in `folder`, or None. A file that cannot be read counts as
    none: a turn is not stopped by it (`/instructions` says why)."""
    for name in NAMES:
        path = folder / name
        if not path.is_file():
            continue
        try:
            with open(path, "rb") as file:
                data = file.read(MOST_BYTES + 1)
                size = os.fstat(file.fileno()).st_size  # of the file read
        except OSError:
            continue
        text = data[:MOST_BYTES].decode("utf-8", errors="replace")
        return FolderInstructions(path, text, max(size, len(data)))
    return None


def opening_block(found: FolderInstructions | None) -> str:
    """What goes before the turn's header: "" with no file, else the file between two tags
    that name it. No newline at either end."""
    if found is None:
        return ""
    text = found.text.strip("\n")
    if found.cut:
        sent = f"the first {MOST_BYTES:,} are sent"
        text += f"\n[cut here: the file has {found.size:,} bytes, {sent}]"
    return (
        f"The working folder's instructions ({found.path.name}, as its owner wrote them; they "
        f"hold for work in {found.path.parent}):\n"
        f'<folder_instructions path="{found.path}">\n{text}\n</folder_instructions>'
    )


def in_force(folder: Path, home_file: Path) -> str:
    """What `/instructions` says: the folder's file in force (or why none is) and the user's
    own instructions file."""
    found = find(folder)
    if found is not None:
        cut = f", cut to its first {MOST_BYTES:,}" if found.cut else ""
        first = (
            f"In force in {folder}: {found.path} ({found.size:,} bytes{cut}), sent with every "
            "turn, as it is when the turn starts."
        )
        others = [folder / name for name in NAMES if folder / name != found.path]
        shadowed = [path.name for path in others if path.is_file()]
        if shadowed and NAMES.index(found.path.name) == 0:
            first += f" {', '.join(shadowed)} is not read while {found.path.name} is there."
    else:
        unread = [folder / name for name in NAMES if (folder / name).exists()]
        why = f" ({unread[0]} cannot be read)" if unread else ""
        first = f"No {' or '.join(NAMES)} in {folder}{why}: no folder instructions are sent."
    return (
        f"{first}\nYours, for every folder: {home_file} (in the system prompt; an edit counts "
        "from the service's next start; /instructions edit opens it)."
    )
