"""The file tools: `read`, `write` and `edit` (SPEC §6.6).

Paths are absolute, or relative to the working directory (`~` is the user's home). `write` and
`edit` replace a file atomically (a temporary file in the same folder, then a rename), keep an
existing file's mode, and write through a symbolic link to its target rather than replacing the
link. `edit` keeps bytes that are not UTF-8 exactly as they were.

Where a path leads is decided with links and `..` resolved. `write` and `edit` change files in the
working directory; one that leads outside needs the user's yes whatever the tool's rule (the
Toolbox asks, naming the resolved path, see `reach`), and is checked again as it runs, so that a
link switched meanwhile does not take the answer elsewhere (`permitted`). The write itself goes
through a handle on the folder reached without following links (`nofollow`), so that a folder
swapped for a link after that check cannot take it, or its temporary file, elsewhere. What a
write or an edit replaces is first kept in the turn's checkpoint, for undo (`checkpoints`). No
file tool touches evertalk's home: its config.toml may hold the key, and the model reads its
chat with zoom; nor a hard link to a file in it (`homelinks`). They touch regular files only: a
named pipe, a socket or a device is refused, never opened in a way that would wait (`nofollow`).
"""

from __future__ import annotations

import os
import stat
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path

from evertalk.agent.tools import homelinks, nofollow
from evertalk.agent.tools.base import (
    Args,
    Call,
    RunState,
    ToolContext,
    ToolError,
    ToolOutcome,
    result,
)
from evertalk.agent.tools.checkpoints import CheckpointError
from evertalk.agent.tools.output import ClipBuffer
from evertalk.memory.text import valid_unicode

# -- paths --------------------------------------------------------------------------------------


def resolve(workdir: Path, path: str) -> Path:
    """The file `path` names: `~` expanded, a relative path taken from `workdir`."""
    if not path:
        raise ToolError("`path` must not be empty")
    if "\0" in path:
        raise ToolError("`path` must not contain a NUL character")
    return workdir / Path(path).expanduser()


def locate(ctx: ToolContext, path: str) -> Path:
    """The file `path` leads to, links and `..` resolved (a missing file: where it would be).
    A ToolError when that is inside evertalk's home."""
    try:
        real = Path(os.path.realpath(resolve(ctx.workdir, path)))
    except OSError as error:  # a link on the way changed while it was read
        raise ToolError(f"{path} changed while its links were resolved: {error.strerror}") from None
    if ctx.home is not None and real.is_relative_to(os.path.realpath(ctx.home)):
        raise ToolError(
            f"{path} is in evertalk's home ({ctx.home}), which the file tools do not touch; "
            "the chat's memory is read with zoom"
        )
    return real


def inside(ctx: ToolContext, real: Path) -> bool:
    """Whether a resolved path is in the working directory (or is it)."""
    return real.is_relative_to(os.path.realpath(ctx.workdir))


def reach(call: Call, ctx: ToolContext) -> Path | None:
    """Where a file tool's call leads when that is outside the working directory, for the
    permission check to weigh and name; None inside, or for another tool's call. A ToolError
    for a path in evertalk's home, before anyone is asked about it."""
    if not isinstance(call, ReadCall | WriteCall | EditCall):
        return None
    real = locate(ctx, call.path)
    return None if inside(ctx, real) else real


def permitted(call: Call, outside: Path | None) -> Call:
    """The call, told the one path outside the working directory it was allowed to change (the
    one the user was asked about): as it runs it refuses any other."""
    if isinstance(call, WriteCall | EditCall):
        return replace(call, allowed=outside)
    return call


def confined(ctx: ToolContext, path: str, allowed: Path | None) -> Path:
    """Where a write or an edit goes, resolved again as it runs: in the working directory, or
    the very path outside it that was allowed."""
    real = locate(ctx, path)
    if inside(ctx, real) or real == allowed:
        return real
    raise ToolError(
        f"{path} now leads to {real}, outside the working directory, which was not allowed; "
        "nothing was written"
    )


