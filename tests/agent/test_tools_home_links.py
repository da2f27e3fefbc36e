"""No file tool reaches evertalk's home by a hard link (issue 34): `ln $EVERTALK_HOME/usage.jsonl
homelink` in the working folder, then `read homelink`, gave the ledger. A file that is the same
file as one in the home is refused by read, write and edit; other hard links work as before."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from evertalk.agent.policy import Policy
from evertalk.agent.tools import Toolbox, ToolContext, ToolOutcome
from evertalk.config import ToolPolicies

pytestmark = pytest.mark.anyio

LEDGER = '{"model": "m", "cost": 1.0}\n'


@pytest.fixture
def home(tmp_path: Path, ctx: ToolContext) -> Path:
    """evertalk's home, known to the tools, with a ledger and a chat log deeper in."""
    folder = tmp_path / "evhome"
    (folder / "chat").mkdir(parents=True)
    (folder / "usage.jsonl").write_text(LEDGER)
    (folder / "chat" / "log.jsonl").write_text('{"text": "a secret"}\n')
    (folder / "config.toml").write_text('api_key = "sk-secret-secret"\n')
    ctx.home = folder
    return folder


async def run(ctx: ToolContext, name: str, tool_input: dict[str, Any]) -> ToolOutcome:
    toolbox = Toolbox(Policy(ToolPolicies(write="allow", edit="allow")), None)
    return await toolbox.run(name, tool_input, ctx)


def assert_refused(outcome: ToolOutcome, *words: str) -> None:
    assert outcome.is_error and "\n" not in outcome.text, outcome.text
    for word in words:
        assert word in outcome.text, outcome.text


@pytest.mark.parametrize("inside", ["usage.jsonl", "chat/log.jsonl", "config.toml"])
async def test_a_hard_link_into_the_home_is_refused(
    ctx: ToolContext, home: Path, inside: str
) -> None:
    original = (home / inside).read_bytes()
    link = ctx.workdir / "homelink"
    os.link(home / inside, link)
    calls: list[tuple[str, dict[str, Any]]] = [
        ("read", {"path": "homelink"}),
        ("edit", {"path": "homelink", "old": "e", "new": "E"}),
        ("write", {"path": "homelink", "content": "overwritten\n"}),
    ]
    for name, args in calls:
        outcome = await run(ctx, name, args)
        assert_refused(outcome, "homelink", "hard link", "evertalk's home")
        assert original.decode() not in outcome.text
    assert (home / inside).read_bytes() == original
    assert os.path.samefile(link, home / inside)  # write left the link as it was


async def test_other_hard_links_work_as_before(ctx: ToolContext, home: Path) -> None:
    (ctx.workdir / "a.txt").write_text("one\n")
    os.link(ctx.workdir / "a.txt", ctx.workdir / "b.txt")
    assert (await run(ctx, "read", {"path": "b.txt"})).text == "one\n"
    edited = await run(ctx, "edit", {"path": "b.txt", "old": "one", "new": "two"})
    assert not edited.is_error, edited.text
    wrote = await run(ctx, "write", {"path": "a.txt", "content": "three\n"})
    assert not wrote.is_error, wrote.text
    assert (ctx.workdir / "a.txt").read_text() == "three\n"
