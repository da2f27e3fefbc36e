"""MCP `memory_view` with no part gives the newest lines, a full part of them (issue 23: it gave
`[part 3 of 3]`, 1,395 bytes of a 64 KB view); `memory_status` reads the status frame as every
client does (its typed fields), and says each field in words."""

from __future__ import annotations

import json

from evertalk.mcp_server import PART_BYTES, format_status, view_part
from evertalk.protocol import frames
from evertalk.protocol.replies import Status
from evertalk.protocol.status_text import status_lines


def test_the_default_part_is_the_newest_and_full() -> None:
    line = 1000
    count = (2 * PART_BYTES) // (line + 1) + 2  # two full parts and a little more
    lines = [f"{i}+1|user: " + "x" * (line - len(f"{i}+1|user: ")) for i in range(count)]
    view = "\n".join(["<chat>", *lines, "</chat>"])
    head, *shown = view_part(view, None).split("\n")
    assert head.startswith("[part 3 of 3 of the view, the newest lines; part=2 has the lines")
    assert shown[-1] == "</chat>"
    size = len("\n".join(shown).encode())
    assert PART_BYTES - line - 1 < size <= PART_BYTES, size  # as full as whole lines allow
    assert view_part(view, 3) == view_part(view, None)
    parts = [view_part(view, k).split("\n")[1:] for k in (1, 2, 3)]
    assert [row for part in parts for row in part] == view.split("\n")  # in order, nothing lost


def service_frame(**changes: object) -> dict[str, object]:
    """A status frame as the service sends it (every field of this version)."""
    from msgspec import to_builtins as asdict

    from evertalk.protocol.status import AgentStatus

    agent = AgentStatus(
        model="claude-sonnet-5-5",
        view_bytes=84210,
        view_ceiling=128000,
        view_floor=64000,
        merging=False,
        view_merges=911,
        compactor_running=0,
        compactor_queued=23,
        cost=0.4127,
        turn_cost=0.3318,
        busy=False,
        subagents=0,
    )
    frame = {"type": "status", "rid": 2, "pid": 4100, "version": "0.1.0", "clients": 2}
    return frame | {"messages": 1843, **asdict(agent)} | changes


def read(frame: dict[str, object]) -> Status:
    """The frame as a client reads it off the wire."""
    status = frames.decode_frame(json.dumps(frame).encode())
    assert isinstance(status, Status)
    return status


def test_the_status_names_no_field_by_its_raw_name() -> None:
    """Every field this version sends reads as words (issue 23: `compactor_paused: false`)."""
    frame = service_frame(
        compactor_paused=True,
        compactor_failed=1,
        compactor_error="12+1: the server refused the model",
        chat_error="no space left on device",
        mcp_problems=["files: cannot start: no such program"],
    )
    text = format_status(read(frame))
    for name in frame:  # a raw name: `compactor_paused: true`
        assert "_" not in name or name not in text, text
    lines = text.split("\n")
    assert "summaries paused (24 to go): the summary model cannot be used or reached" in lines
    assert any(
        line.startswith("the chat takes no changes until it is reopened: no space")
        for line in lines
    )
    assert "MCP server files: cannot start: no such program" in lines
    assert "spent today: $0.4127 (turns and subagents since the service started: $0.3318)" in lines
    # a newer service's field is not one a client reads: the frame's type says what it holds
    assert "shiny" not in format_status(read(service_frame(shiny=[1, 2])))


def test_one_reading_of_the_frame_for_every_client() -> None:
    frame = service_frame(busy=True, compactor_paused=False)
    status = read(frame)
    assert (status.pid, status.version, status.clients, status.messages) == (4100, "0.1.0", 2, 1843)
    assert status.agent.busy and status.agent.compactor_queued == 23
    assert format_status(status) == "\n".join(status_lines(status))
