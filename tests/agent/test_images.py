"""Images: attached by the user (read, checked, sent after the message, SPEC §6.2), stored once
under chat/images/ (§1.1), and shown again by zoom(id, 1)."""

from __future__ import annotations

import base64
import hashlib
from pathlib import Path

import pytest
from test_turn_support import collect_turn, opened, records_of, script, turn_bodies

from evertalk.agent.images import MAX_IMAGE_BYTES, ImageError, ImageStore, read_image, sniff
from evertalk.protocol.events import AgentEvent, ToolStarted
from evertalk.providers.base import Image
from fakes import AnthropicFake, ToolCall, reply
from fakes import chat as answer

PNG = b"\x89PNG\r\n\x1a\n" + b"\x00" * 40
SIGNATURES = {
    "image/png": PNG,
    "image/jpeg": b"\xff\xd8\xff\xe0" + b"\x00" * 20,
    "image/gif": b"GIF89a" + b"\x00" * 20,
    "image/webp": b"RIFF\x10\x00\x00\x00WEBPVP8 " + b"\x00" * 20,
}


@pytest.mark.parametrize("media_type", sorted(SIGNATURES))
def test_the_media_type_comes_from_the_bytes(media_type: str, tmp_path: Path) -> None:
    path = tmp_path / "picture.txt"  # the name does not decide
    path.write_bytes(SIGNATURES[media_type])
    assert sniff(SIGNATURES[media_type]) == media_type
    image = read_image(path)
    assert image.media_type == media_type
    assert base64.b64decode(image.data) == SIGNATURES[media_type]


def test_files_that_are_not_images_are_one_line_errors(tmp_path: Path) -> None:
    text, big = tmp_path / "notes.png", tmp_path / "big.png"
    text.write_text("just text")
    big.write_bytes(PNG + b"\x00" * MAX_IMAGE_BYTES)
    for path, words in (
        (tmp_path / "missing.png", "No such file"),
        (text, "not a PNG, JPEG, GIF or WebP image"),
        (big, "more than the 5,000,000 allowed"),
        (tmp_path, "Is a directory"),
    ):
        with pytest.raises(ImageError) as raised:
            read_image(path)
        assert words in str(raised.value) and "\n" not in str(raised.value)


def test_images_are_stored_once_and_privately(tmp_path: Path) -> None:
    store = ImageStore(tmp_path / "chat" / "images")
    image = Image("image/png", base64.b64encode(PNG).decode())
    name = store.save(image)
    assert name == hashlib.sha256(PNG).hexdigest() + ".png"
    assert store.save(image) == name
    path = tmp_path / "chat" / "images" / name
    assert path.read_bytes() == PNG and path.stat().st_mode & 0o777 == 0o600
    assert store.save(Image("image/png", "not base64!")) is None


def _image_blocks(content: list[dict[str, object]]) -> list[dict[str, object]]:
    return [block for block in content if block["type"] == "image"]


@pytest.mark.anyio
async def test_an_attached_image_follows_the_message_and_is_logged(home: Path) -> None:
    image = Image("image/png", base64.b64encode(PNG).decode())
    fake = AnthropicFake(
        script().push(reply("Let me look again.", ToolCall("zoom", {"id": 0, "n": 1})), answer("A"))
    )
    async with opened(home, fake) as agent:
        agent.submit("what is in this picture?", [image])
        await collect_turn(agent)
    first, second = turn_bodies(fake)
    opening = first["messages"][0]["content"]
    assert opening[-1]["type"] == "image"  # after the header and the message (SPEC §6.2)
    assert opening[-2]["text"].endswith("what is in this picture?")
    assert opening[-1]["source"]["data"] == image.data
    name = hashlib.sha256(PNG).hexdigest() + ".png"
    assert records_of(home)[0]["images"] == [name]
    assert (home / "chat" / "images" / name).read_bytes() == PNG
    # zoom(0, 1) shows the message whole, with its image
    result = second["messages"][-1]["content"][0]
    assert result["type"] == "tool_result"
    assert [block["source"]["data"] for block in _image_blocks(result["content"])] == [image.data]


@pytest.mark.anyio
async def test_an_image_sent_during_a_turn_reaches_it_with_its_message(home: Path) -> None:
    image = Image("image/png", base64.b64encode(PNG).decode())
    fake = AnthropicFake(
        script().push(
            reply(ToolCall("shell", {"command": "sleep 0.3"})),
            answer("Seen."),
        )
    )
    async with opened(home, fake, granted=["shell"]) as agent:

        def on(event: AgentEvent) -> None:
            if isinstance(event, ToolStarted):
                agent.submit("and this one", [image])

        agent.submit("first")
        await collect_turn(agent, on=on)
    last = turn_bodies(fake)[1]["messages"][-1]["content"]
    assert [block["type"] for block in last] == ["tool_result", "text", "image"]
    assert last[1]["text"] == "and this one" and last[2]["source"]["data"] == image.data
    held = [record for record in records_of(home) if record["text"] == "and this one"]
    assert [record["images"] for record in held] == [[hashlib.sha256(PNG).hexdigest() + ".png"]]