def not_in_home(ctx: ToolContext, shown: str) -> nofollow.Check:
    """What refuses a file that is one of evertalk's home's by a hard link."""

    def check(found: os.stat_result) -> None:
        if homelinks.in_home(found, ctx.home):
            raise ToolError(
                f"{shown} is a hard link to a file in evertalk's home ({ctx.home}), "
                "which the file tools do not touch"
            )

    return check


def _os_problem(shown: str, error: OSError) -> ToolError:
    if isinstance(error, nofollow.NotRegular):
        return ToolError(
            f"{shown} is {error.what}, not a regular file; the file tools read and write "
            "regular files only"
        )
    if isinstance(error, FileNotFoundError):
        return ToolError(f"{shown}: no such file")
    if isinstance(error, IsADirectoryError):
        return ToolError(f"{shown} is a directory, not a file")
    if isinstance(error, NotADirectoryError | FileExistsError):
        return ToolError(f"{shown}: a part of the path is a file, not a directory")
    if isinstance(error, PermissionError):
        return ToolError(f"{shown}: permission denied")
    return ToolError(f"{shown}: {error.strerror or error}")


def line_count(text: str) -> int:
    """Lines as an editor counts them: a last line without a newline counts too."""
    return text.count("\n") + (1 if text and not text.endswith("\n") else 0)


def _plural(count: int, noun: str) -> str:
    return f"{count} {noun}" if count == 1 else f"{count} {noun}s"


# -- read ---------------------------------------------------------------------------------------


def parse_read(tool_input: object) -> ReadCall:
    args = Args("read", tool_input, ("path", "offset", "limit"))
    path = args.string("path")
    offset = args.optional_integer("offset", 0)
    if offset < 0:
        raise ToolError(f"`offset` must be 0 or more, not {offset}")
    limit: int | None = None
    if args.has("limit"):
        limit = args.integer("limit")
        if limit < 1:
            raise ToolError(f"`limit` must be 1 or more, not {limit}")
    return ReadCall(path, offset, limit)


@dataclass(frozen=True)
class ReadCall:
    path: str
    offset: int = 0  # lines to skip
    limit: int | None = None  # the most lines to return; None: all the rest

    async def run(self, ctx: ToolContext, limit: int, state: RunState) -> ToolOutcome:
        target = locate(ctx, self.path)
        buffer = ClipBuffer(limit)
        try:
            lines = read_lines(
                target, self.offset, self.limit, buffer, self.path, not_in_home(ctx, self.path)
            )
        except OSError as error:
            raise _os_problem(self.path, error) from None
        if buffer.total:
            return result(buffer.text())
        if lines == 0:
            return result(f"({self.path} is empty)")
        raise ToolError(
            f"offset {self.offset} is past the end of {self.path}, which has "
            f"{_plural(lines, 'line')}"
        )


def read_lines(
    path: Path,
    offset: int,
    limit: int | None,
    buffer: ClipBuffer,
    shown: str = "",
    check: nofollow.Check | None = None,
) -> int:
    """Feed lines offset … offset+limit−1 of the file to `buffer`; the number of lines read.

    A file that is not a regular one is nofollow.NotRegular, unread; `check` may refuse the file
    before it is read. A NUL byte anywhere up to the last line wanted makes it a binary file,
    which is refused. Bytes that are not UTF-8 show as U+FFFD.
    """
    shown = shown or str(path)
    end = None if limit is None else offset + limit
    count = 0
    with os.fdopen(nofollow.open_regular(path, follow=True), "rb") as file:
        if check is not None:
            check(os.fstat(file.fileno()))
        for raw in file:  # lines split at b"\n", which never falls inside a UTF-8 character
            if b"\0" in raw:
                raise ToolError(f"{shown} is a binary file (it holds NUL bytes)")
            if count >= offset:
                buffer.feed(raw.decode("utf-8", "replace"))
            count += 1
            if end is not None and count >= end:
                break
    return count


