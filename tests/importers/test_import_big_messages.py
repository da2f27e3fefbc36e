"""A message bigger than a piece (4 MiB on the wire) goes in pieces, whole pages each, as the
chat splits a long text (SPEC §1.6), so that none passes a frame of the service's protocol
(32 MiB); one whose images alone pass a frame, or over the longest an import takes, is left out
and said. Through the command line and the real service."""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime
from pathlib import Path

from evertalk.chat import Chat
from evertalk.importers import Imported
from evertalk.importers.common import MAX_MESSAGE_CHARS
from evertalk.importers.pieces import PIECE_BYTES, sendable, wire_size
from evertalk.memory.text import MESSAGE_LIMIT, split_text
from evertalk.protocol.wire import MAX_FRAME
from service.test_service_socket import fake, home, run

__all__ = ["fake", "home"]  # the fixtures, used by name

WHEN = "2024-03-01T09:00:00+00:00"


def texts_of(home: Path) -> list[tuple[str, str]]:
    with Chat.open(home / "chat", readonly=True) as chat:
        return [
            (record.kind, record.text)
            for record in (chat.store.read_message(i) for i in range(chat.t))
        ]


def test_a_message_over_a_piece_is_imported_whole_and_once(home: Path, tmp_path: Path) -> None:
    big = ("a line of a very long paste, " * 3 + "\n") * (MAX_MESSAGE_CHARS // 88 - 1000)
    assert len(big.encode()) > PIECE_BYTES and len(big) <= MAX_MESSAGE_CHARS
    source = tmp_path / "paste.jsonl"
    lines = [
        {"role": "user", "text": "before", "time": WHEN, "id": 1},
        {"role": "user", "text": big, "time": WHEN, "id": 2},
        {"role": "user", "text": "z" * (MAX_MESSAGE_CHARS + 1), "time": WHEN, "id": 4},
        {"role": "assistant", "text": "after", "time": WHEN, "id": 3},
    ]
    source.write_text("".join(json.dumps(line) + "\n" for line in lines))
    first = run(home, "import", str(source), "--yes", timeout=300)
    assert first.returncode == 0, first.stderr[-2000:]
    assert "Traceback" not in first.stderr
    assert "messages     4" in first.stdout  # before, the big one's two pieces, after
    assert "over the 8,000,000 an import takes; left out" in first.stdout
    # the progress counts messages, as the preview does, not the pages the log makes of them
    counts = re.findall(r"\] (\d+)/(\d+) messages", first.stderr)
    assert counts and counts[-1] == ("4", "4"), first.stderr
    assert "imported 4 messages (0 were already in the chat)" in first.stdout
    log = texts_of(home)
    assert log[0] == ("user", "before") and log[-1] == ("ever", "after")
    middle = log[1:-1]
    assert {kind for kind, _ in middle} == {"user"}
    assert "".join(text for _, text in middle) == big
    assert [text for _, text in middle] == split_text(big)  # the pages the chat would make
    again = run(home, "import", str(source), "--yes", timeout=300)
    assert again.returncode == 0, again.stderr[-2000:]
    assert "imported 0 messages" in again.stdout
    assert len(texts_of(home)) == len(log)


def message(text: str, images: tuple[tuple[str, str], ...] = ()) -> Imported:
    return Imported(
        "user", text, datetime(2024, 3, 1, tzinfo=UTC), "jsonl:x:1", "jsonl x:1", images
    )


def test_pieces_fit_a_frame_whatever_the_text_costs_to_encode() -> None:
    # control characters take six bytes each on the wire
    text = ("\x01" * 1000 + "\n") * (PIECE_BYTES // 5000 * 3)
    pieces, problems = sendable([message(text)])
    assert problems == [] and len(pieces) > 1
    assert "".join(p.text for p in pieces) == text
    assert all(wire_size(p.text) <= PIECE_BYTES for p in pieces)
    assert len({p.key for p in pieces}) == len(pieces)
    assert all(len(page) <= MESSAGE_LIMIT for p in pieces for page in split_text(p.text))


def test_a_message_whose_images_pass_a_frame_is_left_out_and_said() -> None:
    data = "A" * (MAX_FRAME // 3)
    heavy = message("look", (("image/png", data),) * 4)
    light = message("fine", (("image/png", "AAAA"),))
    pieces, problems = sendable([heavy, light])
    assert [p.text for p in pieces] == ["fine"]
    (problem,) = problems
    assert problem.file == "jsonl x:1" and "left out" in problem.why
