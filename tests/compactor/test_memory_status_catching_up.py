"""One catching-up figure: `evertalk memory status`, run beside a service, says the chat is
catching up with the same count as the service's status frame (what the app's status bar and a
waiting turn's row show): the summaries still to be built before a turn's view is whole, not
every node the compactor has left.

The service's summary model is a port where nothing listens: its compactor pauses, and no
summary is built while the two are compared, so that the chat's state is the same for both.
`service status` then says the compactor's state in the words of the app's status bar."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import msgspec
import pytest
from test_compact_cli import UNUSED_URL, evertalk, free_message_chat

from evertalk.client.connection import stop_service
from evertalk.protocol.replies import Status
from evertalk.protocol.summaries_text import compactor_part
from service.test_service_socket import wait_until

COUNT = re.compile(r"^catching up: ([\d,]+) summar(?:y|ies) to go", re.MULTILINE)


@pytest.fixture(autouse=True)
def _no_service_left(home: Path) -> Iterator[None]:
    yield
    stop_service(home, "test")


def counted(text: str) -> int:
    found = COUNT.search(text)
    assert found is not None, text
    return int(found[1].replace(",", ""))


def service_status(home: Path) -> dict[str, Any]:
    served = evertalk(home, UNUSED_URL, "service", "status", "--json")
    assert served.returncode == 0, served.stderr
    frame: dict[str, Any] = json.loads(served.stdout)
    return frame


def test_memory_status_counts_what_the_service_counts_as_catching_up(home: Path) -> None:
    free_message_chat(home, 300)  # a view over its ceiling until parents are built
    started = evertalk(home, UNUSED_URL, "serve")
    assert started.returncode == 0, started.stderr
    wait_until(lambda: service_status(home)["compactor_paused"], "the compactor's pause")

    frame = service_status(home)
    behind = frame["catching_up"]
    assert behind is not None and behind["to_go"] > 0

    looked = evertalk(home, UNUSED_URL, "memory", "status", "--json")
    assert looked.returncode == 0, looked.stderr
    data = json.loads(looked.stdout)
    assert data["catch_up"]["to_go"] == behind["to_go"]
    assert data["catch_up"]["behind"] is True
    # the whole backlog is a different figure, under other words
    assert data["unbuilt"] > behind["to_go"]

    text = evertalk(home, UNUSED_URL, "memory", "status")
    assert text.returncode == 0, text.stderr
    assert counted(text.stdout) == behind["to_go"]
    assert f"{data['unbuilt']:,} unbuilt" in text.stdout

    part = compactor_part(msgspec.convert(frame, Status).agent)  # as the command reads it
    assert part == f"summaries paused ({behind['to_go']:,} to go)"
    said = evertalk(home, UNUSED_URL, "service", "status")
    assert f"; no turn runs; {part}; log: " in said.stdout, said.stdout
