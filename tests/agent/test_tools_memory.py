"""The memory tools through the Toolbox, on a real chat: exact validation and outputs (§6.5)."""

from __future__ import annotations

import base64
import hashlib
import re
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pytest

from evertalk.agent.policy import Policy
from evertalk.agent.tools import Toolbox, ToolContext, ToolOutcome
from evertalk.agent.tools.memory import AGENT_PAGE
from evertalk.chat import Chat
from evertalk.config import ToolPolicies
from evertalk.memory.text import MESSAGE_LIMIT
from evertalk.providers.base import Image, Text
from evertalk.store.records import encode_message

pytestmark = pytest.mark.anyio

NEXT = re.compile(r'zoom\(name="([^"]+)", id=(\d+)\)')

PNG = base64.b64decode(
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg=="
)


def headless() -> Toolbox:
    """No grants, no asker: the memory tools must run anyway."""
    return Toolbox(Policy(ToolPolicies(), interactive=False), None)


async def call(ctx: ToolContext, name: str, tool_input: Any) -> ToolOutcome:
    return await headless().run(name, tool_input, ctx)


def assert_refused(outcome: ToolOutcome) -> None:
    assert outcome.is_error
    assert outcome.text and "\n" not in outcome.text
    assert outcome.content == [Text(outcome.text)]


# -- zoom(id, n) --------------------------------------------------------------------------------


async def test_every_refusal_of_the_spec_and_more(chat: Chat, ctx: ToolContext) -> None:
    for i in range(4):
        chat.append("user", f"m{i}")
    t = chat.t
    assert t == 4
    refused: list[Any] = [
        {"id": 1, "n": 2},  # id not a multiple of n
        {"id": 0, "n": 3},  # n not a power of 2
        {"id": t, "n": 1},  # past the end
        {"id": 0, "n": 2 * t},  # past the end
        {"id": 0, "n": 0},
        {"id": -1, "n": 1},
        {"id": -2, "n": 2},
        {"id": True, "n": 1},  # booleans
        {"id": 0, "n": True},
        {"id": False, "n": 1},
        {"id": 0.0, "n": 1},  # floats, even whole ones
        {"id": 0, "n": 1.0},
        {"id": 1.5, "n": 1},
        {"id": "0", "n": 1},  # strings
        {"id": 0, "n": "1"},
        {"id": [0], "n": 1},
        {"id": 0, "n": 1, "name": "Scout"},  # both forms
        {"n": 1, "name": "Scout"},
        {},  # neither
        {"id": 0},  # half of one form
        {"n": 1},
        {"id": 0, "n": 1, "extra": 1},  # an argument that does not exist
        "0+1",  # not an object at all
    ]
    for tool_input in refused:
        assert_refused(await call(ctx, "zoom", tool_input))
    assert chat.t == t  # nothing was logged by refusals


async def test_refusals_say_what_is_wrong(chat: Chat, ctx: ToolContext) -> None:
    for i in range(4):
        chat.append("user", f"m{i}")
    assert "power of 2" in (await call(ctx, "zoom", {"id": 0, "n": 3})).text
    assert "multiple" in (await call(ctx, "zoom", {"id": 1, "n": 2})).text
    assert "4 messages" in (await call(ctx, "zoom", {"id": 4, "n": 1})).text
    assert "boolean" in (await call(ctx, "zoom", {"id": True, "n": 1})).text
    assert "float" in (await call(ctx, "zoom", {"id": 0, "n": 1.0})).text
    assert "string" in (await call(ctx, "zoom", {"id": "0", "n": 1})).text
    assert "not both" in (await call(ctx, "zoom", {"id": 0, "n": 1, "name": "X"})).text


async def test_zoom_into_a_pair_and_a_message(chat: Chat, ctx: ToolContext) -> None:
    chat.append("user", "first\nline two")
    chat.append("ever", "second")
    pair = await call(ctx, "zoom", {"id": 0, "n": 2})
    assert not pair.is_error
    # short messages are free nodes: their line is their input, newlines as spaces
    assert pair.text == "0+1|user: first line two\n1+1|ever: second"
    one = await call(ctx, "zoom", {"id": 0, "n": 1})
    assert one.text == "0+1|user: first\nline two"  # whole, newlines kept
    assert one.content == [Text(one.text)]
    assert one.image_names == ()


