"""The tools a user may grant for one run (`--allow shell,write`): standard library only."""

from __future__ import annotations

from typing import Final, Literal

GUARDED: Final = ("shell", "read", "write", "edit")
"""The tools that may change (or read outside) the machine's files: they run by policy."""

Decision = Literal["once", "always", "deny"]
"""A user's answer to a permission request."""

DENIED: Final = "the user did not allow this call"
"""How a call the user (or the policy) refused starts its result."""


def parse_grants(text: str) -> list[str]:
    """The tools of a `--allow` value such as `shell,write,edit` (spaces allowed); a ValueError
    names an unknown one."""
    names = [name.strip() for name in text.split(",") if name.strip()]
    for name in names:
        if name not in GUARDED:
            raise ValueError(f"--allow: unknown tool {name!r} (the tools: {', '.join(GUARDED)})")
    return names
