"""The file tools through the Toolbox, on real files: read ranges, write, edit (SPEC §6.6)."""

from __future__ import annotations

import os
import stat
from pathlib import Path
from typing import Any

import pytest

from evertalk.agent.policy import DENIED, Policy
from evertalk.agent.tools import Toolbox, ToolContext, ToolOutcome
from evertalk.config import ToolPolicies
from evertalk.memory.text import MESSAGE_LIMIT, clip_output

pytestmark = pytest.mark.anyio

FIVE = "one\ntwo\nthree\nfour\nfive\n"


def granted() -> Toolbox:
    return Toolbox(Policy(ToolPolicies(), granted=["write", "edit"]), None)


async def run(ctx: ToolContext, name: str, tool_input: Any) -> ToolOutcome:
    return await granted().run(name, tool_input, ctx)


def assert_error(outcome: ToolOutcome, *words: str) -> None:
    assert outcome.is_error
    assert "\n" not in outcome.text
    for word in words:
        assert word in outcome.text, outcome.text


# -- read ---------------------------------------------------------------------------------------


async def test_read_is_allowed_headless_by_default(ctx: ToolContext) -> None:
    (ctx.workdir / "f.txt").write_text(FIVE)
    outcome = await Toolbox(Policy(ToolPolicies()), None).run("read", {"path": "f.txt"}, ctx)
    assert outcome.text == FIVE and not outcome.is_error


async def test_read_ranges(ctx: ToolContext) -> None:
    (ctx.workdir / "f.txt").write_text(FIVE)
    cases: list[tuple[dict[str, Any], str]] = [
        ({}, FIVE),
        ({"offset": 0}, FIVE),
        ({"offset": 1, "limit": 2}, "two\nthree\n"),  # offset: lines skipped
        ({"offset": 3}, "four\nfive\n"),
        ({"limit": 1}, "one\n"),  # limit: the most lines
        ({"offset": 4, "limit": 10}, "five\n"),
        ({"limit": 100}, FIVE),
    ]
    for extra, expected in cases:
        outcome = await run(ctx, "read", {"path": "f.txt", **extra})
        assert outcome.text == expected, extra


async def test_read_last_line_without_newline(ctx: ToolContext) -> None:
    (ctx.workdir / "f.txt").write_text("a\nb")
    assert (await run(ctx, "read", {"path": "f.txt", "offset": 1})).text == "b"
    assert_error(await run(ctx, "read", {"path": "f.txt", "offset": 2}), "past the end", "2 lines")


async def test_read_an_absolute_path(ctx: ToolContext, tmp_path: Path) -> None:
    (tmp_path / "abs.txt").write_text("absolute\n")
    assert (await run(ctx, "read", {"path": str(tmp_path / "abs.txt")})).text == "absolute\n"


async def test_read_refusals(ctx: ToolContext) -> None:
    (ctx.workdir / "f.txt").write_text(FIVE)
    (ctx.workdir / "blob").write_bytes(b"PK\x03\x04\x00\x00binary")
    (ctx.workdir / "dir").mkdir()
    (ctx.workdir / "empty").write_text("")
    assert_error(await run(ctx, "read", {"path": "missing.txt"}), "missing.txt", "no such file")
    assert_error(await run(ctx, "read", {"path": "dir"}), "directory")
    assert_error(await run(ctx, "read", {"path": "blob"}), "binary")
    assert_error(await run(ctx, "read", {"path": "f.txt", "offset": 5}), "past the end", "5 lines")
    for bad in (
        {"path": "f.txt", "offset": -1},
        {"path": "f.txt", "limit": 0},
        {"path": "f.txt", "limit": 1.0},
        {"path": "f.txt", "offset": True},
        {"path": ""},
        {"path": 7},
        {},
        {"path": "f.txt", "lines": 3},
    ):
        assert_error(await run(ctx, "read", bad))
    empty = await run(ctx, "read", {"path": "empty"})
    assert not empty.is_error and "empty" in empty.text


async def test_read_replaces_bytes_that_are_not_utf8(ctx: ToolContext) -> None:
    (ctx.workdir / "latin.txt").write_bytes(b"caf\xe9\n")
    assert (await run(ctx, "read", {"path": "latin.txt"})).text == "caf\ufffd\n"


async def test_read_a_large_file_is_clipped(ctx: ToolContext) -> None:
    text = "".join(f"line {i}\n" for i in range(20_000))
    (ctx.workdir / "big.txt").write_text(text)
    outcome = await run(ctx, "read", {"path": "big.txt"})
    assert outcome.text == clip_output(text, MESSAGE_LIMIT - len("read: "))
    assert outcome.log_text("read") == f"read: {outcome.text}"
    part = await run(ctx, "read", {"path": "big.txt", "offset": 100, "limit": 3})
    assert part.text == "line 100\nline 101\nline 102\n"


# -- write --------------------------------------------------------------------------------------


async def test_write_creates_folders_and_says_what_it_wrote(ctx: ToolContext) -> None:
    outcome = await run(ctx, "write", {"path": "a/b/c.txt", "content": "héllo\nworld"})
    assert not outcome.is_error
    assert outcome.text == "created a/b/c.txt (12 bytes, 2 lines)"
    assert (ctx.workdir / "a" / "b" / "c.txt").read_text() == "héllo\nworld"
    again = await run(ctx, "write", {"path": "a/b/c.txt", "content": ""})
    assert again.text == "replaced a/b/c.txt (0 bytes, 0 lines)"
    assert (ctx.workdir / "a" / "b" / "c.txt").read_bytes() == b""


