"""A small chat with a tree for the browse tests: messages of every kind (a tool call, its
result, an image, a message written as HTML), summaries built for all but the last few."""

from __future__ import annotations

import base64
import random
import struct
import zlib
from pathlib import Path

from evertalk.agent.images import ImageStore
from evertalk.chat import Chat
from evertalk.memory import Budget, node_name
from evertalk.providers.base import Image

WORDS = ["backup", "rsync", "cron", "nightly", "notes", "log", "rotate", "disk", "quota", "deploy"]
HOSTILE = '<img src=x onerror="document.body.dataset.owned=1"><b>bold?</b>'


def tiny_png() -> bytes:
    """A 2×2 red PNG, made here so the tests need no image file."""

    def chunk(kind: bytes, body: bytes) -> bytes:
        crc = zlib.crc32(kind + body) & 0xFFFFFFFF
        return struct.pack(">I", len(body)) + kind + body + struct.pack(">I", crc)

    rows = b"".join(b"\x00" + b"\xff\x00\x00" * 2 for _ in range(2))
    header = struct.pack(">IIBBBBB", 2, 2, 8, 2, 0, 0, 0)
    return (
        b"\x89PNG\r\n\x1a\n"
        + chunk(b"IHDR", header)
        + chunk(b"IDAT", zlib.compress(rows))
        + chunk(b"IEND", b"")
    )


def make_chat(chat_dir: Path, count: int = 60, unbuilt: int = 3, seed: int = 1) -> str:
    """Write the chat; returns the image's name. Small budgets, so the view has merged lines."""
    rng = random.Random(seed)
    image = ImageStore(chat_dir / "images")
    with Chat.open(chat_dir, budget=Budget(3000, 1500, 1200, 600)) as chat:
        name = image.save(Image("image/png", base64.b64encode(tiny_png()).decode()))
        assert name is not None
        for k in range(count):
            kind = ("user", "ever", "tool", "echo")[k % 4]
            if k == 1:
                text, images = "here is the screenshot", [name]
            elif k == 2:
                text, images = 'shell {"command": "ls -la ~/notes"}', None
            elif k == 5:
                text, images = HOSTILE, None
            else:
                words = rng.choices(WORDS, k=rng.choice((5, 90, 160)))
                text, images = f"m{k} " + " ".join(words), None
            chat.append(kind, text, images=images)
            if k < count - unbuilt:
                while ready := chat.core.ready():
                    for node in ready:
                        line = f"summary of {node_name(node)}: " + " ".join(
                            rng.choices(WORDS, k=20)
                        )
                        chat.build(node, line)
    return name
