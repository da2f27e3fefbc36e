"""The contract between the layers, checked over every module of `src/evertalk` by reading its
imports (nothing is imported: the source is parsed).

1. A client never loads the service's side: the modules of `tui/`, `client/` and `browse/`,
   and the commands people run as clients of the service (CLIENT_COMMANDS), import nothing of
   `agent/`, `providers/`, `compactor/`, nor the SDKs. Their own imports count wherever they
   stand (at the top, for the type checker only, or inside a function: a lazy import is still
   a path the client runs); so does every top-level import of a module they reach (it loads
   with it).
2. The memory core is pure: `memory/` imports nothing of the project outside itself and no
   module of the standard library that does I/O or reads a clock (IO_MODULES), nor any
   package from outside the standard library.
3. No import circles: a module never depends on itself through others. Every import counts,
   wherever it stands: one inside a function defers the load, not the dependency (that is how
   `cli` and `mcp_server` came to need each other), and one for the type checker only is a
   dependency of the code's shape (as the service's handler modules on `Service`).
4. No arrow back up (BACK_UP): the service's side and the clients' stand apart, and a lower
   floor imports nothing of a higher one, wherever the import stands. What both need lives
   below both.
"""

from __future__ import annotations

import ast
import sys
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from functools import cache
from pathlib import Path

import evertalk

SRC = Path(evertalk.__file__).parent
PROJECT = "evertalk"

CLIENT_PACKAGES = ("evertalk.tui", "evertalk.client", "evertalk.browse")
CLIENT_COMMANDS = (
    "evertalk.cli",
    "evertalk.cli_message",
    "evertalk.capture_cli",
    "evertalk.compact_cli",
    "evertalk.forget_cli",
    "evertalk.import_cli",
    "evertalk.mcp_cli",
    "evertalk.mcp_server",
    "evertalk.memory_cli",
    "evertalk.repair_cli",
    "evertalk.search_cli",
    "evertalk.service_cli",
    "evertalk.store_cli",
    "evertalk.undo_cli",
    "evertalk.usage_cli",
)
"""The commands that run as clients of the service, or read the chat's files without it (as
`memory browse`, in CLIENT_PACKAGES)."""
NOT_CLIENT_PATHS = {
    ("evertalk.cli", "_dispatch"): "loads the command asked for (each client command is checked"
    " on its own; `bench recall` calls models itself, for its baseline and its judge)",
    ("evertalk.service_cli", "_run_foreground"): "`serve --foreground` is the service itself",
}
"""Functions of client modules whose lazy imports are not the client's own path."""
SERVICE_SIDE = ("evertalk.agent", "evertalk.providers", "evertalk.compactor", "anthropic", "openai")

SERVICE_PACKAGES = (
    "evertalk.service",
    "evertalk.agent",
    "evertalk.providers",
    "evertalk.compactor",
)
BACK_UP: tuple[tuple[tuple[str, ...], tuple[str, ...], str], ...] = (
    (SERVICE_PACKAGES, CLIENT_PACKAGES, "the service's side loads no client (`service_hold`,"
     " `fetch_mark` are below both)"),
    (CLIENT_PACKAGES, ("evertalk.service",), "a client reads a starting service's log through"
     " `service_opening`"),
    (("evertalk.config",), ("evertalk.mcp_client",), "`[mcp]` is read by `mcp_settings`"),
    (("evertalk.providers",), ("evertalk.ledger",), "a Meter writes to any `call.UsageLog`"),
    (("evertalk.mcp_client",), ("evertalk.agent",), "a tool's outcome is `tool_outcome`'s"),
)  # fmt: skip
"""(lower floors, higher floors, where what they shared went): the arrows that must not come
back."""

