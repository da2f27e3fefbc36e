"""No credential reaches the log (SPEC §1.7: it keeps everything, forever): not through `read` of
config.toml, not through the shell's environment, not through a tool's input or an error text."""

from __future__ import annotations

from pathlib import Path

import anyio
import pytest
from test_turn_support import (
    API_KEY,
    collect_turn,
    log_of,
    opened,
    script,
    turn_bodies,
    workdir_beside,
)

from evertalk.agent.tools.tool_env import tool_environment
from evertalk.config import CREDENTIAL_VARIABLES, REDACTED, redact, secret_values
from evertalk.protocol.events import ReplyLogged
from evertalk.providers.errors import clean
from fakes import AnthropicFake, ToolCall, constant, reply, sequence
from fakes import chat as answer

pytestmark = pytest.mark.anyio

TOKEN = "bearer-token-SECRET-9876543210"
OTHER = "sk-or-v1-OTHER-SECRET-4455"


@pytest.fixture
def credentials(monkeypatch: pytest.MonkeyPatch) -> None:
    """The key in the environment as well as in config.toml, a bearer token, another
    provider's key: all known to the process, none may show."""
    monkeypatch.setenv("ANTHROPIC_API_KEY", API_KEY)
    monkeypatch.setenv("ANTHROPIC_AUTH_TOKEN", TOKEN)
    monkeypatch.setenv("OPENROUTER_API_KEY", OTHER)


def chat_bytes(home: Path) -> bytes:
    """Every file evertalk wrote under the chat folder (the main log, subagents' logs)."""
    return b"".join(p.read_bytes() for p in sorted((home / "chat").rglob("*")) if p.is_file())


def tool_results(fake: AnthropicFake) -> str:
    """The text of every tool result sent to the model."""
    out = []
    for body in turn_bodies(fake):
        for message in body["messages"]:
            for block in message["content"] if isinstance(message["content"], list) else []:
                if block.get("type") == "tool_result":
                    out += [part.get("text", "") for part in block["content"]]
    return "\n".join(out)


def assert_clean(home: Path, fake: AnthropicFake) -> None:
    written = chat_bytes(home)
    sent = tool_results(fake)
    for secret in (API_KEY, TOKEN, OTHER):
        assert secret.encode() not in written, secret
        assert secret not in sent, secret


def test_one_list_of_credential_variables() -> None:
    assert "ANTHROPIC_AUTH_TOKEN" in CREDENTIAL_VARIABLES
    env = {name: f"value-of-{name}" for name in CREDENTIAL_VARIABLES} | {"PATH": "/bin"}
    assert tool_environment((), env) == {"PATH": "/bin"}
    env = {"ANTHROPIC_AUTH_TOKEN": TOKEN, "OPENAI_API_KEY": "short", "HOME": "/home/u"}
    assert secret_values(None, env) == [TOKEN]  # a value under 8 characters is no key


def test_redact_replaces_the_longest_first() -> None:
    assert redact(f"a {TOKEN} b {TOKEN}x", [TOKEN]) == f"a {REDACTED} b {REDACTED}x"
    # a key that contains another is replaced whole, not left with its tail showing
    secrets = secret_values(None, {"ANTHROPIC_AUTH_TOKEN": TOKEN, "OPENAI_API_KEY": TOKEN[:12]})
    assert secrets == [TOKEN, TOKEN[:12]]
    assert redact(f"<{TOKEN}>", secrets) == f"<{REDACTED}>"


def test_error_texts_redact_the_token(credentials: None) -> None:
    message = clean(f"401: bad token {TOKEN} (key {API_KEY[:10]}…)", secrets=[])
    assert TOKEN not in message and REDACTED in message


async def test_read_of_config_toml_is_refused_and_a_copy_redacted(
    home: Path, credentials: None
) -> None:
    config = home / "config.toml"
    copy = workdir_beside(home) / "settings.toml"  # a key in a file the model may read
    copy.write_text(config.read_text())
    fake = AnthropicFake(
        script().push(
            reply(ToolCall("read", {"path": str(config)}), ToolCall("read", {"path": str(copy)})),
            answer("Read it."),
        )
    )
    async with opened(home, fake) as agent:  # `read` is allowed by default, headless too
        agent.submit("show me my settings")
        await collect_turn(agent)
    echo = [text for kind, text in log_of(home) if kind == "echo"]
    assert len(echo) == 2 and "evertalk's home" in echo[0]
    assert f'api_key = "{REDACTED}"' in echo[1]
    assert f'api_key = "{REDACTED}"' in tool_results(fake)
    assert_clean(home, fake)


async def test_shell_env_and_inputs_are_redacted(home: Path, credentials: None) -> None:
    config = home / "config.toml"
    fake = AnthropicFake(
        script().push(
            reply(
                ToolCall("shell", {"command": "env"}),
                ToolCall("shell", {"command": f"cat {config}"}),
                ToolCall("shell", {"command": f"echo {TOKEN} {OTHER}"}),  # a key in the input
            ),
            answer("Done."),
        )
    )
    async with opened(home, fake, granted=["shell"]) as agent:
        agent.submit("look at the environment")
        await collect_turn(agent)
    log = log_of(home)
    env_echo = next(text for kind, text in log if kind == "echo")
    assert "PATH=" in env_echo and "ANTHROPIC_AUTH_TOKEN" not in env_echo  # scrubbed
    assert ("tool", f'shell {{"command":"echo {REDACTED} {REDACTED}"}}') in log
    assert ("echo", f"shell: {REDACTED} {REDACTED}\n[exit status 0]") in log
    assert_clean(home, fake)


async def test_a_subagent_redacts_too(home: Path, credentials: None) -> None:
    config = home / "config.toml"
    fake = AnthropicFake(
        script()
        .route(
            lambda call: "you are the subagent Peek," in call.turns[0][1],
            sequence(
                constant(reply(ToolCall("read", {"path": str(config)}))),
                answer(f"The key is {API_KEY}."),  # it repeats what it read
            ),
        )
        .push(reply(ToolCall("agent", {"name": "Peek", "task": "read config.toml"})))
        .push(answer("Peek is on it."), answer("Peek reported."))
    )
    async with opened(home, fake) as agent:
        agent.submit("have Peek read my settings")
        await collect_turn(agent, turns=2)
    assert ("work", f"[Peek] The key is {REDACTED}.") in log_of(home)
    assert_clean(home, fake)


async def test_a_model_that_repeats_a_key_has_it_redacted_everywhere(
    home: Path, credentials: None
) -> None:
    """A proxy or a model that echoes the key: not in a summary line, not in the reply shown."""
    leak = f"your key is {API_KEY} " + "and more words " * 60  # long: its leaf needs a call
    fake = AnthropicFake(script(answer(f"summary naming {TOKEN}")).push(answer(leak)))
    async with opened(home, fake) as agent:
        agent.submit("what is my key?")
        seen = await collect_turn(agent)
        with anyio.fail_after(10):
            while not all(agent.chat.core.tree.is_built((0, i)) for i in range(agent.chat.t)):
                await anyio.sleep(0.01)
    shown = [event.text for event in seen if isinstance(event, ReplyLogged)]
    assert shown and all(API_KEY not in text and REDACTED in text for text in shown)
    written = chat_bytes(home)  # the log and the tree's summary lines
    assert API_KEY.encode() not in written and TOKEN.encode() not in written
    assert b"summary naming " + REDACTED.encode() in written