async def test_zoom_a_null_optional_argument_counts_as_absent(chat: Chat, ctx: ToolContext) -> None:
    chat.append("user", "hello")
    outcome = await call(ctx, "zoom", {"id": 0, "n": 1, "name": None})
    assert outcome.text == "0+1|user: hello"


async def test_zoom_into_a_message_with_an_image(chat: Chat, ctx: ToolContext) -> None:
    name = hashlib.sha256(PNG).hexdigest() + ".png"
    images = chat.store.path / "images"
    images.mkdir()
    (images / name).write_bytes(PNG)
    chat.append("user", "what is in this picture?", images=[name])
    outcome = await call(ctx, "zoom", {"id": 0, "n": 1})
    assert not outcome.is_error
    assert outcome.content == [
        Text("0+1|user: what is in this picture?"),
        Image("image/png", base64.b64encode(PNG).decode("ascii")),
    ]
    assert outcome.image_names == (name,)
    assert outcome.text == "0+1|user: what is in this picture?"


async def test_a_missing_image_is_said_not_raised(chat: Chat, ctx: ToolContext) -> None:
    chat.append("user", "see", images=["gone.png", "../../etc/passwd.png"])
    outcome = await call(ctx, "zoom", {"id": 0, "n": 1})
    assert not outcome.is_error
    assert outcome.images == []
    lines = outcome.text.split("\n")
    assert lines[0] == "0+1|user: see"
    assert "gone.png" in lines[1] and "cannot be shown" in lines[1]
    assert "cannot be shown" in lines[2]


async def test_a_whole_page_is_returned_whole(chat: Chat, ctx: ToolContext) -> None:
    page = "x" * MESSAGE_LIMIT
    chat.append("user", page)
    outcome = await call(ctx, "zoom", {"id": 0, "n": 1})
    assert outcome.text == f"0+1|user: {page}"  # the model reads it whole
    logged = outcome.log_text("zoom")
    assert len(logged) <= MESSAGE_LIMIT and "characters cut" in logged  # the log clips its copy


# -- date ---------------------------------------------------------------------------------------


async def test_date(chat: Chat, ctx: ToolContext) -> None:
    moment = datetime(2026, 10, 8, 14, 3, 22, tzinfo=timezone(timedelta(hours=2)))
    chat.append("user", "hello", date=moment)
    outcome = await call(ctx, "date", {"id": 0})
    assert not outcome.is_error
    local = moment.astimezone()
    offset = local.strftime("%z")
    assert outcome.text == local.strftime("%Y-%m-%d %A %H:%M:%S ") + f"{offset[:3]}:{offset[3:]}"
    for bad in ({"id": 1}, {"id": -1}, {"id": True}, {"id": 0.0}, {"id": "0"}, {}, {"n": 0}):
        assert_refused(await call(ctx, "date", bad))


# -- zoom(name, id?) ----------------------------------------------------------------------------


def write_agent_log(folder: Path, records: dict[str, list[tuple[int, str, str]]]) -> None:
    folder.mkdir(parents=True)
    for day, entries in records.items():
        lines = [
            encode_message(i, kind, text, f"{day}T10:00:00+00:00").decode() + "\n"
            for i, kind, text in entries
        ]
        (folder / f"{day}.jsonl").write_text("".join(lines), encoding="utf-8")


def read_all_pages(pages: list[str]) -> list[str]:
    """The message lines of consecutive pages, without their closing lines."""
    out: list[str] = []
    for page in pages:
        lines = page.split("\n")
        if lines[-1].startswith("["):
            lines.pop()
        out.extend(lines)
    return out


async def page_through(ctx: ToolContext, name: str) -> list[str]:
    pages: list[str] = []
    tool_input: dict[str, Any] = {"name": name}
    while True:
        outcome = await call(ctx, "zoom", tool_input)
        assert not outcome.is_error, outcome.text
        pages.append(outcome.text)
        last = outcome.text.rsplit("\n", 1)[-1]
        if not last.startswith("["):
            return pages
        found = NEXT.search(last)
        assert found is not None
        tool_input = {"name": found.group(1), "id": int(found.group(2))}