IO_MODULES = frozenset(
    {
        "asyncio", "anyio", "concurrent", "ctypes", "datetime", "fcntl", "glob", "http", "io",
        "logging", "mmap", "multiprocessing", "os", "pathlib", "random", "secrets", "select",
        "selectors", "shutil", "signal", "socket", "sqlite3", "ssl", "subprocess", "sys",
        "tempfile", "threading", "time", "trio", "urllib",
    }
)  # fmt: skip
"""What the memory core may not import: files, processes, sockets, event loops, clocks and
randomness (`datetime` can read the clock)."""


@dataclass(frozen=True)
class Import:
    """One imported name: `source` imports `target` (a module of the project when the name is
    one, else the module it comes from) on `line`, `where`: "top", "typing" (under
    `if TYPE_CHECKING:`) or "function" (inside `function`)."""

    source: str
    target: str
    line: int
    where: str
    function: str | None

    def __str__(self) -> str:
        inside = f" in {self.function}()" if self.function else ""
        return f"{self.source} imports {self.target} (line {self.line}{inside})"


@cache
def modules() -> dict[str, Path]:
    """Every module of the project by its dotted name (a package by its own)."""
    found: dict[str, Path] = {}
    for path in sorted(SRC.rglob("*.py")):
        parts = path.relative_to(SRC.parent).with_suffix("").parts
        name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        found[name] = path
    return found


def owner(name: str) -> str:
    """The module of the project that `name` (a module or a name in one) lives in; for another
    package's name, the name itself."""
    if name.split(".")[0] != PROJECT:
        return name
    while name not in modules() and "." in name:
        name = name.rpartition(".")[0]
    return name


class _Collector(ast.NodeVisitor):
    def __init__(self, source: str, package: str) -> None:
        self.source, self.package = source, package
        self.found: list[Import] = []
        self.where: str = "top"
        self.function: str | None = None

    def visit_FunctionDef(self, node: ast.FunctionDef | ast.AsyncFunctionDef) -> None:
        saved = self.where, self.function
        self.where, self.function = "function", self.function or node.name
        self.generic_visit(node)
        self.where, self.function = saved

    visit_AsyncFunctionDef = visit_FunctionDef

    def visit_If(self, node: ast.If) -> None:
        if self.where != "top" or "TYPE_CHECKING" not in ast.unparse(node.test):
            self.generic_visit(node)
            return
        self.where = "typing"
        for child in node.body:
            self.visit(child)
        self.where = "top"
        for child in node.orelse:
            self.visit(child)

    def visit_Import(self, node: ast.Import) -> None:
        for alias in node.names:
            self._add(alias.name, node.lineno)

    def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
        base = node.module or ""
        if node.level:
            parts = self.package.split(".")[: len(self.package.split(".")) - node.level + 1]
            base = ".".join([*parts, *([node.module] if node.module else [])])
        for alias in node.names:
            # another package's module and the names in it are told apart only by importing it
            self._add(
                f"{base}.{alias.name}" if base.split(".")[0] == PROJECT else base, node.lineno
            )

    def _add(self, name: str, line: int) -> None:
        target = owner(name)
        if target != self.source:
            self.found.append(Import(self.source, target, line, self.where, self.function))


@cache
def imports_of(module: str) -> tuple[Import, ...]:
    """What `module` imports, in the order of its source."""
    path = modules()[module]
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    return read_imports(path.read_text(encoding="utf-8"), module, package)


def read_imports(source: str, module: str, package: str) -> tuple[Import, ...]:
    collector = _Collector(module, package)
    collector.visit(ast.parse(source))
    return tuple(collector.found)


def is_in(name: str, packages: Iterable[str]) -> bool:
    return any(name == top or name.startswith(top + ".") for top in packages)


def is_client(module: str) -> bool:
    return is_in(module, CLIENT_PACKAGES) or module in CLIENT_COMMANDS


def reached_by(client: str) -> Iterator[list[Import]]:
    """Each import a client's paths make, as the chain from the client to it: the client's own
    imports, then the top-level ones of every project module they load."""
    seen = {client}
    todo = [[step] for step in imports_of(client) if not _not_client_path(step)]
    while todo:
        chain = todo.pop(0)
        yield chain
        target = chain[-1].target
        # past the service's side the chain is already an offence; another client is checked
        # on its own
        if target in seen or is_in(target, SERVICE_SIDE) or is_client(target):
            continue
        if target in modules():
            seen.add(target)
            todo += [[*chain, step] for step in imports_of(target) if step.where == "top"]


