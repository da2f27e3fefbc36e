"""Images in the chat: the store under `chat/images/` (SPEC §1.1), and images the user attaches.

A stored image is named by the SHA-256 of its bytes and an extension that tells its media type,
so a name alone says how to send it again (`zoom(id, 1)` shows a message's images).
"""

from __future__ import annotations

import base64
import binascii
import hashlib
from collections.abc import Sequence
from pathlib import Path
from typing import Final

from evertalk.image_files import MAX_IMAGE_BYTES as MAX_IMAGE_BYTES
from evertalk.image_files import ImageError as ImageError
from evertalk.image_files import read_image_file
from evertalk.image_files import sniff as sniff
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


def read_image(path: Path) -> Image:
    """The image file at `path`, ready to send; ImageError if it is missing, too big or not a
    PNG, JPEG, GIF or WebP image."""
    return Image(*read_image_file(path))


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

    def save_all(self, images: Sequence[Image]) -> list[str] | None:
        """The stored names of a message's images, for its record; None without any."""
        names = [name for name in map(self.save, images) if name]
        return names or None
