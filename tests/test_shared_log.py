"""A shared chat's turn log (`shared_log.py`): messages logged one at a time in order; one the
database could not take sent again in its place; a stale turn's dropped; another failure said
once, to whoever waits."""

from __future__ import annotations

import anyio
import pytest

from evertalk.pgstore.errors import StaleTurn
from evertalk.pgstore.session import DatabaseDown
from evertalk.shared_chat import TurnFence
from evertalk.shared_log import Queued, Writer
from evertalk.store.errors import StoreError
from evertalk.store.message_log import NewMessage

pytestmark = pytest.mark.anyio


class Database:
    """What the writer writes to: down for the first `down` tries; a text in `refuse` is
    refused with its error."""

    def __init__(self, down: int = 0, refuse: dict[str, StoreError] | None = None) -> None:
        self.down = down
        self.refuse = refuse or {}
        self.logged: list[str] = []
        self.tries = 0

    async def write(self, item: Queued) -> None:
        self.tries += 1
        await anyio.sleep(0)
        if self.down:
            self.down -= 1
            raise DatabaseDown("the database cannot be reached", 0.0)
        error = self.refuse.get(item.message.text)
        if error is not None:
            if isinstance(error, StaleTurn) and item.fence is not None:
                item.fence.lose()
            raise error
        self.logged.append(item.message.text)


def queued(text: str, fence: TurnFence | None = None) -> Queued:
    return Queued(NewMessage("ever", text, key=text), fence, None if fence is None else 1)


async def test_a_message_the_database_could_not_take_keeps_its_place() -> None:
    database = Database(down=2)
    writer = Writer(database.write)
    for text in ("one", "two", "three"):
        writer.put(queued(text))
    await writer.flushed()
    assert database.logged == ["one", "two", "three"]
    assert database.tries == 5


async def test_a_stale_turns_messages_are_dropped_and_its_turn_told() -> None:
    lost: list[bool] = []
    fence = TurnFence(1, lambda: lost.append(True))
    database = Database(refuse={"two": StaleTurn("another machine's turn has begun")})
    writer = Writer(database.write)
    for text in ("one", "two", "three"):
        writer.put(queued(text, fence))
    writer.put(queued("outside any turn"))
    async with anyio.create_task_group() as group:
        group.start_soon(writer.run)
        await writer.flushed()
        group.cancel_scope.cancel()
    assert database.logged == ["one", "outside any turn"]
    assert lost == [True]


async def test_another_failure_is_said_once_to_whoever_waits() -> None:
    database = Database(refuse={"two": StoreError("the disk is full")})
    writer = Writer(database.write)
    for text in ("one", "two", "three"):
        writer.put(queued(text))
    with pytest.raises(StoreError, match="the disk is full"):
        await writer.flushed()
    await writer.flushed()  # said once
    assert database.logged == ["one", "three"]
