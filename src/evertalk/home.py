"""Where evertalk keeps its chat and settings unless `--home` says otherwise: a module of its
own, so that every command finds it without importing another command (`cli` and `mcp_server`
once needed each other for it)."""

from __future__ import annotations

import os
from pathlib import Path


def default_home() -> Path:
    """`$EVERTALK_HOME`, else `~/.evertalk`."""
    return Path(os.environ.get("EVERTALK_HOME") or Path.home() / ".evertalk")
