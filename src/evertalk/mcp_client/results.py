"""A server's tool result as the model gets it: its texts joined, its images kept as images.

An image is kept when its bytes are a PNG, JPEG, GIF or WebP of at most 5 MB (the providers
refuse others, and the whole request would fail); any other part (audio, a blob, an image the
model cannot take) is named in the text instead, so that the model knows it was there.
"""

from __future__ import annotations

import base64
import binascii
import json

import mcp_types as types

from evertalk.image_files import MAX_IMAGE_BYTES, sniff
from evertalk.providers.base import Image, Text
from evertalk.tool_outcome import ToolOutcome


def outcome_of(result: types.CallToolResult) -> ToolOutcome:
    """The outcome of a call: an error outcome when the server says the tool failed."""
    texts: list[str] = []
    images: list[Image] = []
    for block in result.content:
        text, image = _part(block)
        if text:
            texts.append(text)
        if image is not None:
            images.append(image)
    if not texts and result.structured_content is not None:
        texts.append(json.dumps(result.structured_content, ensure_ascii=False, indent=2))
    content: list[Text | Image] = [Text("\n".join(texts) or "(no output)"), *images]
    return ToolOutcome(content, is_error=result.is_error)


def _part(block: types.ContentBlock) -> tuple[str, Image | None]:
    if isinstance(block, types.TextContent):
        return block.text, None
    if isinstance(block, types.ImageContent):
        image = _image(block.data)
        if image is None:
            return f"[an image ({block.mime_type}) the model cannot take was left out]", None
        return "", image
    if isinstance(block, types.AudioContent):
        return f"[audio ({block.mime_type}) was left out]", None
    if isinstance(block, types.ResourceLink):
        return f"[resource: {block.uri}]", None
    resource = block.resource
    if isinstance(resource, types.TextResourceContents):
        return f"[resource: {resource.uri}]\n{resource.text}", None
    image = _image(resource.blob)
    if image is not None:
        return f"[resource: {resource.uri}]", image
    return f"[resource: {resource.uri} ({resource.mime_type or 'binary'}), left out]", None


def _image(data: str) -> Image | None:
    """An image the model can take, from base64; None for anything else."""
    if len(data) > MAX_IMAGE_BYTES * 4 // 3 + 4:
        return None
    try:
        raw = base64.b64decode(data, validate=True)
    except (binascii.Error, ValueError):
        return None
    media_type = sniff(raw)
    if media_type is None:
        return None
    return Image(media_type, base64.b64encode(raw).decode("ascii"))
