"""The conformance replay (SPEC Appendix A): JSON Lines events in, one state line out per event."""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from typing import Any

from evertalk.memory.budget import Budget
from evertalk.memory.core import CoreError, MemoryCore
from evertalk.memory.nodes import Node
from evertalk.memory.text import KINDS


class BadEvent(ValueError):
    pass


def replay(lines: Iterable[str], budget: Budget) -> Iterator[str]:
    core = MemoryCore(budget)
    for line in lines:
        try:
            apply(core, parse(line))
        except (BadEvent, CoreError) as error:
            yield json.dumps({"error": str(error)})
            continue
        yield json.dumps(state(core))


def parse(line: str) -> dict[str, Any]:
    try:
        event = json.loads(line)
    except ValueError:
        raise BadEvent("not valid JSON") from None
    if not isinstance(event, dict):
        raise BadEvent("an event must be a JSON object")
    return event


def apply(core: MemoryCore, event: dict[str, Any]) -> None:
    op = event.get("op")
    if op == "append":
        kind, text = event.get("kind"), event.get("text")
        if not isinstance(kind, str) or kind not in KINDS:
            raise BadEvent(f"unknown kind {kind!r}")
        core.append(str(kind), _text(text))
    elif op == "build":
        core.build(_node(event), _text(event.get("text")))
    elif op == "fail":
        core.fail(_node(event))
    else:
        raise BadEvent(f"unknown op {op!r}")


def state(core: MemoryCore) -> dict[str, Any]:
    return {
        "t": core.t,
        "view": [list(node) for node in core.view],
        "size": core.view.size,
        "shrinking": core.view.shrinking,
        "cview": [list(node) for node in core.cview],
        "csize": core.cview.size,
        "cshrinking": core.cview.shrinking,
        "ready": [list(node) for node in core.ready()],
    }


def _text(value: object) -> str:
    if not isinstance(value, str):
        raise BadEvent("text must be a string")
    return value


def _node(event: dict[str, Any]) -> Node:
    level, index = event.get("l"), event.get("i")
    if not (_is_int(level) and _is_int(index)):
        raise BadEvent("l and i must be integers")
    assert isinstance(level, int) and isinstance(index, int)
    if level < 0 or index < 0:
        raise BadEvent("l and i must not be negative")
    return (level, index)


def _is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)
