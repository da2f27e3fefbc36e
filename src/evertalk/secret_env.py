"""Credentials a process of evertalk was started with: kept in its memory, out of its environment.

A tool's command runs as the user. Without a sandbox it could read `/proc/<pid>/environ` of the
service (its parent) or of a client, and print a key in any of a hundred encodings that no
redaction can follow. So each evertalk process, as it starts (`seal`):

- moves every variable that looks like a credential (`looks_secret`) out of `os.environ` into a
  table of its own, so that no child inherits it;
- overwrites those values in the block the kernel shows as `/proc/<pid>/environ` (the strings the
  process was started with: removing a variable from the environment leaves them in place);
- makes itself non-dumpable (Linux: `/proc/<pid>/environ` and `mem` become the superuser's; a
  debugger of the same user cannot attach) or denies debuggers (macOS).

The settings read the credentials through `environment()`; the processes evertalk starts for its
own use (the service, started by a client) get them through `for_own_processes()`. Standard
library only, and loaded at every start: `ctypes` is imported only when sealing.
"""

from __future__ import annotations

import os
import re
import sys
from collections import ChainMap
from collections.abc import Iterable, Mapping
from typing import Final

_kept: dict[str, str] = {}
_closed: bool = False

SECRET_WORDS: Final = re.compile(
    r"SECRET|PASSWORD|PASSWD|PASSPHRASE|TOKEN|CREDENTIAL|API_?KEY|ACCESS_?KEY|PRIVATE_?KEY|AUTH"
)
"""Parts of a variable's name that say its value is a credential (ANTHROPIC_API_KEY, PGPASSWORD,
AWS_SECRET_ACCESS_KEY, GITHUB_TOKEN, SSH_AUTH_SOCK: a way to the user's keys)."""
SECRET_PARTS: Final = frozenset({"KEY", "PASS", "PW", "PWD", "PIN", "COOKIE", "SIGNATURE"})
"""Whole `_`-separated parts of a name that say the same (DEPLOY_KEY, SMTP_PASS)."""
NOT_SECRET: Final = frozenset({"PWD", "OLDPWD"})
"""Names caught by the rules above that hold no secret: the working directories."""
SECRET_VALUE: Final = re.compile(
    r"^(sk-|ghp_|gho_|ghs_|ghu_|github_pat_|glpat-|xox[abpr]-|AKIA|ASIA|AIza)"
    r"|://[^/\s:@]*:[^/\s@]+@"
)
"""Values that are credentials whatever their name: well-known key prefixes, and an address
that carries a password (`postgresql://user:pw@host`)."""


def looks_secret(name: str, value: str) -> bool:
    """Whether the variable `name=value` holds (or leads to) a credential."""
    upper = name.upper()
    if upper in NOT_SECRET:
        return False
    if SECRET_WORDS.search(upper) or SECRET_PARTS.intersection(upper.split("_")):
        return True
    return bool(SECRET_VALUE.search(value))


def seal() -> None:
    """Take the credentials out of this process's environment and close the process to others
    of the same user, as far as the system allows. Once per process; later calls add nothing
    but the variables set since (a test's, or a setting applied in place)."""
    global _closed
    found = {name: value for name, value in os.environ.items() if looks_secret(name, value)}
    _wipe_values(found)
    for name, value in found.items():
        _kept[name] = value
        del os.environ[name]
    if not _closed:
        _closed = _close_process()


def environment() -> Mapping[str, str]:
    """The environment as it was given to this process, credentials included: what the
    settings are read from."""
    return ChainMap(os.environ, _kept)


def for_own_processes() -> dict[str, str]:
    """The environment for a process of evertalk's own (the service a client starts): the
    whole of what this one was given. Never for a tool's command (`tool_environment`)."""
    return {**_kept, **os.environ}


def kept(name: str) -> str | None:
    """A credential variable's value, wherever it now is; None when unset or empty."""
    return os.environ.get(name) or _kept.get(name) or None


def closed() -> bool:
    """Whether other processes of the user are kept out of this one's memory."""
    return _closed


def _wipe_values(found: Mapping[str, str]) -> None:
    """Overwrite with zeros the values of `found` in the C environment's strings: those the
    kernel placed at the start hold what `/proc/<pid>/environ` shows for the process's life."""
    if not found:
        return
    import ctypes

    for address in _entries():
        entry = ctypes.string_at(address)
        name, _, value = entry.partition(b"=")
        if name.decode("utf-8", "surrogateescape") in found and value:
            ctypes.memset(address + len(name) + 1, 0, len(value))


def _entries() -> Iterable[int]:
    """The addresses of the C environment's `NAME=value` strings; none where they cannot be
    reached."""
    import ctypes as c

    try:
        libc = c.CDLL(None)
        if sys.platform == "darwin":
            getter = libc._NSGetEnviron
            getter.restype = c.POINTER(c.POINTER(c.c_void_p))
            array = getter().contents
        else:
            array = c.POINTER(c.c_void_p).in_dll(libc, "environ")
    except (OSError, ValueError, AttributeError):
        return []
    found, index = [], 0
    while array[index]:
        found.append(int(array[index]))
        index += 1
    return found


PR_SET_DUMPABLE: Final = 4
PT_DENY_ATTACH: Final = 31


def _close_process() -> bool:
    """Linux: not dumpable (its /proc files are the superuser's, no ptrace by the same user);
    macOS: no debugger may attach. Whether it took."""
    import ctypes

    try:
        libc = ctypes.CDLL(None, use_errno=True)
        if sys.platform.startswith("linux"):
            return bool(libc.prctl(PR_SET_DUMPABLE, 0, 0, 0, 0) == 0)
        if sys.platform == "darwin":
            return bool(libc.ptrace(PT_DENY_ATTACH, 0, 0, 0) == 0)
    except (OSError, AttributeError):
        pass
    return False
