"""Turns through the real Anthropic SDK against the in-process fake: the request bytes, what the
log keeps, the tool loop, errors, cancel and the context budget (SPEC §6.1–§6.3, §7)."""

from __future__ import annotations

import json
from pathlib import Path

import anyio
import pytest
from test_turn_support import (
    DAY_ONE,
    collect_turn,
    log_of,
    opened,
    records_of,
    script,
    texts,
    turn_bodies,
    user_texts,
    write_config,
)

from evertalk.agent.turn import Limits
from evertalk.chat import Chat
from evertalk.prompts import turn_header
from evertalk.protocol.events import (
    CallUsage,
    ReplyLogged,
    Settling,
    TextDelta,
    ThinkingDelta,
    ToolFinished,
    ToolStarted,
    TurnEnded,
    TurnStarted,
)
from evertalk.runtime import Runtime
from fakes import AnthropicFake, Fail, Thinking, ToolCall, reply, slow, summarizer
from fakes import chat as answer

pytestmark = pytest.mark.anyio


def fill(
    home: Path, count: int, text: str = "note {i}: the backups of ~/notes run nightly"
) -> None:
    with Chat.open(home / "chat") as chat:
        for i in range(count):
            chat.append("user" if i % 2 == 0 else "ever", text.format(i=i))


async def test_the_request_bytes_and_the_marks(home: Path) -> None:
    fill(home, 200)  # 200 short (free) lines: 50 whole blocks, so all three view marks exist
    with Chat.open(home / "chat") as chat:
        before = chat.render_view()
    fake = AnthropicFake(script().push(answer("It runs at 02:00.")))
    message = "when do the backups run?"
    async with opened(home, fake) as agent:
        agent.submit(message)
        seen = await collect_turn(agent)
    assert isinstance(seen[-1], TurnEnded) and seen[-1].reason == "done"
    (body,) = turn_bodies(fake)
    runtime = Runtime.load(home)
    assert [block["text"] for block in body["system"]] == [runtime.system]
    content = body["messages"][0]["content"]
    assert len(body["messages"]) == 1
    blocks = texts(content)
    view_blocks, tail = blocks[:-1], blocks[-1]
    assert "".join(view_blocks) == before  # the view as it was before m was logged
    assert view_blocks[-1].endswith("</chat>") and not view_blocks[-1].endswith("\n")
    assert message not in "".join(view_blocks)
    assert tail == "\n" + turn_header(DAY_ONE) + "\n" + message  # header after the view
    marked = [i for i, block in enumerate(content) if "cache_control" in block]
    last_whole = len(view_blocks) - 2
    assert marked == [last_whole - 40, last_whole - 20, last_whole, len(content) - 1]
    assert all(len(block.splitlines()) == 4 for block in view_blocks[:-1])
    # the log keeps m alone, then the reply
    assert log_of(home)[-2:] == [("user", message), ("ever", "It runs at 02:00.")]
    assert not any("Turn:" in text or "Now:" in text for _, text in log_of(home))


