"""Faults that must not fail a turn, and trying a failed turn again without a duplicate.

- a transient fault of the model call (529, a cut stream, a dropped connection) is tried again
  by the provider, and the session says so (`Retrying`), for turns and compactions alike;
- `Agent.retry()` (the app's `/retry`, `evertalk -p --retry`) runs a new turn for the last
  message that has no reply, without logging it again;
- a local server's placeholder key is no secret: `localhost` reaches the log as it is.
"""

from __future__ import annotations

import base64
import socket
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import pytest
from test_turn_support import (
    DAY_ONE,
    collect_turn,
    fixed_clock,
    log_of,
    script,
    turn_bodies,
    workdir_beside,
)

from evertalk.agent.retry import NothingToRetry, find_unanswered, has_unanswered
from evertalk.agent.session import Agent
from evertalk.chat import Chat
from evertalk.ledger import ledger_path, read_records
from evertalk.protocol.events import Retrying, TurnEnded, TurnStarted
from evertalk.providers.base import Image
from evertalk.providers.retry import RetryPolicy
from evertalk.service import commands
from evertalk.slash import CommandError
from fakes import (
    AnthropicFake,
    Fail,
    OpenAIFake,
    ToolCall,
    reply,
    serve,
    summarizer,
)
from fakes import chat as answer
from fakes.behaviours import cut_at_start, flaky, overloaded
from fakes.sdk_providers import provider_for

pytestmark = pytest.mark.anyio

FAST = RetryPolicy(base_delay=0.001)
PNG = base64.b64encode(b"\x89PNG\r\n\x1a\n" + b"\0" * 32).decode()


@asynccontextmanager
async def opened(
    home: Path, fake: AnthropicFake, policy: RetryPolicy = FAST
) -> AsyncIterator[Agent]:
    # as evertalk makes it: the SDK's retries off, ours on (fast, for the tests)
    provider = provider_for(fake, retry=policy)
    try:
        async with Agent.open(
            home,
            asker=None,
            provider=provider,
            workdir=workdir_beside(home),
            clock=fixed_clock(DAY_ONE),
        ) as agent:
            yield agent
    finally:
        await provider.aclose()


def kinds(home: Path) -> list[str]:
    return [kind for kind, _ in log_of(home)]


def tail_text(body: dict[str, Any]) -> str:
    """The last text block of a turn call's first user message: the header and the message."""
    blocks = body["messages"][0]["content"]
    return [block["text"] for block in blocks if block.get("type") == "text"][-1]


# --- transient faults ----------------------------------------------------------------------


async def test_a_turn_goes_through_a_529_and_a_cut_stream_and_says_so(home: Path) -> None:
    fake = AnthropicFake(script())
    fake.behaviour.default = flaky(answer("Here it is."), (overloaded, cut_at_start))  # type: ignore[attr-defined]
    async with opened(home, fake) as agent:
        agent.submit("show me the plan")
        events = await collect_turn(agent)
    ended = events[-1]
    assert isinstance(ended, TurnEnded) and ended.reason == "done"
    retried = [event for event in events if isinstance(event, Retrying)]
    assert [(r.attempt, r.of, r.why) for r in retried] == [
        (2, 10, "server overloaded (529)"),
        (3, 10, "the reply stream broke off"),
    ]
    assert kinds(home) == ["user", "ever"]  # no trace of the failed tries in the log
    # the cut try had begun, and was billed: the ledger keeps it as a failed call
    turns = [r for r in read_records(ledger_path(home)).records if r.role == "turn"]
    assert [r.failed for r in turns] == [True, False]
    assert turns[0].input + turns[0].cache_write > 0


async def test_compactions_go_through_transient_faults_too(home: Path) -> None:
    summaries = flaky(summarizer(100), (overloaded, cut_at_start))
    fake = AnthropicFake(script(summaries).push(answer("Noted.")))
    async with opened(home, fake) as agent:
        agent.submit("remember the backups run at noon " * 30)  # a leaf that needs a call
        await collect_turn(agent)
        with anyio.fail_after(15):
            while not agent.chat.core.tree.is_built((0, 0)):
                await anyio.sleep(0.01)
        assert agent.compactor.status().failed == 0
        assert agent.chat.core.failures == {}


# --- trying a failed turn again ------------------------------------------------------------