async def test_write_keeps_the_mode_and_leaves_no_temporary_file(ctx: ToolContext) -> None:
    script = ctx.workdir / "run.sh"
    script.write_text("echo old\n")
    script.chmod(0o751)
    await run(ctx, "write", {"path": "run.sh", "content": "echo new\n"})
    assert script.read_text() == "echo new\n"
    assert stat.S_IMODE(script.stat().st_mode) == 0o751
    assert sorted(p.name for p in ctx.workdir.iterdir()) == ["run.sh"]


async def test_write_through_a_symlink_keeps_the_link(ctx: ToolContext) -> None:
    target = ctx.workdir / "real.txt"
    target.write_text("old")
    (ctx.workdir / "link.txt").symlink_to("real.txt")
    await run(ctx, "write", {"path": "link.txt", "content": "new"})
    assert (ctx.workdir / "link.txt").is_symlink()
    assert target.read_text() == "new"


async def test_write_refusals(ctx: ToolContext) -> None:
    (ctx.workdir / "dir").mkdir()
    (ctx.workdir / "file").write_text("x")
    assert_error(await run(ctx, "write", {"path": "dir", "content": "x"}), "directory")
    assert_error(await run(ctx, "write", {"path": "file/inner", "content": "x"}))
    assert_error(await run(ctx, "write", {"path": "x"}), "content")
    assert_error(await run(ctx, "write", {"path": "x", "content": 3}), "string")


async def test_write_and_edit_never_run_headless_without_permission(ctx: ToolContext) -> None:
    (ctx.workdir / "f.txt").write_text("keep\n")
    toolbox = Toolbox(Policy(ToolPolicies(shell="allow")), None)
    wrote = await toolbox.run("write", {"path": "new.txt", "content": "x"}, ctx)
    edited = await toolbox.run("edit", {"path": "f.txt", "old": "keep", "new": "lose"}, ctx)
    for outcome in (wrote, edited):
        assert outcome.is_error and outcome.text.startswith(DENIED)
    assert not (ctx.workdir / "new.txt").exists()
    assert (ctx.workdir / "f.txt").read_text() == "keep\n"


# -- edit ---------------------------------------------------------------------------------------


async def test_edit_replaces_the_one_occurrence(ctx: ToolContext) -> None:
    (ctx.workdir / "f.txt").write_text(FIVE)
    outcome = await run(ctx, "edit", {"path": "f.txt", "old": "three\n", "new": "3\n"})
    assert not outcome.is_error
    assert outcome.text == "edited f.txt: replaced the one occurrence, at line 3"
    assert (ctx.workdir / "f.txt").read_text() == "one\ntwo\n3\nfour\nfive\n"


async def test_edit_none_or_several_is_an_error_and_changes_nothing(ctx: ToolContext) -> None:
    text = "x = 1\ny = 1\nz = 1\n"
    path = ctx.workdir / "f.py"
    path.write_text(text)
    assert_error(
        await run(ctx, "edit", {"path": "f.py", "old": "w = 1", "new": "w = 2"}), "does not occur"
    )
    assert_error(
        await run(ctx, "edit", {"path": "f.py", "old": " = 1", "new": " = 2"}),
        "occurs 3 times",
        "lines 1, 2, 3",
    )
    path.write_text("aaa")
    assert_error(await run(ctx, "edit", {"path": "f.py", "old": "aa", "new": "b"}), "2 times")
    assert path.read_text() == "aaa"


async def test_edit_refusals(ctx: ToolContext) -> None:
    (ctx.workdir / "f.txt").write_text(FIVE)
    (ctx.workdir / "blob").write_bytes(b"a\x00b")
    assert_error(await run(ctx, "edit", {"path": "gone", "old": "a", "new": "b"}), "no such")
    assert_error(await run(ctx, "edit", {"path": "blob", "old": "a", "new": "b"}), "binary")
    assert_error(await run(ctx, "edit", {"path": "f.txt", "old": "", "new": "b"}), "empty")
    assert_error(await run(ctx, "edit", {"path": "f.txt", "old": "one", "new": "one"}), "same")
    assert_error(await run(ctx, "edit", {"path": "f.txt", "old": "one"}), "new")
    assert (ctx.workdir / "f.txt").read_text() == FIVE


async def test_edit_crlf_hint(ctx: ToolContext) -> None:
    (ctx.workdir / "w.txt").write_bytes(b"a\r\nb\r\n")
    assert_error(await run(ctx, "edit", {"path": "w.txt", "old": "a\nb", "new": "c"}), "\\r\\n")


async def test_edit_keeps_mode_and_foreign_bytes(ctx: ToolContext) -> None:
    path = ctx.workdir / "tool.sh"
    path.write_bytes(b"#!/bin/sh\n# caf\xe9\necho old\n")
    os.chmod(path, 0o700)
    outcome = await run(ctx, "edit", {"path": "tool.sh", "old": "old", "new": "new"})
    assert not outcome.is_error
    assert path.read_bytes() == b"#!/bin/sh\n# caf\xe9\necho new\n"
    assert stat.S_IMODE(path.stat().st_mode) == 0o700
    assert sorted(p.name for p in ctx.workdir.iterdir()) == ["tool.sh"]