# -- write --------------------------------------------------------------------------------------


def parse_write(tool_input: object) -> WriteCall:
    args = Args("write", tool_input, ("path", "content"))
    return WriteCall(args.string("path"), args.string("content"))


@dataclass(frozen=True)
class WriteCall:
    path: str
    content: str
    allowed: Path | None = None  # the resolved path outside the workdir the user allowed

    async def run(self, ctx: ToolContext, limit: int, state: RunState) -> ToolOutcome:
        data = valid_unicode(self.content).encode("utf-8")
        real = confined(ctx, self.path, self.allowed)
        try:
            keep = _keeper(ctx, real, self.path, data)
            existed = write_file(real, data, keep, not_in_home(ctx, self.path))
        except nofollow.Swapped:
            raise _swapped(self.path) from None
        except OSError as error:
            raise _os_problem(self.path, error) from None
        verb = "replaced" if existed else "created"
        size = f"{_plural(len(data), 'byte')}, {_plural(line_count(self.content), 'line')}"
        return result(f"{verb} {self.path} ({size})")


Keep = Callable[[bytes | str | None], None]
"""Told what a file held before it is written (None: nothing; a str: why it is not kept)."""


def _keeper(ctx: ToolContext, real: Path, shown: str, data: bytes) -> Keep | None:
    """What keeps the previous content in the turn's checkpoint, for undo."""
    checkpoint = ctx.checkpoint
    if checkpoint is None:
        return None
    where = os.path.realpath(ctx.workdir)
    name = os.path.relpath(real, where) if inside(ctx, real) else str(real)

    def keep(before: bytes | str | None) -> None:
        try:
            checkpoint.record(real, name or shown, before, data)
        except CheckpointError as error:  # no undo for it: the file stays as it was
            raise ToolError(str(error)) from None

    return keep


def write_file(
    real: Path, data: bytes, keep: Keep | None = None, check: nofollow.Check | None = None
) -> bool:
    """Put `data` in the file `real` (links resolved), making missing folders; whether it
    existed. The folder is reached without following links (`nofollow`); `keep` is given
    what it held, read through the same handle, before it changes. A pipe, a socket or a
    device there is nofollow.NotRegular; `check` may refuse the file there."""
    if not real.name:
        raise IsADirectoryError(21, "Is a directory", str(real))
    folder = nofollow.open_folder(real.parent, create=True)
    try:
        found = _entry(folder, real.name)
        if found is not None:
            if stat.S_ISDIR(found.st_mode):
                raise IsADirectoryError(21, "Is a directory", str(real))
            nofollow.refuse_special(found.st_mode)
            if check is not None:
                check(found)
        if keep is not None:
            kind = None if found is None else stat.S_IFMT(found.st_mode)
            keep(_previous(folder, real.name, kind, check))
        nofollow.replace(folder, real.parent, real.name, data)
    finally:
        os.close(folder)
    return found is not None


def _entry(folder: int, name: str) -> os.stat_result | None:
    """What `name` in the folder is (a link's own stat); None when there is nothing."""
    try:
        return os.stat(name, dir_fd=folder, follow_symlinks=False)
    except FileNotFoundError:
        return None


def _previous(
    folder: int, name: str, found: int | None, check: nofollow.Check | None
) -> bytes | str | None:
    """What `name` holds before a write: its bytes, None when absent, or why it cannot be kept."""
    if found is None:
        return None
    if found != stat.S_IFREG:
        return "unkept: not a regular file"
    return nofollow.read(folder, name, check)


def _swapped(shown: str) -> ToolError:
    return ToolError(
        f"{shown}: a folder on its way was replaced by a link or moved while writing; "
        "nothing was written"
    )


# -- edit ---------------------------------------------------------------------------------------


def parse_edit(tool_input: object) -> EditCall:
    args = Args("edit", tool_input, ("path", "old", "new"))
    path, old, new = args.string("path"), args.string("old"), args.string("new")
    if not old:
        raise ToolError("`old` must not be empty: it is the text to replace")
    if old == new:
        raise ToolError("`old` and `new` are the same: there is nothing to change")
    return EditCall(path, old, new)


