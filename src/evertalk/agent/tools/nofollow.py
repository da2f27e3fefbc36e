"""Writing a file through a handle on its folder, reached without following links.

The file tools decide where a path leads with its links resolved, and then write there. Between
the two, another process (a command the model started, a subagent's) can swap a folder of that
path for a link to elsewhere; a write by path would follow it. Here the folder is opened one
component at a time from the root with O_NOFOLLOW, so a folder that is now a link is an error,
and the file and its temporary copy are made, read and renamed relative to that handle, so they
stay in the folder that was checked whatever happens to its path. Before the rename, the path
must still lead to that folder (it may have been moved away meanwhile).

Only regular files are read. A named pipe opened for reading waits for a writer, which would
hold the service's event loop; so a file is opened without blocking and looked at through its
descriptor before a byte is read: whatever was put in its place after a check is refused too.
"""

from __future__ import annotations

import contextlib
import errno
import os
import secrets
import stat
from collections.abc import Callable
from pathlib import Path

from evertalk.store.secure import write_all

_FOLDER = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_FILE = os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC

_KINDS = {
    stat.S_IFIFO: "a named pipe (FIFO)",
    stat.S_IFSOCK: "a socket",
    stat.S_IFCHR: "a character device",
    stat.S_IFBLK: "a block device",
}


class Swapped(Exception):
    """A folder of the path became a link, or moved, while the file was being written."""


class NotRegular(OSError):
    """A FIFO, a socket or a device where a file was wanted: never opened in a way that blocks,
    never read. `what` names it: "a named pipe (FIFO)"."""

    def __init__(self, what: str) -> None:
        super().__init__(f"{what}, not a regular file")
        self.what = what


def refuse_special(mode: int) -> None:
    """NotRegular unless `mode` is a regular file's, a folder's or a link's (which the callers
    handle their own way)."""
    if stat.S_IFMT(mode) not in (stat.S_IFREG, stat.S_IFDIR, stat.S_IFLNK):
        raise NotRegular(_KINDS.get(stat.S_IFMT(mode), "a special file"))


def open_regular(path: str | Path, *, dir_fd: int | None = None, follow: bool = False) -> int:
    """A blocking descriptor for reading the regular file `path`, or NotRegular, found without
    opening it when the file is already one (a device is not even opened), else found through
    a descriptor opened with O_NONBLOCK, which a pipe swapped in meanwhile cannot stall. A
    folder is IsADirectoryError; with `follow` a link is followed, else it is the OSError of
    O_NOFOLLOW."""
    refuse_special(os.stat(path, dir_fd=dir_fd, follow_symlinks=follow).st_mode)
    flags = _FILE if follow else _FILE | os.O_NOFOLLOW
    try:
        file = os.open(path, flags, dir_fd=dir_fd)
    except OSError as error:
        if error.errno == errno.ENXIO:  # a socket (or a device without its driver) swapped in
            refuse_special(os.stat(path, dir_fd=dir_fd, follow_symlinks=follow).st_mode)
        raise
    try:
        mode = os.fstat(file).st_mode
        if stat.S_ISDIR(mode):
            raise IsADirectoryError(errno.EISDIR, "Is a directory", str(path))
        refuse_special(mode)  # the descriptor's file is no link: regular it is, after that
        os.set_blocking(file, True)
    except BaseException:
        os.close(file)
        raise
    return file


def open_folder(folder: Path, *, create: bool = False) -> int:
    """A handle on `folder` (absolute, links resolved), each component opened without following
    a link; with `create`, missing folders are made the same way. Swapped when a component is a
    link now; OSError as the system says otherwise (a file where a folder should be)."""
    fd = os.open("/", _FOLDER)
    try:
        for name in folder.parts[1:]:
            child = _open_child(fd, name, create)
            os.close(fd)
            fd = child
    except BaseException:
        os.close(fd)
        raise
    return fd


def _open_child(fd: int, name: str, create: bool) -> int:
    try:
        return os.open(name, _FOLDER, dir_fd=fd)
    except FileNotFoundError:
        if not create:
            raise
    except OSError as error:
        # Linux says "not a directory" for a link opened with O_DIRECTORY | O_NOFOLLOW; a file
        # there is the user's to hear of, anything else changed as we looked
        found = kind(fd, name)
        if _is_link_error(error) or found in (None, stat.S_IFDIR, stat.S_IFLNK):
            raise Swapped(name) from None
        raise
    with contextlib.suppress(FileExistsError):  # made by someone else meanwhile: checked below
        os.mkdir(name, 0o777, dir_fd=fd)
    return _open_child(fd, name, False)


def _is_link_error(error: OSError) -> bool:
    return error.errno in (errno.ELOOP, errno.EMLINK)  # EMLINK: FreeBSD's O_NOFOLLOW on a link


def still_there(folder: Path, fd: int) -> bool:
    """Whether `folder`, reached without following links, is still the folder `fd` holds."""
    try:
        again = open_folder(folder)
    except OSError:
        return False
    try:
        now, held = os.fstat(again), os.fstat(fd)
    finally:
        os.close(again)
    return (now.st_dev, now.st_ino) == (held.st_dev, held.st_ino)


def kind(fd: int, name: str) -> int | None:
    """The file type bits of `name` in the folder (a link's own, not its target's); None when
    there is no such entry."""
    try:
        return stat.S_IFMT(os.stat(name, dir_fd=fd, follow_symlinks=False).st_mode)
    except FileNotFoundError:
        return None


Check = Callable[[os.stat_result], None]
"""Told what a file is before it is read; raises to refuse it."""


def read(fd: int, name: str, check: Check | None = None) -> bytes:
    """The bytes of the regular file `name` in the folder, once `check` (if any) let it be read;
    a link there is Swapped (its target was resolved before: a link now is one put in its place);
    anything else than a regular file is NotRegular, left unread."""
    try:
        file = open_regular(name, dir_fd=fd)
    except OSError as error:
        if _is_link_error(error):
            raise Swapped(name) from None
        raise
    with os.fdopen(file, "rb") as opened_file:
        if check is not None:
            check(os.fstat(file))
        return opened_file.read()


def replace(fd: int, folder: Path, name: str, data: bytes) -> None:
    """Put `data` in `name` in the folder atomically: a temporary file beside it, fsynced, then
    renamed over it, once `folder` is seen to still lead to the folder. An existing file's
    permission bits are kept; a new file gets the usual 0666 − umask. Nothing is left behind
    when it fails."""
    mode: int | None = None
    with contextlib.suppress(FileNotFoundError):
        found = os.stat(name, dir_fd=fd, follow_symlinks=False)
        if stat.S_ISREG(found.st_mode):
            mode = stat.S_IMODE(found.st_mode)
    tmp = f".{name}.{secrets.token_hex(4)}.tmp"
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
    file = os.open(tmp, flags, 0o666, dir_fd=fd)
    try:
        try:
            if mode is not None:
                os.fchmod(file, mode)
            write_all(file, data)
            os.fsync(file)
        finally:
            os.close(file)
        if not still_there(folder, fd):
            raise Swapped(folder)
        os.replace(tmp, name, src_dir_fd=fd, dst_dir_fd=fd)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp, dir_fd=fd)
        raise
