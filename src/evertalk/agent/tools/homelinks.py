"""Whether a file is one of evertalk's home under another name: a hard link made elsewhere
(`ln ~/.evertalk/usage.jsonl here`) leads to the home's file though its path does not.

Only a file with more than one name can be such a link, so the home is walked for those alone,
and each time anew (it changes as the chat grows): a stat of each of its files, links to
folders not followed.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path


def in_home(found: os.stat_result, home: Path | None) -> bool:
    """Whether `found` (a file's stat) is a file under `home`."""
    if home is None or found.st_nlink < 2 or stat.S_ISDIR(found.st_mode):
        return False
    return _holds(str(home), (found.st_dev, found.st_ino))


def _holds(home: str, wanted: tuple[int, int]) -> bool:
    folders = [home]  # a stack, not recursion: a home of any depth is walked
    while folders:
        try:
            with os.scandir(folders.pop()) as entries:
                for entry in entries:
                    if entry.is_dir(follow_symlinks=False):
                        folders.append(entry.path)
                    elif not entry.is_symlink() and _same(entry, wanted):
                        return True
        except OSError:  # unreadable, or gone meanwhile: nothing in it is reached through it
            continue
    return False


def _same(entry: os.DirEntry[str], wanted: tuple[int, int]) -> bool:
    try:
        mine = entry.stat(follow_symlinks=False)
    except OSError:
        return False
    return mine.st_nlink > 1 and (mine.st_dev, mine.st_ino) == wanted