async def test_zoom_name_pages_across_the_limit(ctx: ToolContext) -> None:
    texts = [f"{i}:" + "a" * 9_000 for i in range(7)]
    texts[4] = "line one\nline two"
    # ids 3.. in an earlier-named file: the order comes from the ids, never the file names
    write_agent_log(
        ctx.agents_dir / "Scout",
        {
            "2026-01-02": [(i, "ever", texts[i]) for i in range(3)],
            "2026-01-01": [(i, "tool" if i % 2 else "echo", texts[i]) for i in range(3, 7)],
        },
    )
    pages = await page_through(ctx, "Scout")
    assert len(pages) > 1
    for page in pages:
        assert len(page) <= AGENT_PAGE
        assert len(f"zoom: {page}") <= MESSAGE_LIMIT  # the log keeps it unclipped
    first = pages[0].split("\n")
    assert first[-1] == '[4 more messages remain: zoom(name="Scout", id=3) reads on]'
    assert first[:3] == [f"{i}|ever: {texts[i]}" for i in range(3)]
    kinds = {3: "tool", 4: "echo", 5: "tool", 6: "echo"}
    expected = [f"{i}|ever: {texts[i]}" for i in range(3)] + [
        f"{i}|{kinds[i]}: {texts[i]}" for i in range(3, 7)
    ]
    joined = "\n".join(read_all_pages(pages))
    assert joined == "\n".join(expected)  # each message whole, once, in order


async def test_zoom_name_gives_at_least_one_huge_message(ctx: ToolContext) -> None:
    huge = "h" * 40_000
    write_agent_log(
        ctx.agents_dir / "Big",
        {"2026-01-01": [(0, "ever", "short"), (1, "echo", huge), (2, "ever", "tail")]},
    )
    first = await call(ctx, "zoom", {"name": "Big"})
    assert first.text == '0|ever: short\n[2 more messages remain: zoom(name="Big", id=1) reads on]'
    second = await call(ctx, "zoom", {"name": "Big", "id": 1})
    assert second.text == (
        f'1|echo: {huge}\n[1 more message remains: zoom(name="Big", id=2) reads on]'
    )
    third = await call(ctx, "zoom", {"name": "Big", "id": 2})
    assert third.text == "2|ever: tail"


async def test_zoom_name_refusals(ctx: ToolContext) -> None:
    write_agent_log(ctx.agents_dir / "Scout", {"2026-01-01": [(0, "ever", "a"), (1, "ever", "b")]})
    (ctx.agents_dir / "Empty").mkdir()
    assert_refused(await call(ctx, "zoom", {"name": "Nobody"}))
    assert_refused(await call(ctx, "zoom", {"name": "../Scout"}))
    assert_refused(await call(ctx, "zoom", {"name": ""}))
    assert_refused(await call(ctx, "zoom", {"name": 3}))
    assert_refused(await call(ctx, "zoom", {"name": "Scout", "id": 2}))
    assert_refused(await call(ctx, "zoom", {"name": "Scout", "id": -1}))
    assert_refused(await call(ctx, "zoom", {"name": "Scout", "id": True}))
    assert_refused(await call(ctx, "zoom", {"name": "Scout", "id": 1.0}))
    assert_refused(await call(ctx, "zoom", {"name": "Empty", "id": 1}))
    assert (await call(ctx, "zoom", {"name": "Scout", "id": 1})).text == "1|ever: b"
    assert (await call(ctx, "zoom", {"name": "scout", "id": 1})).text == "1|ever: b"
    empty = await call(ctx, "zoom", {"name": "Empty"})
    assert not empty.is_error and "no messages yet" in empty.text


async def test_zoom_name_skips_a_torn_line(ctx: ToolContext) -> None:
    write_agent_log(ctx.agents_dir / "Scout", {"2026-01-01": [(0, "ever", "kept")]})
    with open(ctx.agents_dir / "Scout" / "2026-01-01.jsonl", "a", encoding="utf-8") as file:
        file.write('{"i": 1, "kind": "ever", "te')
    assert (await call(ctx, "zoom", {"name": "Scout"})).text == "0|ever: kept"


async def test_unknown_tool_is_an_error_outcome(ctx: ToolContext) -> None:
    assert_refused(await call(ctx, "zoom_out", {}))
