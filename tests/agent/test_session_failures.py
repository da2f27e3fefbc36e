"""What a session tells of the compactor's troubles (SPEC §4.5): a warning event at a node's first
failure, the failures in the status, a compactor stopped by a bug started again; and the ledger
record of a turn's call that failed midway (SPEC §1.8)."""

from __future__ import annotations

import socket
from collections.abc import Sequence
from pathlib import Path

import anyio
import pytest
from test_turn_support import collect_turn, opened, script, workdir_beside

from evertalk.agent import wiring
from evertalk.agent.session import Agent
from evertalk.chat import Chat
from evertalk.compactor.policy import Work
from evertalk.ledger import ledger_path, read_records
from evertalk.memory import Node
from evertalk.protocol.events import AgentEvent, MemoryWarning, TurnEnded
from evertalk.providers.anthropic import AnthropicProvider
from fakes import AnthropicFake, cut, empty
from fakes import chat as answer

pytestmark = pytest.mark.anyio

LONG = "the restore drill took forty minutes; " * 20  # over 512 bytes: its leaf needs a call


def log_long_message(home: Path) -> None:
    with Chat.open(home / "chat") as chat:
        chat.append("user", LONG)


async def next_warning(agent: Agent, timeout: float = 15) -> MemoryWarning:
    with anyio.fail_after(timeout):
        async for event in agent.events():
            if isinstance(event, MemoryWarning):
                return event
    raise AssertionError("the agent closed without a warning")


async def test_a_failed_summary_is_a_warning_and_shows_in_the_status(home: Path) -> None:
    log_long_message(home)
    async with opened(home, AnthropicFake(script(empty()))) as agent:
        warning = await next_warning(agent)
        assert warning.text == (
            "memory: 0+1 could not be summarized (the model gave no usable line); "
            "it will be tried again"
        )
        status = agent.status()
        assert status.compactor_failed == 1 and status.compactor_running == 0
        assert status.compactor_error == "0+1: the model gave no usable line"
        assert not status.compactor_paused


async def test_a_compactor_server_out_of_reach_shows_as_paused(home: Path) -> None:
    log_long_message(home)
    with socket.socket() as probe:  # a port where nothing listens
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    provider = AnthropicProvider("sk-ant-test", f"http://127.0.0.1:{port}")
    try:
        async with Agent.open(
            home, asker=None, provider=provider, workdir=workdir_beside(home)
        ) as agent:
            warning = await next_warning(agent)
            assert warning.text.startswith(
                "memory: summaries are paused: the compactor's model cannot be reached"
            )
            status = agent.status()
            assert status.compactor_paused and chat_failures(agent) == {}
            assert status.compactor_error is not None and "could not connect" in (
                status.compactor_error
            )
    finally:
        await provider.aclose()


def chat_failures(agent: Agent) -> dict[Node, int]:
    return dict(agent.chat.core.failures)


async def test_a_compactor_stopped_by_a_bug_is_started_again(
    home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(wiring, "RESTART_SECONDS", 0.1)
    async with opened(home, AnthropicFake(script())) as agent:
        compactor = agent.compactor
        pick = compactor.policy._next
        armed = [True]

        def once_broken(work: Work, batch: Sequence[Node]) -> Node | None:
            if armed:
                armed.clear()
                raise RuntimeError("a bug in picking the next node")
            return pick(work, batch)

        monkeypatch.setattr(compactor.policy, "_next", once_broken)
        compactor.wake()
        warning = await next_warning(agent)
        assert warning.text == (
            "memory: the compactor stopped (RuntimeError: a bug in picking the next node); it "
            "starts again in 0.1 seconds"
        )
        # started again: what is logged now gets summarized
        agent.chat.append("user", LONG)
        compactor.message_logged()
        with anyio.fail_after(15):
            while not agent.chat.core.tree.is_built((0, 0)):
                await anyio.sleep(0.02)


async def test_a_turns_call_cut_midway_is_in_the_ledger_as_failed(home: Path) -> None:
    fake = AnthropicFake(script().push(cut(answer(LONG), after_events=4)))
    async with opened(home, fake) as agent:
        agent.submit("tell me about the drill")
        events: list[AgentEvent] = await collect_turn(agent)
        ended = events[-1]
        assert isinstance(ended, TurnEnded) and ended.reason == "error"
    turns = [r for r in read_records(ledger_path(home)).records if r.role == "turn"]
    assert len(turns) == 1 and turns[0].failed and turns[0].turn == 0
    # Anthropic's message_start had reported the prompt's tokens before the cut
    assert turns[0].input + turns[0].cache_read + turns[0].cache_write > 0
