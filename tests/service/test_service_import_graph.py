"""The service's modules import one another in one direction: the server imports its handlers,
and no handler imports the server (not even for its types), so that each can be read, tested
and moved on its own. Every import counts: at the top, under TYPE_CHECKING, inside a function."""

from __future__ import annotations

import ast
from pathlib import Path

import evertalk.service

PACKAGE = "evertalk.service"
FOLDER = Path(evertalk.service.__file__).parent


def imported(path: Path) -> set[str]:
    """The modules of the service package that `path` imports, anywhere in it."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module is not None:
            if node.module == PACKAGE:  # `from evertalk.service import commands`
                found |= {f"{PACKAGE}.{alias.name}" for alias in node.names}
            elif node.module.startswith(PACKAGE + "."):
                found.add(node.module)
        elif isinstance(node, ast.Import):
            found |= {a.name for a in node.names if a.name.startswith(PACKAGE + ".")}
    return found


def graph() -> dict[str, set[str]]:
    modules = {f"{PACKAGE}.{path.stem}": path for path in FOLDER.glob("*.py")}
    return {name: imported(path) & set(modules) for name, path in modules.items()}


def circles(edges: dict[str, set[str]]) -> list[list[str]]:
    """Every import circle, as the path that closes it."""
    found: list[list[str]] = []

    def visit(name: str, path: list[str]) -> None:
        for after in sorted(edges.get(name, ())):
            if after in path:
                found.append([*path[path.index(after) :], after])
            elif len(path) < len(edges):
                visit(after, [*path, after])

    for start in sorted(edges):
        visit(start, [start])
    return found


def test_the_rule_sees_a_circle() -> None:
    assert circles({"a": {"b"}, "b": {"a"}}) == [["a", "b", "a"], ["b", "a", "b"]]
    assert circles({"a": {"b"}, "b": set()}) == []


def test_the_service_has_no_import_circle() -> None:
    edges = graph()
    assert f"{PACKAGE}.requests" in edges[f"{PACKAGE}.server"]  # the listing is of real imports
    assert circles(edges) == []


def test_no_handler_imports_the_server() -> None:
    for name, after in graph().items():
        assert f"{PACKAGE}.server" not in after, name
