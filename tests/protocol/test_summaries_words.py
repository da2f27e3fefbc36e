"""One wording of the compactor's state: the app's status bar and the status in lines (MCP
`memory_status`, `service status`) say paused, failed, catching up and queued alike, the bar as
one part of its line, the lines starting their summaries with that same part."""

from __future__ import annotations

import msgspec
import pytest
from msgspec import to_builtins as asdict
from msgspec.structs import replace

from evertalk.protocol.events import CatchingUp
from evertalk.protocol.replies import Status
from evertalk.protocol.status import AgentStatus
from evertalk.protocol.status_text import status_lines
from evertalk.tui.status import status_line

BASE = AgentStatus(
    model="claude-sonnet-5-5",
    view_bytes=84_213,
    view_ceiling=128_000,
    view_floor=64_000,
    merging=False,
    view_merges=0,
    compactor_running=0,
    compactor_queued=0,
    cost=0.42,
    turn_cost=0.4,
    busy=False,
    subagents=0,
)

STATES: dict[str, dict[str, object]] = {
    "idle": {},
    "queued": {"compactor_queued": 12},
    "running, queued and failed": {
        "compactor_running": 3,
        "compactor_queued": 12,
        "compactor_failed": 1,
        "compactor_error": "12+1: overloaded",
    },
    "failed alone": {"compactor_failed": 2, "compactor_error": "12+1: overloaded"},
    "catching up": {
        "compactor_running": 8,
        "compactor_queued": 40,
        "compactor_failed": 1,
        "catching_up": CatchingUp(1_204, 1_500.0),
    },
    "paused": {"compactor_paused": True, "compactor_queued": 40, "compactor_failed": 8},
    "paused far behind": {
        "compactor_paused": True,
        "compactor_queued": 40,
        "catching_up": CatchingUp(3_137, 3_900.0),
    },
}


def lines_of(agent: AgentStatus) -> list[str]:
    frame = {"type": "status", "pid": 4100, "version": "0.1.0", "clients": 1, "messages": 9}
    return status_lines(msgspec.convert(frame | asdict(agent), Status))


def bar_part(agent: AgentStatus) -> str:
    """The compactor's part of the status bar, as drawn (the parts around it are fixed)."""
    line = status_line(agent)
    head = "claude-sonnet-5-5 · mem 84K/128K · "
    assert line.startswith(head) and line.endswith(" · $0.42"), line
    return line.removeprefix(head).removesuffix(" · $0.42")


@pytest.mark.parametrize("name", list(STATES))
def test_the_bar_and_the_lines_say_the_compactors_state_alike(name: str) -> None:
    agent = replace(BASE, **STATES[name])
    part = bar_part(agent)
    summaries = [line for line in lines_of(agent) if line.startswith(part)]
    assert summaries, (part, lines_of(agent))
    assert summaries[0] == part or summaries[0].startswith(part + ": "), summaries


def test_the_lines_add_what_the_bar_leaves_out() -> None:
    paused = replace(BASE, **STATES["paused"])
    assert "summaries paused (48 to go): the summary model cannot be used or reached" in lines_of(
        paused
    )
    behind = replace(BASE, **STATES["catching up"])
    lines = lines_of(behind)
    assert "catching up: 1,204 summaries to go, about 25 min, 1 failed" in lines
    assert "summaries: 8 running, 40 queued, 1 failed" in lines  # the counts, below it
    failing = replace(BASE, **STATES["failed alone"])
    assert "latest summary failure: 12+1: overloaded" in lines_of(failing)
