"""Nobody outside `compactor/` writes the compactor's fields: what the rest of the program tells
it goes through its methods (`warn_to`, `use_tools`, `use_model`, `follow_budget`,
`carry_cost`, `waiting`, ...), so that each field has one writer and its rules one place."""

from __future__ import annotations

import ast
from pathlib import Path

import evertalk

SOURCE = Path(evertalk.__file__).parent


def compactor_writes(tree: ast.AST) -> list[tuple[int, str]]:
    """Each assignment to an attribute of something named `compactor` (`compactor.x = …`,
    `self.compactor.x += …`, `agent.compactor.x: T = …`): its line and the field."""
    found: list[tuple[int, str]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign):
            targets = node.targets
        elif isinstance(node, (ast.AugAssign, ast.AnnAssign)):
            targets = [node.target]
        else:
            continue
        for target in targets:
            for part in ast.walk(target):
                if isinstance(part, ast.Attribute) and names_compactor(part.value):
                    found.append((node.lineno, part.attr))
    return found


def names_compactor(value: ast.expr) -> bool:
    if isinstance(value, ast.Name):
        return value.id == "compactor"
    return isinstance(value, ast.Attribute) and value.attr == "compactor"


def test_the_check_finds_each_kind_of_write() -> None:
    source = (
        "compactor.a = 1\nself.compactor.b += 2\nagent.compactor.c: int = 3\n"
        "x, compactor.d = 4, 5\nself.compactor.settings.model\ncompactor.run()\n"
    )
    assert compactor_writes(ast.parse(source)) == [(1, "a"), (2, "b"), (3, "c"), (4, "d")]


def test_no_module_outside_the_compactor_writes_its_fields() -> None:
    writes = [
        f"{path.relative_to(SOURCE)}:{line}: compactor.{field}"
        for path in sorted(SOURCE.rglob("*.py"))
        if "compactor" not in path.relative_to(SOURCE).parts[:1]
        for line, field in compactor_writes(ast.parse(path.read_text(), str(path)))
    ]
    assert writes == []