async def test_tool_loop_logs_as_it_happens_and_thoughts_never(home: Path) -> None:
    thought = "SECRET-THOUGHT the user wants the date of message 0"
    fake = AnthropicFake(
        script().push(
            reply(Thinking(thought, "sig-1"), "Let me look.", ToolCall("date", {"id": 0})),
            reply(Thinking("SECRET-THOUGHT-2", "sig-2"), "It was written today."),
        )
    )
    async with opened(home, fake) as agent:
        agent.submit("when did I write my first message?")
        seen = await collect_turn(agent)
    kinds = [type(event) for event in seen]
    assert kinds[0] is TurnStarted and kinds[-1] is TurnEnded
    assert ThinkingDelta in kinds and TextDelta in kinds and CallUsage in kinds
    assert [e.text for e in seen if isinstance(e, ReplyLogged)] == [
        "Let me look.",
        "It was written today.",
    ]
    started = next(e for e in seen if isinstance(e, ToolStarted))
    finished = next(e for e in seen if isinstance(e, ToolFinished))
    assert (started.name, started.input) == ("date", {"id": 0})
    assert finished.call_id == started.call_id and not finished.is_error
    log = log_of(home)
    assert [kind for kind, _ in log] == ["user", "ever", "tool", "echo", "ever"]
    assert log[2] == ("tool", 'date {"id":0}')
    assert log[3][1].startswith("date: 20")
    assert finished.output == log[3][1].removeprefix("date: ")
    # thoughts: shown, sent back within the turn with their signatures, never logged
    raw = b"".join(p.read_bytes() for p in (home / "chat").rglob("*.jsonl"))
    assert b"SECRET-THOUGHT" not in raw
    second = turn_bodies(fake)[1]
    assistant = second["messages"][1]
    assert assistant["role"] == "assistant"
    assert assistant["content"][0] == {
        "type": "thinking",
        "thinking": thought,
        "signature": "sig-1",
    }
    result = second["messages"][2]["content"][0]
    assert result["type"] == "tool_result" and result["tool_use_id"] == started.call_id
    # every call of the turn sends the same view text and tail
    first = turn_bodies(fake)[0]
    assert texts(second["messages"][0]["content"]) == texts(first["messages"][0]["content"])
    # idempotency keys: one per record, never repeated
    keys = [r.get("key") for r in records_of(home) if r.get("key")]
    assert len(keys) == len(set(keys)) == 5  # the message's own key too (its held entry's)


async def test_tool_errors_are_results_the_model_reads(home: Path) -> None:
    fake = AnthropicFake(
        script().push(
            reply(ToolCall("zoom", {"id": 1, "n": 2}), ToolCall("nope", {})),
            answer("Sorry, that line does not exist."),
        )
    )
    async with opened(home, fake) as agent:
        agent.submit("zoom somewhere odd")
        seen = await collect_turn(agent)
    done = [e for e in seen if isinstance(e, ToolFinished)]
    assert [e.is_error for e in done] == [True, True]
    results = turn_bodies(fake)[1]["messages"][2]["content"]
    assert [r["type"] for r in results] == ["tool_result", "tool_result"]
    assert all(r.get("is_error") for r in results)
    log = log_of(home)
    assert [kind for kind, _ in log] == ["user", "tool", "echo", "tool", "echo", "ever"]
    assert log[2][1].startswith("zoom: ") and log[4][1].startswith("nope: ")


async def test_permission_denied_without_an_asker(home: Path, tmp_path: Path) -> None:
    marker = tmp_path / "ran"
    fake = AnthropicFake(
        script().push(
            reply(ToolCall("shell", {"command": f"touch {marker}"})),
            answer("I was not allowed to."),
        )
    )
    async with opened(home, fake) as agent:
        agent.submit("touch the marker")
        seen = await collect_turn(agent)
    finished = next(e for e in seen if isinstance(e, ToolFinished))
    assert finished.is_error and "did not allow" in finished.output
    assert not marker.exists()
    assert ("echo", f"shell: {finished.output}") in log_of(home)


async def test_a_failed_call_ends_the_turn_and_says_why(home: Path) -> None:
    fake = AnthropicFake(script().push(Fail(400, "prompt is too long")))
    async with opened(home, fake) as agent:
        agent.submit("hello")
        seen = await collect_turn(agent)
        assert not agent.busy
    ended = seen[-1]
    assert isinstance(ended, TurnEnded) and ended.reason == "error"
    assert ended.error is not None and "prompt is too long" in ended.error
    assert "\n" not in ended.error and ended.error_kind == "bad_request"
    kind, text = log_of(home)[-1]
    assert kind == "echo" and text.startswith("turn stopped: ") and "prompt is too long" in text


async def test_cancel_ends_the_turn_at_once_and_keeps_the_log(home: Path) -> None:
    fake = AnthropicFake(
        script().push(
            reply("Sleeping.", ToolCall("shell", {"command": "sleep 30"})),
            answer("never"),
        )
    )

    def cancel_on_tool(event: object) -> None:
        if isinstance(event, ToolStarted):
            agent.cancel()

    async with opened(home, fake, granted=["shell"]) as agent:
        agent.submit("sleep a while")
        with anyio.fail_after(5):
            seen = await collect_turn(agent, on=cancel_on_tool)
        await agent.wait_idle()
    assert isinstance(seen[-1], TurnEnded) and seen[-1].reason == "cancelled"
    log = log_of(home)
    assert [kind for kind, _ in log] == ["user", "ever", "tool", "echo"]
    # the cut tool's result says it, so the next turn knows why there was no answer
    cut = "shell: cancelled by the user before it finished; the turn stopped there"
    assert log[3] == ("echo", cut)
    assert records_of(home)[-1]["key"] == "turn-0-0-2"  # the slot of the tool's result
    assert len(turn_bodies(fake)) == 1


