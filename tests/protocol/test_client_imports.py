"""The `-p` client of the service starts fast: what it imports never loads the agent, the
compactor, the providers or their SDKs (checked in a fresh interpreter)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

CLIENT_MODULES = (
    "evertalk.cli",
    "evertalk.client.connection",
    "evertalk.client.headless",
    "evertalk.client.printers",
    "evertalk.grants",
    "evertalk.image_files",
    "evertalk.protocol.paths",
    "evertalk.protocol.wire",
)
FORBIDDEN_PACKAGES = ("anthropic", "openai", "httpx", "textual", "anyio")
FORBIDDEN_EVERTALK = ("evertalk.agent", "evertalk.compactor", "evertalk.providers")


def loaded_modules(tmp_path: Path, modules: tuple[str, ...] = CLIENT_MODULES) -> list[str]:
    """The sorted names in `sys.modules` of a fresh interpreter that imported `modules`."""
    code = (
        "import importlib, json, sys\n"
        f"for name in {modules!r}:\n"
        "    importlib.import_module(name)\n"
        "print(json.dumps(sorted(sys.modules)))\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, cwd=tmp_path, timeout=120
    )
    assert result.returncode == 0, result.stderr
    names: list[str] = json.loads(result.stdout)
    return names


def is_forbidden(name: str) -> bool:
    if name.split(".")[0] in FORBIDDEN_PACKAGES:
        return True
    return any(name == top or name.startswith(top + ".") for top in FORBIDDEN_EVERTALK)


def test_the_rule_sees_what_it_forbids() -> None:
    for name in ("anthropic", "openai._client", "httpx", "textual.app", "anyio"):
        assert is_forbidden(name), name
    for name in ("evertalk.agent", "evertalk.agent.loop", "evertalk.providers.base"):
        assert is_forbidden(name), name
    assert is_forbidden("evertalk.compactor")
    for name in ("evertalk.agents_md", "evertalk.protocol.events", "httpx_like", "json"):
        assert not is_forbidden(name), name


def test_the_client_loads_neither_the_agent_nor_the_sdks(tmp_path: Path) -> None:
    names = loaded_modules(tmp_path)
    assert set(CLIENT_MODULES) <= set(names)  # the listing is of a real import
    assert [name for name in names if is_forbidden(name)] == []


APP_MODULES = (
    "evertalk.tui",
    "evertalk.tui.main",
    "evertalk.tui.app",
    "evertalk.tui.turn_rows",
    "evertalk.tui.history",
    "evertalk.tui.widgets",
    "evertalk.tui.commands",
    "evertalk.client.remote",
)


def test_the_terminal_app_loads_neither_the_agent_nor_the_sdks(tmp_path: Path) -> None:
    names = loaded_modules(tmp_path, APP_MODULES)
    assert set(APP_MODULES) <= set(names)
    sdks = ("anthropic", "openai", "httpx")  # Textual and anyio are the app's own
    assert [n for n in names if n.split(".")[0] in sdks] == []
    # nor anything of the providers', nor the prompts, nor the memory's core (the app's first
    # screen waits for every module it loads)
    found = [n for n in names if is_forbidden(n) and n.split(".")[0] == "evertalk"]
    assert found == []
    assert [n for n in ("evertalk.prompts", "evertalk.memory.core") if n in names] == []