def _not_client_path(step: Import) -> bool:
    return (step.source, step.function or "") in NOT_CLIENT_PATHS


def client_offences() -> list[str]:
    offences = []
    for client in filter(is_client, modules()):
        for chain in reached_by(client):
            if is_in(chain[-1].target, SERVICE_SIDE):
                offences.append(" -> ".join(str(step) for step in chain))
    return list(dict.fromkeys(offences))  # one line for several names of one import


def memory_offences(steps: Iterable[Import]) -> list[str]:
    """What is wrong with the imports `steps` of the memory core's modules."""
    offences = []
    for step in steps:
        top = step.target.split(".")[0]
        if top == PROJECT and not is_in(step.target, ["evertalk.memory"]):
            offences.append(f"{step}: the project outside memory/")
        elif top in IO_MODULES:
            offences.append(f"{step}: I/O or a clock")
        elif top not in (PROJECT, "__future__") and top not in sys.stdlib_module_names:
            offences.append(f"{step}: not the standard library")
    return list(dict.fromkeys(offences))


def back_up_offences(steps: Iterable[Import]) -> list[str]:
    """The imports among `steps` that go from a lower floor to a higher one."""
    offences = []
    for step in steps:
        for lower, higher, instead in BACK_UP:
            if is_in(step.source, lower) and is_in(step.target, higher):
                offences.append(f"{step}: {instead}")
    return list(dict.fromkeys(offences))


def every_import() -> Iterator[Import]:
    for module in modules():
        yield from imports_of(module)


def memory_imports() -> Iterator[Import]:
    for module in modules():
        if is_in(module, ["evertalk.memory"]):
            yield from imports_of(module)


def dependencies() -> dict[str, dict[str, Import]]:
    """For each module, the project modules it imports (anywhere) and the first import of each."""
    graph: dict[str, dict[str, Import]] = {}
    for module in modules():
        edges: dict[str, Import] = {}
        for step in imports_of(module):
            if step.target in modules():
                edges.setdefault(step.target, step)
        graph[module] = edges
    return graph


def circles(graph: dict[str, dict[str, Import]]) -> list[list[str]]:
    """The groups of modules that depend on each other (Tarjan's strongly connected components,
    iterative), each sorted, those of one module left out."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    groups: list[list[str]] = []
    for root in graph:
        if root in index:
            continue
        work = [(root, iter(graph[root]))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is None:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[node])
                if low[node] == index[node]:
                    group = []
                    while True:
                        member = stack.pop()
                        on_stack.discard(member)
                        group.append(member)
                        if member == node:
                            break
                    if len(group) > 1:
                        groups.append(sorted(group))
            elif child not in index:
                index[child] = low[child] = len(index)
                stack.append(child)
                on_stack.add(child)
                work.append((child, iter(graph[child])))
            elif child in on_stack:
                low[node] = min(low[node], index[child])
    return sorted(groups)


def circle_offences() -> list[str]:
    graph = dependencies()
    lines = []
    for group in circles(graph):
        inside = [str(graph[a][b]) for a in group for b in group if b in graph[a]]
        lines.append(" <-> ".join(group) + ":\n      " + "\n      ".join(inside))
    return lines


def report(title: str, offences: list[str]) -> str:
    return f"{title} ({len(offences)}):\n  " + "\n  ".join(offences)


# The rules themselves, on a small made-up project, so that a rule that could never fail is seen.


MADE_UP = """
from typing import TYPE_CHECKING
import os.path
from evertalk.store import records
from . import lock
from ..memory.tree import Tree

if TYPE_CHECKING:
    from textual.app import App
else:
    import json