async def test_retry_answers_the_failed_message_without_logging_it_again(home: Path) -> None:
    fake = AnthropicFake(script().push(Fail(401, "invalid x-api-key"), answer("Done now.")))
    async with opened(home, fake) as agent:
        agent.submit("rename the backups")
        failed = await collect_turn(agent)
        assert isinstance(failed[-1], TurnEnded) and failed[-1].reason == "error"
        assert kinds(home) == ["user", "echo"]
        assert agent.retry() == [0]
        events = await collect_turn(agent)
    assert [e.message_ids for e in events if isinstance(e, TurnStarted)] == [[0]]
    assert isinstance(events[-1], TurnEnded) and events[-1].reason == "done"
    assert kinds(home) == ["user", "echo", "ever"]  # one `user`: the message was not logged twice
    first, second = turn_bodies(fake)
    assert tail_text(first).endswith("\nrename the backups")
    assert tail_text(second).endswith("\nrename the backups")
    # the view of the retry is the current one: the message's line, and why its turn stopped
    view = "".join(b["text"] for b in second["messages"][0]["content"][:-1])
    assert "turn stopped: the model call failed" in view


async def test_a_retry_that_fails_again_says_so_in_the_log_too(home: Path) -> None:
    """The retried turn has log keys of its own: with those of the turn that failed, its
    messages would be taken for re-sent ones and never logged."""
    fake = AnthropicFake(script().push(Fail(400, "first"), Fail(400, "second"), answer("Ok.")))
    async with opened(home, fake) as agent:
        agent.submit("go")
        await collect_turn(agent)
        agent.retry()
        await collect_turn(agent)
        agent.retry()
        await collect_turn(agent)
    assert log_of(home) == [
        ("user", "go"),
        ("echo", "turn stopped: the model call failed: Anthropic: first"),
        ("echo", "turn stopped: the model call failed: Anthropic: second"),
        ("ever", "Ok."),
    ]
    turns = [r.turn for r in read_records(ledger_path(home)).records if r.role == "turn"]
    assert turns == [3]  # the one that got through: the 400s were not billed


async def test_there_is_nothing_to_retry_once_a_message_has_a_reply(home: Path) -> None:
    fake = AnthropicFake(script().push(answer("Hi.")))
    async with opened(home, fake) as agent:
        with pytest.raises(NothingToRetry, match="no message to answer again"):
            agent.retry()  # an empty chat
        agent.submit("hello")
        await collect_turn(agent)
        with pytest.raises(NothingToRetry, match="has a reply"):
            agent.retry()
    assert kinds(home) == ["user", "ever"]


async def test_a_turn_that_replied_before_it_failed_is_answered(home: Path) -> None:
    """Its reply is logged: a new turn would say it again. A message goes on from there."""
    fake = AnthropicFake(
        script().push(reply("Let me look.", ToolCall("date", {"id": 0})), Fail(400, "no"))
    )
    async with opened(home, fake) as agent:
        agent.submit("when was this?")
        await collect_turn(agent)
        assert kinds(home) == ["user", "ever", "tool", "echo", "echo"]
        with pytest.raises(NothingToRetry):
            agent.retry()


async def test_tool_calls_without_a_reply_leave_the_message_unanswered(home: Path) -> None:
    fake = AnthropicFake(
        script().push(reply(ToolCall("date", {"id": 0})), Fail(400, "no"), answer("Noon."))
    )
    async with opened(home, fake) as agent:
        agent.submit("when was this?")
        await collect_turn(agent)
        assert agent.retry() == [0]
        await collect_turn(agent)
    assert kinds(home) == ["user", "tool", "echo", "echo", "ever"]
    view = "".join(b["text"] for b in turn_bodies(fake)[-1]["messages"][0]["content"][:-1])
    assert '|tool: date {"id":0}' in view  # what the failed turn did, in the view it reads


async def test_a_long_message_with_an_image_goes_whole_again(home: Path) -> None:
    long = "the nightly job copies ~/notes to the NAS. " * 1000  # 44,000 characters: 2 pages
    fake = AnthropicFake(script().push(Fail(400, "no"), answer("Seen.")))
    async with opened(home, fake) as agent:
        agent.submit(long, [Image("image/png", PNG)])
        await collect_turn(agent)
        assert agent.retry() == [0, 1]
        await collect_turn(agent)
    assert kinds(home) == ["user", "user", "echo", "ever"]
    body = turn_bodies(fake)[-1]
    assert tail_text(body).endswith("\n" + long)
    images = [b for b in body["messages"][0]["content"] if b.get("type") == "image"]
    assert [image["source"]["data"] for image in images] == [PNG]


