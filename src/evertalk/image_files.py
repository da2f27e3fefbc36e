"""Image files a user attaches (`--image`, `/image`): checked and read, standard library only, so
that a client of the service reads them without loading the agent."""

from __future__ import annotations

import base64
from pathlib import Path
from typing import Final

MAX_IMAGE_BYTES: Final = 5_000_000
"""The largest image file attached: the providers refuse bigger ones (Anthropic's limit is 5 MB
per image), and the whole request would fail."""


class ImageError(ValueError):
    """An attached file that cannot be sent as an image; the text is one line for the user."""


def sniff(data: bytes) -> str | None:
    """The media type of image bytes, from their signature (not the file name, which may lie)."""
    if data.startswith(b"\x89PNG\r\n\x1a\n"):
        return "image/png"
    if data.startswith(b"\xff\xd8\xff"):
        return "image/jpeg"
    if data[:6] in (b"GIF87a", b"GIF89a"):
        return "image/gif"
    if data[:4] == b"RIFF" and data[8:12] == b"WEBP":
        return "image/webp"
    return None


def read_image_file(path: Path) -> tuple[str, str]:
    """The image file at `path` as (media type, base64); ImageError if it is missing, too big
    or not a PNG, JPEG, GIF or WebP image."""
    try:
        size = path.stat().st_size
        if size > MAX_IMAGE_BYTES:
            raise ImageError(f"{path}: {size:,} bytes, more than the {MAX_IMAGE_BYTES:,} allowed")
        data = path.read_bytes()
    except OSError as error:
        raise ImageError(f"{path}: {error.strerror or error}") from None
    media_type = sniff(data)
    if media_type is None:
        raise ImageError(f"{path}: not a PNG, JPEG, GIF or WebP image")
    return media_type, base64.b64encode(data).decode("ascii")
