"""The `ask` frame of a permission question, as the service sends it to a client (docs/protocol.md).

Besides the call itself, a `write` question says whether the file exists now (`exists`) and, for
one that does, how the new content differs from it (`diff`, unified, clipped): the client may
run in another folder or on another machine's view of it, so the service, which runs the tools,
is the one that reads the file. An `edit` question carries the diff the edit would make
(`diff`). The folder a relative path starts from is the running call's
(`AskedInput.workdir`).
"""

from __future__ import annotations

import difflib
import os
from pathlib import Path
from typing import Any, Final

from evertalk.memory.text import valid_unicode

DIFF_LINES: Final = 400
"""Lines of a diff sent at most: the dialog shows about 20 at a time; past this, a count."""
DIFF_CHARS: Final = 20_000
"""Characters of a diff sent at most, as the app shows of a call's input."""
READ_LIMIT: Final = 1_000_000
"""Bytes of the existing file read at most: a larger one is named by its size, not compared."""
COMPARE_LINES: Final = 20_000
"""Lines on either side compared at most (difflib's time grows with their product)."""


def ask_frame(ask_id: str, tool: str, tool_input: dict[str, Any]) -> dict[str, Any]:
    """The question: the call, whose it is, whether it leads outside the working directory;
    for `write`, what it would do to the file."""
    frame: dict[str, Any] = {
        "type": "ask",
        "id": ask_id,
        "tool": tool,
        "input": dict(tool_input),
        "agent": getattr(tool_input, "agent", None),
        "outside": getattr(tool_input, "outside", False),
    }
    path, content = tool_input.get("path"), tool_input.get("content")
    workdir = getattr(tool_input, "workdir", None)
    if tool == "write" and isinstance(path, str) and isinstance(content, str) and workdir:
        frame.update(write_change(Path(workdir), path, content))
    old, new = tool_input.get("old"), tool_input.get("new")
    if tool == "edit" and isinstance(path, str) and isinstance(old, str) and workdir:
        frame["diff"] = edit_change(Path(workdir), path, old, new if isinstance(new, str) else "")
    return frame


def write_change(workdir: Path, path: str, content: str) -> dict[str, Any]:
    """`{"exists": False}` for a new file; `{"exists": True, "diff": …}` for one a write would
    replace, the diff old → new (or a line in brackets saying why there is none)."""
    real = Path(os.path.realpath(workdir / Path(path).expanduser()))
    try:
        with real.open("rb") as file:
            data = file.read(READ_LIMIT + 1)
    except FileNotFoundError:
        return {"exists": False}
    except OSError as error:  # a folder, no permission: the write itself will say so
        return {"exists": real.exists(), "diff": f"[the file cannot be read: {error.strerror}]"}
    return {"exists": True, "diff": file_diff(path, data, content)}


def edit_change(workdir: Path, path: str, old: str, new: str) -> str:
    """The diff an edit would make to the file, or a line in brackets saying why there is none
    (the edit itself will say so too)."""
    real = Path(os.path.realpath(workdir / Path(path).expanduser()))
    if not real.exists():
        return "[no such file]"
    if not real.is_file():  # a named pipe would hold the service up: not opened
        return "[not a regular file]"
    try:
        with real.open("rb") as file:
            data = file.read(READ_LIMIT + 1)
    except OSError as error:
        return f"[the file cannot be read: {error.strerror}]"
    text = data.decode("utf-8", "replace")
    old = valid_unicode(old)
    if text.count(old) != 1:
        return "[`old` does not occur once in the file now]"
    return file_diff(path, data, text.replace(old, valid_unicode(new)))


def file_diff(path: str, data: bytes, content: str) -> str:
    """The unified diff of the file's bytes (at most READ_LIMIT of them read) → `content`."""
    if len(data) > READ_LIMIT:
        return f"[the file is over {READ_LIMIT:,} bytes: not compared]"
    try:
        old = data.decode("utf-8")
    except UnicodeDecodeError:
        return f"[the file is not UTF-8 text ({len(data):,} bytes): not compared]"
    new = valid_unicode(content)
    if old == new:
        return "[the new content is the same as the file's]"
    before, after = old.splitlines(keepends=True), new.splitlines(keepends=True)
    if max(len(before), len(after)) > COMPARE_LINES:
        return f"[{len(before):,} lines now, {len(after):,} after: too many to compare]"
    lines = difflib.unified_diff(before, after, f"{path} (now)", f"{path} (new)")
    return clipped(list(lines))


def clipped(lines: list[str]) -> str:
    """The diff's lines, each ending in a newline (a last line without one says so, as diff
    does), at most DIFF_LINES of them and DIFF_CHARS characters, then how many are left out."""
    shown: list[str] = []
    size = 0
    for line in lines:
        text = line if line.endswith("\n") else line + "\n\\ No newline at end of file\n"
        if len(shown) >= DIFF_LINES or size + len(text) > DIFF_CHARS:
            break
        shown.append(text)
        size += len(text)
    left = len(lines) - len(shown)
    if left:
        shown.append(f"[{left:,} more lines of the diff not shown]\n")
    return "".join(shown).rstrip("\n")