async def test_a_report_that_failed_its_turn_is_retried_as_a_report(home: Path) -> None:
    with Chat.open(home / "chat") as chat:
        chat.append("work", "[Scout] There are 3 files.", agent="Scout")
        chat.append("echo", "turn stopped: the model call failed: Anthropic: Overloaded")
        found = find_unanswered(chat, home / "chat" / "images")
        assert has_unanswered(chat)
    assert (found.kind, found.agent, found.ids) == ("work", "Scout", (0,))
    assert found.text == "[Scout] There are 3 files."


async def test_no_retry_while_a_turn_runs(home: Path) -> None:
    fake = AnthropicFake(script().push(Fail(400, "no")))
    async with opened(home, fake) as agent:
        agent.submit("first")
        await collect_turn(agent)
        fake.behaviour.push(answer("again"))  # type: ignore[attr-defined]
        agent.retry()
        with pytest.raises(NothingToRetry, match="a turn is running"):
            agent.retry()  # the first retry holds the message: a second would answer it twice
        await collect_turn(agent)
    assert kinds(home) == ["user", "echo", "ever"]


async def test_the_app_command(home: Path) -> None:
    fake = AnthropicFake(script().push(Fail(400, "no"), answer("Done.")))
    async with opened(home, fake) as agent:
        with pytest.raises(CommandError, match="no message to answer again"):
            commands.retry_text(agent.retry, ())
        agent.submit("do it")
        ended = (await collect_turn(agent))[-1]
        assert isinstance(ended, TurnEnded)
        assert commands.retry_hint(agent.chat, ended) == (
            "/retry tries the turn again (the message is not sent twice)"
        )
        with pytest.raises(CommandError, match="usage: /retry"):
            commands.retry_text(agent.retry, ("now",))
        assert commands.retry_text(agent.retry, ()) == "trying the turn again for message 0"
        done = (await collect_turn(agent))[-1]
        assert isinstance(done, TurnEnded) and commands.retry_hint(agent.chat, done) is None
    assert kinds(home) == ["user", "echo", "ever"]


# --- a local server's placeholder key ------------------------------------------------------


def closed_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
    return port


def local_config(home: Path, kind: str, base_url: str, api_key: str | None = None) -> None:
    lines = [f'provider = "{kind}"', 'model = "qwen3"', f'base_url = "{base_url}"']
    if api_key is not None:
        lines.append(f'api_key = "{api_key}"')
    lines += ["", "[memory]", "settle_timeout = 1"]
    home.mkdir(parents=True, exist_ok=True)
    (home / "config.toml").write_text("\n".join(lines) + "\n")
    (home / "config.toml").chmod(0o600)


@pytest.mark.parametrize("kind", ["ollama", "llamacpp", "vllm"])
async def test_localhost_reaches_the_log_as_it_is(tmp_path: Path, kind: str) -> None:
    """The placeholder key `local` is no credential: an error naming the server's address is
    logged (and shown) as it is, not as `http://[redacted]host:…`."""
    home = tmp_path / "home"
    url = f"http://localhost:{closed_port()}/v1"
    local_config(home, kind, url)
    async with Agent.open(home, asker=None, workdir=workdir_beside(home)) as agent:
        agent.submit("hello")
        ended = (await collect_turn(agent))[-1]
    assert isinstance(ended, TurnEnded) and ended.error_kind == "connection"
    assert ended.error is not None and f"could not connect (at {url})" in ended.error
    last = log_of(home)[-1]
    assert last[0] == "echo" and f"(at {url})" in last[1] and "[redacted]" not in last[1]


async def test_a_real_key_of_a_local_server_is_still_redacted(tmp_path: Path) -> None:
    key = "vllm-key-0123456789abcdef"
    fake = OpenAIFake(lambda call: Fail(401, f"Incorrect API key provided: {key}"))
    home = tmp_path / "home"
    with serve(fake.app) as url:
        local_config(home, "vllm", f"{url}/v1", api_key=key)
        async with Agent.open(home, asker=None, workdir=workdir_beside(home)) as agent:
            agent.submit("hello")
            ended = (await collect_turn(agent))[-1]
    assert isinstance(ended, TurnEnded) and ended.error is not None
    assert key not in ended.error and "[redacted]" in ended.error
    assert all(key not in text for _, text in log_of(home))
    assert any("[redacted]" in text for _, text in log_of(home))
