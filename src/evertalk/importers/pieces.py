"""Messages cut to what one request to the service can carry.

A frame of the service's protocol is at most 32 MiB, and an imported message can be longer (a
paste of a whole log, a tool result kept whole). Such a message goes as several messages of its
kind, each made of whole pages as the log splits a long text (SPEC §1.6), so that the log holds
the same pages it would have written for the whole text. A message whose images alone would not
fit a frame cannot go at all: it is left out and named.
"""

from __future__ import annotations

import json
from dataclasses import replace
from typing import Final

from evertalk.importers.common import byte_size
from evertalk.importers.model import Imported, Problem
from evertalk.memory.text import split_text, valid_unicode
from evertalk.protocol.wire import MAX_FRAME

PIECE_BYTES: Final = 4 * 1024 * 1024
"""The most text, as encoded on the wire, of one message sent."""
IMAGES_BYTES: Final = MAX_FRAME - 2 * PIECE_BYTES
"""The most image data (base64) of one message: its first piece and the frame's own fields
must fit beside it."""
_ESCAPED_MOST: Final = 6  # wire bytes of one character at worst (`\u0001`)


def sendable(messages: list[Imported]) -> tuple[list[Imported], list[Problem]]:
    """The messages, each long one as its pieces in order, and the problems of those left out."""
    sent: list[Imported] = []
    problems: list[Problem] = []
    for message in messages:
        images = sum(len(data) for _, data in message.images)
        if images > IMAGES_BYTES:
            problems.append(
                Problem(
                    message.source,
                    f"a message with {byte_size(images)} of images, over the "
                    f"{byte_size(IMAGES_BYTES)} one message can carry; left out",
                )
            )
        elif len(message.text) * _ESCAPED_MOST <= PIECE_BYTES:
            sent.append(message)
        else:
            sent += pieces(message)
    return sent, problems


def pieces(message: Imported) -> list[Imported]:
    """The message as consecutive messages of whole pages, each at most PIECE_BYTES on the wire;
    the first keeps the images, and each has a key of its own (the key and its number)."""
    if wire_size(message.text) <= PIECE_BYTES:
        return [message]
    groups: list[list[str]] = [[]]
    size = 0
    for page in split_text(valid_unicode(message.text)):
        weight = wire_size(page)
        if groups[-1] and size + weight > PIECE_BYTES:
            groups.append([])
            size = 0
        groups[-1].append(page)
        size += weight
    found: list[Imported] = []
    for number, group in enumerate(groups):
        text = "".join(group)
        if text.strip():  # white space alone is no message the log takes
            images = message.images if not found else ()
            found.append(replace(message, text=text, key=f"{message.key}+{number}", images=images))
    return found


def wire_size(text: str) -> int:
    """The bytes of `text` as a JSON string in a frame, quotes left out."""
    encoded = json.dumps(text, ensure_ascii=False).encode("utf-8", "surrogatepass")
    return len(encoded) - 2
