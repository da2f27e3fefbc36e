"""`/compact`: the summaries built now, as `evertalk memory compact` builds them. A connection
of its own (a `compact` client, which no permission question goes to) asks the service where
its compactor is (`compact`) until nothing is left: while it asks, a failed summary is tried
again on a timer rather than at the next message; once it closes, the compactor goes back to
its usual pace. One row shows how far it got."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import anyio

from evertalk.budget import dollars
from evertalk.client.remote import Remote, RequestFailed, ServiceError, open_remote
from evertalk.compact_cli import CLIENT, progress_line
from evertalk.protocol.replies import Compact
from evertalk.protocol.requests import GetCompact
from evertalk.terminal_text import counted

POLL_SECONDS = 0.5
DONE_ALREADY = "the summaries are all built: nothing to do"


async def compact_in_app(home: Path, say: Callable[[str], None]) -> None:
    """Build the summaries of `home`'s running service, `say`ing each new state of the row; a
    ServiceError says why it stopped (what was built is kept)."""
    remote = await open_remote(home, CLIENT, start=False)
    try:
        async with anyio.create_task_group() as group:
            group.start_soon(remote.run)
            group.start_soon(_drain, remote)  # frames for every client: not this one's job
            await _watch(remote, say)
            group.cancel_scope.cancel()
    finally:
        await remote.aclose()


async def _drain(remote: Remote) -> None:
    async for _ in remote.frames():
        pass


async def _watch(remote: Remote, say: Callable[[str], None]) -> None:
    first: Compact | None = None
    while True:
        try:
            reply = await remote.request(GetCompact(), Compact)
        except RequestFailed as error:
            if error.kind != "not_ready":  # not_ready: it reopens the chat, a moment
                raise
            await anyio.sleep(POLL_SECONDS)
            continue
        if reply.setup_error:
            raise ServiceError(f"the compactor's model cannot be used: {reply.setup_error}")
        if reply.broken:
            raise ServiceError(reply.broken)
        first = first or reply
        if reply.left == 0:
            say(done_line(first, reply))
            return
        built = reply.built - first.built
        cost = max(0.0, reply.cost - first.cost)
        say(progress_line(built, built + reply.left, reply.calls - first.calls, cost, reply.error))
        await anyio.sleep(POLL_SECONDS)


def done_line(first: Compact, last: Compact) -> str:
    """What was built from the first look to the last, and what it cost."""
    if first.left == 0:
        return DONE_ALREADY
    built = counted(last.built - first.built, "summary", "summaries")
    calls = counted(last.calls - first.calls, "model call")
    line = f"summaries built: {built} ({calls}, {dollars(max(0.0, last.cost - first.cost))})"
    if last.merged_from is not None:
        line += f"; the view merged down from {last.merged_from:,} to {last.view_bytes:,} bytes"
    return line
