"""Where a deep home's service listens.

A home too deep for a socket's path has its socket in `<tmp>/evertalk-<uid>/`, a name any local
user can take first when the temporary directory is shared. The service never listens in a
folder it cannot trust, and is not kept from starting by one either: it then listens in a private
folder of its own (`$XDG_RUNTIME_DIR`, else a fresh one with a random name) and writes its path
to the home (`SOCKET_RECORD`), where every client reads it, whatever its own variables say. The
home is the user's alone (0700), so the record is as trusted as the chat.

Chosen while the service holds the chat's lock: two services cannot record different places.
"""

from __future__ import annotations

import os
import tempfile
from contextlib import suppress
from pathlib import Path

from evertalk.protocol.paths import (
    MAX_SOCKET_PATH,
    SOCKET_RECORD,
    is_private_folder,
    log,
    recorded_socket,
    shared_socket_path,
    socket_digest,
    socket_folder_problem,
    socket_path,
)
from evertalk.store.secure import write_atomic


def listen_path(home: Path) -> Path:
    """The socket the service of `home` listens on: in its home when that is short enough;
    else the recorded private one while its folder is still this user's; else the shared one
    when it can be trusted (the record then goes); else a new private one, recorded."""
    path = socket_path(home)
    if not is_private_folder(path):
        return path
    recorded = recorded_socket(home)
    if recorded is not None and _trusted(recorded):
        return recorded
    shared = shared_socket_path(home)
    with suppress(OSError):  # taken, or no room for it: checked below either way
        shared.parent.mkdir(mode=0o700)
    problem = socket_folder_problem(shared)
    record = home.resolve() / SOCKET_RECORD
    if problem is None and shared.parent.is_dir():
        record.unlink(missing_ok=True)
        return shared
    private = _private_socket(home)
    write_atomic(record, os.fsencode(private) + b"\n", durable=False)
    log(f"{problem or f'cannot make {shared.parent}'}: listening in {private.parent} instead")
    return private


def _trusted(path: Path) -> bool:
    """Whether the socket's folder exists and is this user's, 0700."""
    return path.parent.is_dir() and socket_folder_problem(path) is None


def _private_socket(home: Path) -> Path:
    """A socket in `$XDG_RUNTIME_DIR` (private to the user by definition) when it is set and
    short enough, else in a new folder of the temporary directory, made 0700 with a random
    name that no other user can have taken first."""
    name = f"evertalk-{socket_digest(home)}.sock"
    runtime = os.environ.get("XDG_RUNTIME_DIR", "")
    if os.path.isabs(runtime):
        path = Path(runtime) / name
        if len(os.fsencode(path)) <= MAX_SOCKET_PATH and _trusted(path):
            return path
    return Path(tempfile.mkdtemp(prefix=f"evertalk-{os.getuid()}-")) / name
