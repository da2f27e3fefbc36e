"""A scan of every byte under a home for a text a forget took out: as it is, JSON-escaped once
and twice (a tool call's input in a record), with `\\uXXXX` escapes or without, in UTF-16, in
hex and in base64 (no test of its own)."""

from __future__ import annotations

import base64
import json
import os
from pathlib import Path


def forms(text: str) -> set[bytes]:
    """The bytes that spell `text` in each of its forms."""
    strings = {text}
    for ascii_only in (False, True):
        once = json.dumps(text, ensure_ascii=ascii_only)[1:-1]
        strings |= {once, json.dumps(once, ensure_ascii=ascii_only)[1:-1]}
    found = {s.encode("utf-8") for s in strings}
    data = text.encode("utf-8")
    found |= {text.encode("utf-16-le"), text.encode("utf-16-be"), data.hex().encode()}
    found |= {base64.b64encode(data).rstrip(b"="), base64.urlsafe_b64encode(data).rstrip(b"=")}
    return found


def files_holding(home: Path, *texts: str) -> list[str]:
    """Every file under `home` (recursively: checkpoints, damaged copies, the search database
    and its -wal and -shm files…) whose bytes spell any of `texts` in any form."""
    return files_with(home, {form for text in texts for form in forms(text)})


def files_with(home: Path, wanted: set[bytes]) -> list[str]:
    """Every file under `home` (links left out) whose bytes hold any of `wanted`."""
    found = []
    for folder, _, names in os.walk(home):
        for name in names:
            path = Path(folder) / name
            if path.is_symlink() or not path.is_file():
                continue
            data = path.read_bytes()
            if any(form in data for form in wanted):
                found.append(str(path.relative_to(home)))
    return sorted(found)


def every_file(home: Path) -> list[str]:
    """The files under `home`, to show that the scan saw the ones it should."""
    return sorted(
        str(Path(folder, name).relative_to(home))
        for folder, _, names in os.walk(home)
        for name in names
    )