class Reader:
    async def read(self) -> None:
        def inner() -> None:
            from evertalk.agent import session
"""


def test_the_reader_sees_every_kind_of_import() -> None:
    steps = read_imports(MADE_UP, "evertalk.store.made_up", "evertalk.store")
    found = [(step.target, step.where, step.function) for step in steps]
    assert found == [
        ("typing", "top", None),
        ("os.path", "top", None),
        ("evertalk.store.records", "top", None),  # a module of the project, by its own name
        ("evertalk.store.lock", "top", None),
        ("evertalk.memory.tree", "top", None),  # a name in a module: the module
        ("textual.app", "typing", None),
        ("json", "top", None),
        ("evertalk.agent.session", "function", "read"),  # the outermost function
    ]


def test_circles_are_found_and_single_modules_are_not() -> None:
    step = Import("a", "b", 1, "top", None)
    graph: dict[str, dict[str, Import]] = {
        "a": {"b": step},
        "b": {"c": step},
        "c": {"a": step},
        "d": {"a": step},
        "e": {},
    }
    assert circles(graph) == [["a", "b", "c"]]
    assert circles({"a": {"b": step}, "b": {}}) == []


def test_the_memory_rule_sees_what_it_forbids() -> None:
    def step(target: str) -> Import:
        return Import("evertalk.memory.made_up", target, 1, "function", "f")

    allowed = ["evertalk.memory.nodes", "bisect", "collections.abc", "__future__", "typing"]
    assert memory_offences(map(step, allowed)) == []
    forbidden = ["evertalk.store.days", "evertalk", "time", "os.path", "anyio", "msgspec"]
    found = memory_offences(map(step, forbidden))
    assert [line.split(" (")[0].split()[-1] for line in found] == forbidden


def test_the_arrows_back_up_are_seen_and_those_down_are_not() -> None:
    def step(source: str, target: str) -> Import:
        return Import(source, target, 1, "function", "f")

    down = [
        step("evertalk.agent.session", "evertalk.mcp_client.tools"),
        step("evertalk.ledger", "evertalk.providers.base"),
        step("evertalk.client.connection", "evertalk.service_opening"),
        step("evertalk.service.server", "evertalk.service_hold"),
        step("evertalk.service_cli", "evertalk.client.connection"),  # a command, not service/
    ]
    assert back_up_offences(down) == []
    up = [
        step("evertalk.config", "evertalk.mcp_client.settings"),
        step("evertalk.providers.call", "evertalk.ledger"),
        step("evertalk.agent.tools.fetch", "evertalk.browse.mark"),
        step("evertalk.mcp_client.link", "evertalk.agent.tools.base"),
        step("evertalk.client.connection", "evertalk.service.startup"),
        step("evertalk.service.server", "evertalk.client.hold"),
        step("evertalk.compactor.service", "evertalk.tui.app"),
    ]
    found = back_up_offences(up)
    assert [line.split(" (")[0] for line in found] == [str(s).split(" (")[0] for s in up]


def test_every_client_command_is_a_module() -> None:
    assert [name for name in CLIENT_COMMANDS if name not in modules()] == []
    # a new command says which side it is on
    assert [name for name in modules() if name.endswith("_cli") and not is_client(name)] == []
    assert [name for name, _ in NOT_CLIENT_PATHS if name not in modules()] == []


# The contract over the real tree.


def test_clients_never_load_the_agent_the_providers_the_compactor_or_the_sdks() -> None:
    offences = client_offences()
    assert offences == [], report("a client reaches the service's side", offences)


def test_the_memory_core_imports_nothing_of_the_project_and_no_io() -> None:
    offences = memory_offences(memory_imports())
    assert offences == [], report("memory/ is not pure", offences)


def test_no_module_depends_on_itself_through_others() -> None:
    offences = circle_offences()
    assert offences == [], report("import circles", offences)


def test_no_import_goes_back_up_a_floor() -> None:
    offences = back_up_offences(every_import())
    assert offences == [], report("imports back up the layers", offences)