async def test_the_context_budget_stops_the_loop(home: Path, tmp_path: Path) -> None:
    big = tmp_path / "big.txt"
    big.write_text("line of a big file\n" * 2000)  # 38,000 bytes: ~13,000 tokens by estimate
    fake = AnthropicFake(
        script().push(reply(ToolCall("read", {"path": str(big)})), answer("never sent"))
    )
    # the first call fits; the second carries the file and no longer does
    limits = Limits(max_tokens=1000, context_budget=8_000)
    async with opened(home, fake, limits=limits) as agent:
        agent.submit("read the big file")
        seen = await collect_turn(agent)
    ended = seen[-1]
    assert isinstance(ended, TurnEnded) and ended.reason == "context_full"
    assert ended.error is not None and "8,000" in ended.error
    assert len(turn_bodies(fake)) == 1
    log = log_of(home)
    assert [kind for kind, _ in log] == ["user", "tool", "echo", "echo"]
    assert log[-1][1].startswith("turn stopped: the next call would need")


async def test_settle_waits_for_the_view_then_shows_placeholders(tmp_path: Path) -> None:
    long = "a long message about the nightly backups of ~/notes " * 20  # > 512 bytes
    for settle, compaction, expect_placeholder in (
        (0.3, slow(30, summarizer(100)), True),
        (10, summarizer(100), False),
    ):
        home = tmp_path / f"home-{settle}"
        write_config(home, settle=settle)
        with Chat.open(home / "chat") as chat:
            chat.append("user", long)
        fake = AnthropicFake(script(compaction).push(answer("ok")))
        async with opened(home, fake) as agent:
            agent.submit("and now?")
            seen = await collect_turn(agent)
        assert isinstance(seen[0], Settling) and seen[0].unbuilt == 1
        view = user_texts(turn_bodies(fake)[0])
        assert ("0+1|(not summarized yet: zoom it)" in view) is expect_placeholder
        assert long.strip() not in view  # never the start of an unsummarized message


async def test_two_turns_on_different_days_send_identical_tools_and_system(home: Path) -> None:
    days = iter([DAY_ONE, DAY_ONE.replace(day=9, hour=23), DAY_ONE.replace(month=11, day=30)])
    now = [DAY_ONE]

    def clock():  # type: ignore[no-untyped-def]
        return now[0]

    fake = AnthropicFake(script().push(answer("one"), answer("two"), answer("three")))
    async with opened(home, fake, clock=clock) as agent:
        for text in ("first", "second", "third"):
            now[0] = next(days)
            agent.submit(text)
            await collect_turn(agent)
    bodies = turn_bodies(fake)
    assert len(bodies) == 3
    for field in ("tools", "system"):
        dumped = {json.dumps(body[field], sort_keys=True) for body in bodies}
        assert len(dumped) == 1, field
    tails = [texts(body["messages"][0]["content"])[-1] for body in bodies]
    assert "2026-10-08" in tails[0] and "2026-10-09" in tails[1] and "2026-11-30" in tails[2]


async def test_a_loop_that_never_ends_stops_at_max_steps(home: Path) -> None:
    fake = AnthropicFake(script(None).route(lambda c: True, reply(ToolCall("date", {"id": 0}))))
    async with opened(home, fake, limits=Limits(max_steps=3)) as agent:
        agent.submit("loop")
        seen = await collect_turn(agent)
    ended = seen[-1]
    assert isinstance(ended, TurnEnded) and ended.reason == "max_steps"
    assert len(turn_bodies(fake)) == 3
    kinds = [kind for kind, _ in log_of(home)]
    assert kinds == ["user", *["tool", "echo"] * 3, "echo"]
    assert log_of(home)[-1] == ("echo", "turn stopped: it reached 3 model calls")