def occurrences(text: str, old: str) -> list[int]:
    """Where `old` starts in `text`, overlapping matches included (`aa` is twice in `aaa`)."""
    found: list[int] = []
    start = text.find(old)
    while start >= 0:
        found.append(start)
        start = text.find(old, start + 1)
    return found


@dataclass(frozen=True)
class EditCall:
    path: str
    old: str
    new: str
    allowed: Path | None = None  # the resolved path outside the workdir the user allowed

    async def run(self, ctx: ToolContext, limit: int, state: RunState) -> ToolOutcome:
        old, new = valid_unicode(self.old), valid_unicode(self.new)
        real = confined(ctx, self.path, self.allowed)
        folder = self._folder(real)
        try:
            return self._edit(real, folder, old, new, ctx)
        finally:
            os.close(folder)

    def check(self, ctx: ToolContext) -> None:
        """Fails as the edit would, changing nothing: no such file, `old` not in it once. Run
        before the user is asked, so that no one is asked about an edit that cannot apply."""
        real = locate(ctx, self.path)
        folder = self._folder(real)
        try:
            raw = self._read(real, folder, ctx)
        finally:
            os.close(folder)
        self._place(raw.decode("utf-8", "surrogateescape"), valid_unicode(self.old))

    def _folder(self, real: Path) -> int:
        try:
            return nofollow.open_folder(real.parent)
        except nofollow.Swapped:
            raise _swapped(self.path) from None
        except OSError as error:
            raise _os_problem(self.path, error) from None

    def _read(self, real: Path, folder: int, ctx: ToolContext) -> bytes:
        try:
            if nofollow.kind(folder, real.name) == stat.S_IFDIR:
                raise IsADirectoryError(21, "Is a directory", str(real))
            raw = nofollow.read(folder, real.name, not_in_home(ctx, self.path))
        except nofollow.Swapped:
            raise _swapped(self.path) from None
        except OSError as error:
            raise _os_problem(self.path, error) from None
        if b"\0" in raw:
            raise ToolError(f"{self.path} is a binary file (it holds NUL bytes)")
        return raw

    def _place(self, text: str, old: str) -> int:
        """Where the one occurrence of `old` starts; a ToolError when it is not there once."""
        found = occurrences(text, old)
        if not found:
            hint = ""
            if "\n" in old and "\r\n" in text and old.replace("\n", "\r\n") in text:
                hint = " (the file's lines end in \\r\\n)"
            raise ToolError(f"`old` does not occur in {self.path}{hint}; the file is unchanged")
        if len(found) > 1:
            lines = ", ".join(str(text.count("\n", 0, at) + 1) for at in found[:10])
            more = ", …" if len(found) > 10 else ""
            raise ToolError(
                f"`old` occurs {len(found)} times in {self.path} (at lines {lines}{more}); "
                "give more of the text around it so that it occurs once; the file is unchanged"
            )
        return found[0]

    def _edit(self, real: Path, folder: int, old: str, new: str, ctx: ToolContext) -> ToolOutcome:
        raw = self._read(real, folder, ctx)
        # surrogateescape: bytes that are not UTF-8 go back to the file exactly as they were
        text = raw.decode("utf-8", "surrogateescape")
        at = self._place(text, old)
        changed = (text[:at] + new + text[at + len(old) :]).encode("utf-8", "surrogateescape")
        keep = _keeper(ctx, real, self.path, changed)
        if keep is not None:
            keep(raw)
        try:
            nofollow.replace(folder, real.parent, real.name, changed)
        except nofollow.Swapped:
            raise _swapped(self.path) from None
        except OSError as error:
            raise _os_problem(self.path, error) from None
        line = text.count("\n", 0, at) + 1
        return result(f"edited {self.path}: replaced the one occurrence, at line {line}")
