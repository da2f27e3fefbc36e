"""The tests' helpers live once: a provider for a fake, a wait for a condition, a config for a
scratch home. A second definition of one of these names is a copy that drifts."""

from __future__ import annotations

import ast
from pathlib import Path

TESTS = Path(__file__).resolve().parents[1]
SHARED = {
    "provider_for": {"fakes/sdk_providers.py"},
    "wait_until": {"polling.py", "tui/tui_support.py"},  # the app's: a pilot's pauses
    "until": {"polling.py"},
    "write_config": {"home_config.py"},
}


def definitions(name: str) -> set[str]:
    found = set()
    for path in TESTS.rglob("*.py"):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        defined = (ast.FunctionDef, ast.AsyncFunctionDef)
        if any(isinstance(node, defined) and node.name == name for node in tree.body):
            found.add(str(path.relative_to(TESTS)))
    return found


def test_each_shared_helper_is_defined_once() -> None:
    assert {name: definitions(name) for name in SHARED} == SHARED
