"""A served browse page over a small chat, in this process, for the browse tests."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from browse.browse_chat import make_chat
from evertalk.browse.data import ChatData
from evertalk.browse.server import BrowseServer


@dataclass
class Served:
    server: BrowseServer
    chat_dir: Path
    image: str

    @property
    def url(self) -> str:
        return self.server.url


@pytest.fixture
def served(tmp_path: Path) -> Iterator[Served]:
    chat_dir = tmp_path / "home" / "chat"
    image = make_chat(chat_dir)
    data = ChatData(chat_dir, check_seconds=0)
    server = BrowseServer(data, tmp_path / "home" / "usage.jsonl")
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield Served(server, chat_dir, image)
    server.shutdown()
    server.server_close()
    thread.join()
    data.close()
