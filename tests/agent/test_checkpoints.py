"""The checkpoints `write` and `edit` keep for undo, through the Toolbox on real files: what is
kept, pruning by age and by size, and undo's plan and apply without a service."""

from __future__ import annotations

import os
import time
from dataclasses import replace
from pathlib import Path

import pytest
from test_turn_support import collect_turn, opened, script

from evertalk.agent.policy import Policy
from evertalk.agent.tools import Toolbox, ToolContext
from evertalk.agent.tools.checkpoints import Checkpoints, Limits
from evertalk.agent.undo import UndoError, apply, plan
from evertalk.config import ToolPolicies
from fakes import AnthropicFake, ToolCall, calls_tool, reply
from fakes import chat as answer

pytestmark = pytest.mark.anyio


def toolbox() -> Toolbox:
    return Toolbox(Policy(ToolPolicies(), granted=["write", "edit"]), None)


async def write(ctx: ToolContext, path: str, content: str) -> None:
    outcome = await toolbox().run("write", {"path": path, "content": content}, ctx)
    assert not outcome.is_error, outcome.text


def at_turn(ctx: ToolContext, store: Checkpoints, turn: int) -> ToolContext:
    return replace(ctx, checkpoint=store.turn(turn))


async def test_the_first_content_of_a_turn_is_kept_and_the_last_write_counts(
    ctx: ToolContext, tmp_path: Path
) -> None:
    store = Checkpoints(tmp_path / "checkpoints")
    (ctx.workdir / "f.txt").write_text("first\n")
    turn = at_turn(ctx, store, 7)
    await write(turn, "f.txt", "second\n")
    await write(turn, "f.txt", "third\n")  # the same file again in the turn
    outcome = await toolbox().run("edit", {"path": "f.txt", "old": "third", "new": "4th"}, turn)
    assert not outcome.is_error
    [entry] = store.entries(7)
    assert entry.shown == "f.txt" and entry.before is not None
    assert store.saved(7, entry.before) == b"first\n"
    done = apply(store, plan(store))
    assert done.restored == ["f.txt"] and (ctx.workdir / "f.txt").read_text() == "first\n"
    with pytest.raises(UndoError, match="nothing to undo"):
        plan(store)


async def test_undo_goes_back_one_turn_at_a_time(ctx: ToolContext, tmp_path: Path) -> None:
    store = Checkpoints(tmp_path / "checkpoints")
    await write(at_turn(ctx, store, 3), "f.txt", "three\n")  # created by turn 3
    await write(at_turn(ctx, store, 9), "f.txt", "nine\n")
    assert plan(store).turn == 9
    apply(store, plan(store))
    assert (ctx.workdir / "f.txt").read_text() == "three\n"
    later = plan(store)
    assert later.turn == 3 and [f.action for f in later.files] == ["remove"]
    apply(store, later)
    assert not (ctx.workdir / "f.txt").exists()
    with pytest.raises(UndoError, match="turn 9 was undone already"):
        plan(store, 9)


async def test_without_a_checkpoint_nothing_is_kept(ctx: ToolContext, tmp_path: Path) -> None:
    await write(ctx, "f.txt", "x")  # a context outside any turn (a test's, a bench's)
    assert not (tmp_path / "checkpoints").exists()


async def test_old_checkpoints_go_by_age(ctx: ToolContext, tmp_path: Path) -> None:
    store = Checkpoints(tmp_path / "checkpoints", Limits(keep_days=14))
    await write(at_turn(ctx, store, 1), "old.txt", "x")
    await write(at_turn(ctx, store, 2), "recent.txt", "x")
    old = time.time() - 15 * 86_400
    os.utime(store.root / "1" / "index.jsonl", (old, old))
    await write(at_turn(ctx, store, 3), "new.txt", "x")  # a new turn's first change prunes
    assert store.turns() == [2, 3]


async def test_the_oldest_checkpoints_go_beyond_the_size(ctx: ToolContext, tmp_path: Path) -> None:
    store = Checkpoints(tmp_path / "checkpoints", Limits(max_bytes=25_000))
    for turn in (1, 2, 3):
        (ctx.workdir / f"{turn}.txt").write_text("y" * 10_000)
        await write(at_turn(ctx, store, turn), f"{turn}.txt", "small")
    assert store.turns() == [2, 3]  # three would take 30,000 bytes and more
    # a content larger than the whole room is not kept: undo refuses that file by name
    (ctx.workdir / "huge.txt").write_text("z" * 30_000)
    await write(at_turn(ctx, store, 4), "huge.txt", "small")
    assert store.turns() == [2, 3, 4]  # nothing kept: no room taken
    [refused] = plan(store).refused
    assert refused.shown == "huge.txt" and "not kept" in refused.why


async def test_a_subagents_writes_go_with_the_turn_that_started_it(home: Path) -> None:
    fake = AnthropicFake(
        script()
        .route(
            lambda call: "you are the subagent Scout," in call.last_user_text,
            calls_tool("write", {"path": "scout.txt", "content": "found\n"}, then="Written."),
        )
        .push(
            reply(
                ToolCall("write", {"path": "main.txt", "content": "main\n"}),
                ToolCall("agent", {"name": "Scout", "task": "write what you find"}),
            ),
            answer("Scout is on it."),
            answer("Scout wrote it."),
        )
    )
    async with opened(home, fake, granted=["write"]) as agent:
        agent.submit("write, and have Scout write too")
        await collect_turn(agent, turns=2)  # the turn, then the one its report starts
        store = agent.checkpoints
        assert store.turns() == [0]  # the first turn's: message 0 opened it
        assert [e.shown for e in store.entries(0)] == ["main.txt", "scout.txt"]
        done = apply(store, plan(store))
    assert sorted(done.removed) == ["main.txt", "scout.txt"]


async def test_a_checkpoint_that_cannot_be_kept_stops_the_write(
    ctx: ToolContext, tmp_path: Path
) -> None:
    (tmp_path / "checkpoints").write_text("a file where the folder goes")
    store = Checkpoints(tmp_path / "checkpoints")
    (ctx.workdir / "f.txt").write_text("mine\n")
    outcome = await toolbox().run(
        "write", {"path": "f.txt", "content": "theirs\n"}, at_turn(ctx, store, 1)
    )
    assert outcome.is_error and "\n" not in outcome.text
    assert "could not be kept for undo" in outcome.text and "nothing was written" in outcome.text
    assert (ctx.workdir / "f.txt").read_text() == "mine\n"
