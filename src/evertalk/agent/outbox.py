"""What a session tells its client: one stream of events, in order, for one consumer (the
service, or a test), with the messages other machines of a shared chat logged."""

from __future__ import annotations

import math
from collections.abc import AsyncIterator, Sequence
from contextlib import suppress

import anyio

from evertalk.chat import Chat
from evertalk.config import redact
from evertalk.protocol.events import AgentEvent, MemoryWarning, Recorded


def runs(logged: Sequence[tuple[str, int]]) -> list[tuple[str, int, int]]:
    """(machine, first id, count) of each run of consecutive ids one machine logged."""
    found: list[tuple[str, int, int]] = []
    for machine, i in logged:
        if found and found[-1][0] == machine and found[-1][1] + found[-1][2] == i:
            found[-1] = (machine, found[-1][1], found[-1][2] + 1)
        else:
            found.append((machine, i, 1))
    return found


class Outbox:
    """The events of one session: sent as they come, never blocking, and given in order by
    `events()` until the session closes. A turn's events come through `Calls.emit`, which
    watches the tools first; what the user should know comes through `warn`."""

    def __init__(self, chat: Chat, secrets: Sequence[str]) -> None:
        self.chat = chat
        self.secrets = secrets
        self._sender, self._receiver = anyio.create_memory_object_stream[AgentEvent](math.inf)

    def send(self, event: AgentEvent) -> None:
        with suppress(anyio.BrokenResourceError, anyio.ClosedResourceError):
            self._sender.send_nowait(event)

    def warn(self, text: str) -> None:
        """A line the user should know, from the memory or an MCP server."""
        self.send(MemoryWarning(text))

    async def events(self) -> AsyncIterator[AgentEvent]:
        """Every event, in order, for one consumer; ends when the session closes."""
        with suppress(anyio.ClosedResourceError):
            async for event in self._receiver:
                yield event

    async def sent(self) -> None:
        """Until the events sent so far have been taken by `events()` (briefly at most)."""
        for _ in range(100):
            if self._receiver.statistics().current_buffer_used == 0:
                return
            await anyio.sleep(0)

    def waiting(self) -> bool:
        """Whether events were sent that `events()` has not given yet."""
        return self._receiver.statistics().current_buffer_used > 0

    def close(self) -> None:
        self._sender.close()
        self._receiver.close()

    def others_logged(self, logged: list[tuple[str, int]]) -> None:
        """Messages other machines logged: each window is told, a run of one machine's at a
        time, with the first one's id to read them by (a single one's text comes along)."""
        for machine, first, count in runs(logged):
            if count == 1:
                record = self.chat.record(first)
                text = redact(record.text, self.secrets)
                self.send(Recorded(machine, 1, record.kind, text, first=first))
            else:
                self.send(Recorded(machine, count, first=first))
