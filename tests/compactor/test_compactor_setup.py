"""Where the compactor's calls go and how they are capped, as a session makes them from the
settings: its own provider and server (`[memory] provider`, `base_url`), the lane on a shared
local server, one call at a time there."""

from __future__ import annotations

from pathlib import Path

import anyio
import pytest
from test_service import LONG, until

from evertalk.agent.session import Agent
from evertalk.chat import Chat
from evertalk.ledger import ledger_path, read_records
from evertalk.protocol.events import TurnEnded
from evertalk.providers.lane import TurnLane
from evertalk.runtime import Runtime
from fakes import AnthropicFake, Call, OpenAIFake, RequestRecord, Script, serve, summarizer
from fakes import chat as answer

ANTHROPIC_KEY = "sk-ant-api03-compactor-setup-SECRET-42"


def home_with(home: Path, text: str) -> Runtime:
    home.mkdir(parents=True, exist_ok=True)
    (home / "config.toml").write_text(text)
    return Runtime.load(home)


def test_a_compactor_on_the_turns_server_shares_their_provider(tmp_path: Path) -> None:
    runtime = home_with(tmp_path, 'provider = "llamacpp"\nmodel = "smol"\n')
    turns = runtime.provider()
    assert runtime.memory_provider(turns) is turns  # one prefix gate for both
    assert isinstance(runtime.turn_lane(), TurnLane)
    settings = runtime.compactor_settings()
    assert settings.local and settings.concurrency == 1
    assert (settings.max_tokens, settings.min_shared) == (1_000, 0.5)


def test_a_compactor_elsewhere_gets_a_provider_of_its_own(tmp_path: Path) -> None:
    runtime = home_with(
        tmp_path,
        'provider = "llamacpp"\nmodel = "smol"\n[memory]\nprovider = "anthropic"\n'
        "max_tokens = 2000\nmin_shared_words = 0.3\n",
    )
    turns = runtime.provider()
    memory = runtime.memory_provider(turns)
    assert memory is not turns and memory.name == "anthropic" and turns.name == "llamacpp"
    assert runtime.turn_lane() is None
    settings = runtime.compactor_settings()
    assert not settings.local and settings.concurrency == 8
    assert (settings.max_tokens, settings.min_shared) == (2_000, 0.3)


def is_compaction(call: Call) -> bool:
    return call.body.get("tool_choice") in ({"type": "none"}, "none")


@pytest.mark.anyio
async def test_a_local_turn_model_pairs_with_a_hosted_summarizer(
    home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Turns go to the local server, summaries to the hosted provider's own address, with its
    own key; the ledger names each call's provider."""
    monkeypatch.setenv("ANTHROPIC_API_KEY", ANTHROPIC_KEY)
    local = OpenAIFake(Script(answer("Hello from the local model.")))
    hosted = AnthropicFake(summarizer(200), api_key=ANTHROPIC_KEY)
    with Chat.open(home / "chat") as chat:
        chat.append("user", LONG[6:])  # its leaf needs a summary before the turn
    with serve(local.app) as local_url, serve(hosted.app) as hosted_url:
        (home / "config.toml").write_text(
            f'provider = "llamacpp"\nmodel = "smol"\nbase_url = "{local_url}/v1"\n\n'
            f'[memory]\nprovider = "anthropic"\nmodel = "claude-haiku-4-5"\n'
            f'base_url = "{hosted_url}"\neffort = "none"\n'
        )
        async with Agent.open(home, asker=None) as agent:
            assert agent.compactor.lane is None and agent.compactor.settings.concurrency == 8
            agent.submit("hello")
            with anyio.fail_after(30):
                async for event in agent.events():
                    if isinstance(event, TurnEnded):
                        assert event.reason == "done", event
                        break
            await until(lambda: agent.chat.core.tree.is_built((0, 0)))
    assert local.records and not [r for r in local.records if is_compaction(call_of(r))]
    assert hosted.records and all(is_compaction(call_of(r)) for r in hosted.records)
    rows = read_records(ledger_path(home)).records
    assert {(r.role, r.provider) for r in rows} == {
        ("turn", "llamacpp"),
        ("compaction", "anthropic"),
    }


def call_of(record: RequestRecord) -> Call:
    return Call("openai", record.body or {}, record.index)
