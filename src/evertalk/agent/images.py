"""Images in the chat: the store under `chat/images/` (SPEC §1.1), and images the user attaches.

A stored image is named by the SHA-256 of its bytes and an extension that tells its media type,
so a name alone says how to send it again (`zoom(id, 1)` shows a message's images).
"""

from __future__ import annotations

import base64
import binascii
import hashlib
from pathlib import Path
from typing import Final

from evertalk.providers.base import Image
from evertalk.store.secure import make_dir, write_atomic

EXTENSIONS: Final = {
    "image/png": "png",
    "image/jpeg": "jpg",
    "image/gif": "gif",
    "image/webp": "webp",
}
MEDIA_TYPES: Final = {f".{ext}": media for media, ext in EXTENSIONS.items()} | {
    ".jpeg": "image/jpeg"
}

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


def read_image(path: Path) -> Image:
    """The image file at `path`, ready to send; ImageError if it is missing, too big or not a
    PNG, JPEG, GIF or WebP image."""
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
    return Image(media_type, base64.b64encode(data).decode("ascii"))


class ImageStore:
    """`chat/images/<sha256>.<ext>`: one private file per distinct image."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder

    def save(self, image: Image) -> str | None:
        """The image's file name, writing the file if it is new; None for undecodable data."""
        try:
            data = base64.b64decode(image.data, validate=True)
        except (binascii.Error, ValueError):
            return None
        extension = EXTENSIONS.get(image.media_type, "bin")
        name = f"{hashlib.sha256(data).hexdigest()}.{extension}"
        path = self.folder / name
        if not path.exists():
            make_dir(self.folder)
            write_atomic(path, data)
        return name
