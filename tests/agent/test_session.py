"""The session around the turns: messages during a turn (SPEC §6.4), held messages starting the
next turn, cancel while settling, status, and what `Agent.open` refuses."""

from __future__ import annotations

import os
from pathlib import Path

import anyio
import pytest
from test_turn_support import (
    collect_turn,
    log_of,
    opened,
    provider_for,
    script,
    texts,
    turn_bodies,
    user_texts,
    write_config,
)

from evertalk.agent.session import Agent, NotConfigured
from evertalk.agent.turn import CONTEXT_BUDGET, Limits
from evertalk.chat import Chat
from evertalk.protocol.events import (
    AgentEvent,
    Delivered,
    Settling,
    ToolStarted,
    TurnEnded,
    TurnStarted,
)
from evertalk.store.errors import ChatLocked
from fakes import AnthropicFake, ToolCall, reply, slow, summarizer
from fakes import chat as answer

pytestmark = pytest.mark.anyio


async def test_a_message_during_a_tool_is_delivered_after_its_result(home: Path) -> None:
    fake = AnthropicFake(
        script().push(
            reply("Checking.", ToolCall("shell", {"command": "sleep 0.3; echo checked"})),
            answer("Done, and noted."),
        )
    )
    steer = "also look at the rotation"

    async with opened(home, fake, granted=["shell"]) as agent:

        def on(event: AgentEvent) -> None:
            if isinstance(event, ToolStarted):
                agent.submit(steer)
                assert agent.busy

        agent.submit("check the backups")
        seen = await collect_turn(agent, on=on)
        await agent.wait_idle()
        assert not agent.busy
    delivered = [e for e in seen if isinstance(e, Delivered)]
    assert delivered == [Delivered("user", steer)]
    assert sum(isinstance(e, TurnStarted) for e in seen) == 1
    log = log_of(home)
    assert log == [
        ("user", "check the backups"),
        ("ever", "Checking."),
        ("tool", 'shell {"command":"sleep 0.3; echo checked"}'),
        (log[3][0], log[3][1]),
        ("user", steer),
        ("ever", "Done, and noted."),
    ]
    assert log[3][0] == "echo" and "checked" in log[3][1]
    second = turn_bodies(fake)[1]
    last = second["messages"][-1]
    assert last["role"] == "user"
    assert [block["type"] for block in last["content"]] == ["tool_result", "text"]
    assert last["content"][1]["text"] == steer
    assert len(turn_bodies(fake)) == 2


async def test_messages_held_past_the_end_start_the_next_turn_together(home: Path) -> None:
    fake = AnthropicFake(script().push(slow(0.3, answer("One.")), answer("Two and three.")))

    async with opened(home, fake) as agent:

        def on(event: AgentEvent) -> None:
            if isinstance(event, TurnStarted) and event.message_ids == [0]:
                agent.submit("second")
                agent.submit("third")

        agent.submit("first")
        seen = await collect_turn(agent, turns=2, on=on)
    starts = [e.message_ids for e in seen if isinstance(e, TurnStarted)]
    assert starts == [[0], [2, 3]]
    assert not any(isinstance(e, Delivered) for e in seen)
    assert log_of(home) == [
        ("user", "first"),
        ("ever", "One."),
        ("user", "second"),
        ("user", "third"),
        ("ever", "Two and three."),
    ]
    body = turn_bodies(fake)[1]
    blocks = texts(body["messages"][0]["content"])
    view, tail = "".join(blocks[:-1]), blocks[-1]
    assert "2+1|user: second" not in view and "1+1|ever: One." in view  # rendered first
    assert tail.endswith("\nsecond\n\nthird")


async def test_a_message_held_when_the_app_quits_is_logged(home: Path) -> None:
    fake = AnthropicFake(script(slow(30, answer("never sent"))))
    async with opened(home, fake) as agent:
        agent.submit("first")
        with anyio.fail_after(5):
            async for event in agent.events():
                if isinstance(event, TurnStarted):
                    break
        agent.submit("typed while Ever worked")  # held: the turn never reaches a tool call
    log = log_of(home)
    assert [m for m in log if m[0] == "user"] == [
        ("user", "first"),
        ("user", "typed while Ever worked"),
    ]
    # besides them, at most the turn's note that it was cut off
    assert all(text.startswith("turn stopped:") for kind, text in log if kind != "user")


async def test_cancel_while_settling_keeps_the_message(tmp_path: Path) -> None:
    home = tmp_path / "home"
    write_config(home, settle=30)
    with Chat.open(home / "chat") as chat:
        chat.append("echo", "x" * 2000)  # not free: its line waits for the compactor
    fake = AnthropicFake(script(slow(30, summarizer(100))))

    async with opened(home, fake) as agent:

        def on(event: AgentEvent) -> None:
            if isinstance(event, Settling):
                agent.cancel()

        agent.submit("hello?")
        with anyio.fail_after(5):
            seen = await collect_turn(agent, on=on)
    assert isinstance(seen[-1], TurnEnded) and seen[-1].reason == "cancelled"
    assert log_of(home)[-1] == ("user", "hello?")
    assert turn_bodies(fake) == []


async def test_status_and_events_order(home: Path) -> None:
    fake = AnthropicFake(script().push(answer("Hi.")))
    async with opened(home, fake) as agent:
        status = agent.status()
        assert status.model == "claude-sonnet-5-5" and not status.busy and status.cost == 0
        agent.submit("hello")
        assert agent.busy
        seen = await collect_turn(agent)
        await agent.wait_idle()
        status = agent.status()
        assert status.view_bytes == agent.chat.core.view.size > 0
        assert status.cost > 0 and status.turn_cost == status.cost
        assert status.subagents == 0 and status.compactor_running == 0
        with pytest.raises(ValueError):
            agent.submit("   ")
    assert isinstance(seen[0], TurnStarted) and isinstance(seen[-1], TurnEnded)
    assert user_texts(turn_bodies(fake)[0]).endswith("\nhello")


async def test_open_refuses_a_locked_chat_and_a_missing_key(
    home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    fake = AnthropicFake(script())
    with Chat.open(home / "chat"), pytest.raises(ChatLocked) as locked:
        async with opened(home, fake):
            pass
    assert str(locked.value).endswith(f"(pid {os.getpid()})")

    bare = tmp_path / "bare"
    bare.mkdir()
    (bare / "config.toml").write_text('provider = "anthropic"\n')
    for variable in ("ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN", "EVERTALK_PROVIDER"):
        monkeypatch.delenv(variable, raising=False)
    with pytest.raises(NotConfigured, match="ANTHROPIC_API_KEY"):
        async with Agent.open(bare, asker=None):
            pass
    assert not (bare / "chat").exists()


async def test_the_context_window_and_workdir_come_from_config(home: Path, tmp_path: Path) -> None:
    fake = AnthropicFake(script())
    provider = provider_for(fake)
    try:
        async with Agent.open(home, asker=None, provider=provider) as agent:
            assert agent.limits == Limits()  # nothing set: the turn's defaults
            assert agent.limits.context_budget == CONTEXT_BUDGET
            assert agent.workdir == Path.cwd().resolve()
        folder = tmp_path / "projects"
        folder.mkdir()
        config = home / "config.toml"
        config.write_text(
            f'workdir = "{folder}"\n' + config.read_text() + "\n[turn]\ncontext_window = 32000\n"
        )
        async with Agent.open(home, asker=None, provider=provider) as agent:
            assert agent.limits.context_budget == 32_000
            assert agent.limits.max_tokens == 8_000  # a quarter: the prompt keeps the rest
            assert agent.workdir == folder.resolve()
    finally:
        await provider.aclose()
