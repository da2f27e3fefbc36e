"""A message accepted while the disk is full is logged and answered once the disk takes writes
again, by the service alone: no other client sends anything meanwhile.

The disk is made full at the log's own write (`line_files.writing_with`): the appends of the
message's line fail with ENOSPC a few times, then pass. The held file and the service's probe
write as they always do.
"""

from __future__ import annotations

import errno
import os
from pathlib import Path
from typing import Any

import anyio
import pytest

from evertalk.protocol.events import MemoryWarning, TurnEnded
from evertalk.protocol.replies import Accepted
from evertalk.protocol.requests import Send
from evertalk.store.line_files import writing_with
from fakes import AnthropicFake
from fakes import chat as answer
from tui.tui_support import fake_opener, hosted, log_of, script, workdir_of, write_config

pytestmark = pytest.mark.anyio

QUESTION = "where did the backup go? (typed as the disk filled)"


class FullDisk:
    """The log's appends of `marker` fail with ENOSPC `times` times, then go through."""

    def __init__(self, marker: bytes, times: int) -> None:
        self.marker = marker
        self.left = times

    def __call__(self, fd: int, data: bytes) -> int:
        if self.marker in data and self.left > 0:
            self.left -= 1
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        return os.write(fd, data)


async def test_a_held_message_is_logged_by_itself_once_the_disk_has_room(tmp_path: Path) -> None:
    home = tmp_path / "home"
    write_config(home)
    fake = AnthropicFake(script())
    fake.behaviour.push(answer("it is on the shelf"))  # type: ignore[attr-defined]
    disk = FullDisk(QUESTION.encode(), times=2)
    seen: list[Any] = []
    with writing_with(disk):
        async with hosted(home, fake_opener(home, fake)) as host:
            window = await host.connect()
            done = anyio.Event()

            async def read() -> None:
                async for frame in window.frames():
                    seen.append(frame)
                    if isinstance(frame, TurnEnded) and frame.reason == "done":
                        done.set()

            async with anyio.create_task_group() as group:
                group.start_soon(window.run)
                group.start_soon(read)
                send = Send(text=QUESTION, key="k-1", cwd=str(workdir_of(home)))
                accepted = await window.request(send, Accepted)
                assert accepted.duplicate is False
                with anyio.fail_after(20):  # nothing is sent meanwhile
                    await done.wait()
                await window.aclose()
    assert disk.left == 0  # both failures were met
    ended = [frame.reason for frame in seen if isinstance(frame, TurnEnded)]
    assert ended[0] == "error" and ended[-1] == "done"
    warnings = [frame.text for frame in seen if isinstance(frame, MemoryWarning)]
    assert any("the disk takes writes again" in text for text in warnings)
    said = [(kind, text) for kind, text in log_of(home) if kind in ("user", "ever")]
    assert said == [("user", QUESTION), ("ever", "it is on the shelf")]
    assert not (home / "chat" / "held.jsonl").read_bytes()  # emptied once logged
