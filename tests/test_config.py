"""Settings: the file, the environment, the defaults, private writes, and a key that never shows."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import tempfile
import tomllib
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from evertalk.config import (
    Config,
    ConfigError,
    MemoryConfig,
    Secret,
    ToolPolicies,
    TurnConfig,
    load_config,
    save_config,
    save_models,
)

KEY = "sk-ant-api03-SECRETSECRETSECRET-0123456789abcdef"


def write(home: Path, text: str) -> Path:
    home.mkdir(parents=True, exist_ok=True)
    path = home / "config.toml"
    path.write_text(text, encoding="utf-8")
    return path


def error_of(home: Path, env: dict[str, str] | None = None) -> str:
    with pytest.raises(ConfigError) as caught:
        load_config(home, env or {})
    message = str(caught.value)
    assert "\n" not in message
    return message


@pytest.fixture
def hostile_umask() -> Iterator[None]:
    """A umask that would strip the owner's own bits: the modes must not depend on it."""
    old = os.umask(0o277)
    try:
        yield
    finally:
        os.umask(old)


# --- defaults and the file -----------------------------------------------------------------


def test_defaults_without_a_file_or_environment(tmp_path: Path) -> None:
    config = load_config(tmp_path / "home", {})
    assert config == Config(
        provider="anthropic",
        model="claude-sonnet-5-5",
        base_url=None,
        api_key=None,
        memory=MemoryConfig("claude-haiku-5-5", "high", 20, 8, 600),
        turn=TurnConfig(None),
        tools=ToolPolicies(shell="ask", read="allow", write="ask", edit="ask"),
    )
    assert not (tmp_path / "home").exists()  # reading never creates anything


@pytest.mark.parametrize(
    ("provider", "turn", "memory", "base_url"),
    [
        ("anthropic", "claude-sonnet-5-5", "claude-haiku-5-5", None),
        ("openai", "gpt-5.6-terra", "gpt-5.6-luna", None),
        (
            "openrouter",
            "openai/gpt-5.6-terra",
            "openai/gpt-5.6-luna",
            "https://openrouter.ai/api/v1",
        ),
    ],
)
def test_each_hosted_provider_has_a_cheap_compaction_model(
    tmp_path: Path, provider: str, turn: str, memory: str, base_url: str | None
) -> None:
    write(tmp_path, f'provider = "{provider}"\n')
    config = load_config(tmp_path, {})
    assert (config.model, config.memory.model, config.base_url) == (turn, memory, base_url)


@pytest.mark.parametrize(
    ("provider", "base_url"),
    [
        ("ollama", "http://localhost:11434/v1"),
        ("llamacpp", "http://localhost:8080/v1"),
        ("vllm", "http://localhost:8000/v1"),
    ],
)
def test_local_servers_compact_with_the_turn_model(
    tmp_path: Path, provider: str, base_url: str
) -> None:
    write(tmp_path, f'provider = "{provider}"\nmodel = "qwen3:8b"\n')
    config = load_config(tmp_path, {})
    assert (config.model, config.memory.model, config.base_url) == (
        "qwen3:8b",
        "qwen3:8b",
        base_url,
    )


def test_a_local_server_gets_no_key_from_the_environment(tmp_path: Path) -> None:
    write(tmp_path, 'provider = "ollama"\nmodel = "qwen3:8b"\n')
    env = {"OPENAI_API_KEY": KEY, "ANTHROPIC_API_KEY": KEY}
    assert load_config(tmp_path, env).api_key is None
    write(tmp_path, f'provider = "ollama"\nmodel = "qwen3:8b"\napi_key = "{KEY}"\n')
    assert load_config(tmp_path, env).api_key == Secret(KEY)


def test_a_local_server_without_a_model_is_an_error(tmp_path: Path) -> None:
    path = write(tmp_path, 'provider = "ollama"\n')
    message = error_of(tmp_path)
    assert str(path) in message and "needs a model" in message


def test_every_value_from_the_file(tmp_path: Path) -> None:
    write(
        tmp_path,
        f"""
provider = "openai"
model = "gpt-5.6-sol"
base_url = "https://proxy.example/v1"
api_key = "{KEY}"

[memory]
model = "gpt-5.6-terra"
effort = "xhigh"
settle_timeout = 2.5
concurrency = 3
deadline = 90

[turn]
effort = "medium"

[tools]
shell = "deny"
read = "ask"
write = "allow"
edit = "allow"
""",
    )
    config = load_config(tmp_path, {})
    assert config == Config(
        provider="openai",
        model="gpt-5.6-sol",
        base_url="https://proxy.example/v1",
        api_key=Secret(KEY),
        memory=MemoryConfig("gpt-5.6-terra", "xhigh", 2.5, 3, 90),
        turn=TurnConfig("medium"),
        tools=ToolPolicies(shell="deny", read="ask", write="allow", edit="allow"),
    )
    assert config.api_key is not None and config.api_key.reveal() == KEY


def test_context_window_and_workdir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    assert load_config(tmp_path, {}).turn.context_window is None  # the session's default
    assert load_config(tmp_path, {}).workdir_path is None  # where evertalk was started
    monkeypatch.setenv("HOME", str(tmp_path))
    (tmp_path / "code").mkdir()
    write(tmp_path, 'workdir = "~/code"\n[turn]\ncontext_window = 32000\n')
    config = load_config(tmp_path, {})
    assert config.turn.context_window == 32_000
    assert config.workdir == "~/code" and config.workdir_path == tmp_path / "code"
    save_config(tmp_path, config)  # written back as the user wrote it
    assert tomllib.loads((tmp_path / "config.toml").read_text()) == {
        "workdir": "~/code",
        "turn": {"context_window": 32_000},
    }


def test_tools_are_on_unless_switched_off(tmp_path: Path) -> None:
    assert load_config(tmp_path, {}).turn.tools == "on"
    write(tmp_path, '[turn]\ntools = "off"\n')
    config = load_config(tmp_path, {})
    assert config.turn.tools == "off"
    save_config(tmp_path, config)  # kept as the user wrote it
    assert tomllib.loads((tmp_path / "config.toml").read_text()) == {"turn": {"tools": "off"}}
    made = Config(turn=TurnConfig(tools="off"))
    save_config(tmp_path, made)
    assert load_config(tmp_path, {}) == made


@pytest.mark.parametrize(("value", "shown"), [('"no"', "'no'"), ("false", "False")])
def test_tools_take_on_or_off_only(tmp_path: Path, value: str, shown: str) -> None:
    path = write(tmp_path, f"[turn]\ntools = {value}\n")
    assert error_of(tmp_path) == f'{path}: `turn.tools` must be "on" or "off", not {shown}'


def test_the_workdir_must_exist(tmp_path: Path) -> None:
    path = write(tmp_path, 'workdir = "~/no-such-folder-for-evertalk"\n')
    missing = Path("~/no-such-folder-for-evertalk").expanduser()
    assert error_of(tmp_path) == f"{path}: `workdir`: {missing} does not exist"
    write(tmp_path, f'workdir = "{path}"\n')
    assert error_of(tmp_path) == f"{path}: `workdir`: {path} is not a directory"
    # the variable the command line's --workdir sets overrides the file, and is named
    assert load_config(tmp_path, {"EVERTALK_WORKDIR": str(tmp_path)}).workdir_path == tmp_path
    message = error_of(tmp_path, {"EVERTALK_WORKDIR": str(tmp_path / "gone")})
    assert message == f"EVERTALK_WORKDIR: `workdir`: {tmp_path / 'gone'} does not exist"


def test_save_models_changes_only_the_models(tmp_path: Path) -> None:
    write(tmp_path, f'api_key = "{KEY}"\n[memory]\nconcurrency = 3\n[tools]\nshell = "allow"\n')
    save_models(tmp_path, model="claude-opus-5-5")
    save_models(tmp_path, memory_model="claude-sonnet-5-5", memory_effort="low")
    save_models(tmp_path, memory_model="claude-haiku-5-5")  # the effort stays
    assert tomllib.loads((tmp_path / "config.toml").read_text()) == {
        "api_key": KEY,
        "model": "claude-opus-5-5",
        "memory": {"model": "claude-haiku-5-5", "effort": "low", "concurrency": 3},
        "tools": {"shell": "allow"},
    }
    before = (tmp_path / "config.toml").read_bytes()
    with pytest.raises(ConfigError, match=r"memory\.effort"):
        save_models(tmp_path, memory_model="x", memory_effort="extreme")
    with pytest.raises(ConfigError, match="`model`"):
        save_models(tmp_path, model=" padded ")
    assert (tmp_path / "config.toml").read_bytes() == before


# --- the environment -----------------------------------------------------------------------


def test_the_environment_overrides_the_file(tmp_path: Path) -> None:
    write(tmp_path, f'provider = "anthropic"\nmodel = "claude-opus-5-5"\napi_key = "{KEY}"\n')
    env = {
        "ANTHROPIC_API_KEY": "from-env",
        "EVERTALK_MODEL": "claude-fable-5-1",
        "EVERTALK_MEMORY_MODEL": "claude-haiku-4-5",
    }
    config = load_config(tmp_path, env)
    assert config.model == "claude-fable-5-1"
    assert config.memory.model == "claude-haiku-4-5"
    assert config.api_key == Secret("from-env")
    # Another provider's key variable is not this provider's key.
    assert load_config(tmp_path, {"OPENAI_API_KEY": "x"}).api_key == Secret(KEY)


def test_an_empty_variable_counts_as_unset(tmp_path: Path) -> None:
    write(tmp_path, f'api_key = "{KEY}"\n')
    config = load_config(tmp_path, {"ANTHROPIC_API_KEY": "", "EVERTALK_MODEL": ""})
    assert config.api_key == Secret(KEY) and config.model == "claude-sonnet-5-5"


def test_the_providers_base_url_variable_overrides_the_file(tmp_path: Path) -> None:
    env = {"ANTHROPIC_BASE_URL": "http://127.0.0.1:9/a", "OPENAI_BASE_URL": "http://127.0.0.1:9/o"}
    assert load_config(tmp_path, env).base_url == "http://127.0.0.1:9/a"
    write(tmp_path, 'provider = "openai"\n')
    assert load_config(tmp_path, env).base_url == "http://127.0.0.1:9/o"
    # the environment beats the file, as for every other setting
    write(tmp_path, 'provider = "openai"\nbase_url = "https://file.example/v1"\n')
    assert load_config(tmp_path, env).base_url == "http://127.0.0.1:9/o"
    assert load_config(tmp_path, {}).base_url == "https://file.example/v1"
    write(tmp_path, 'base_url = "https://file.example/a"\n')
    assert load_config(tmp_path, env).base_url == "http://127.0.0.1:9/a"
    assert load_config(tmp_path, {"OPENAI_BASE_URL": "http://x.test"}).base_url == (
        "https://file.example/a"  # another SDK's variable
    )


@pytest.mark.parametrize("provider", ["openrouter", "ollama", "llamacpp", "vllm"])
def test_openai_base_url_is_not_read_for_other_openai_compatible_providers(
    tmp_path: Path, provider: str
) -> None:
    """Their key (and the chat) must not go to an address set for OpenAI itself."""
    env = {"OPENAI_BASE_URL": "http://127.0.0.1:9/o"}
    write(tmp_path, f'provider = "{provider}"\nmodel = "m"\n')
    default = load_config(tmp_path, {}).base_url
    assert default is not None and load_config(tmp_path, env).base_url == default
    write(tmp_path, f'provider = "{provider}"\nmodel = "m"\nbase_url = "http://host.test/v1"\n')
    assert load_config(tmp_path, env).base_url == "http://host.test/v1"


def test_a_base_url_from_the_environment_is_not_saved(tmp_path: Path) -> None:
    write(tmp_path, 'provider = "openai"\nbase_url = "https://file.example/v1"\n')
    loaded = load_config(tmp_path, {"OPENAI_BASE_URL": "http://127.0.0.1:9/o"})
    save_config(tmp_path, replace(loaded, model="gpt-5.6-luna"))
    saved = tomllib.loads((tmp_path / "config.toml").read_text())
    assert saved["base_url"] == "https://file.example/v1" and saved["model"] == "gpt-5.6-luna"


@pytest.mark.parametrize(
    ("variables", "provider"),
    [
        (["OPENAI_API_KEY"], "openai"),
        (["OPENROUTER_API_KEY"], "openrouter"),
        (["ANTHROPIC_API_KEY"], "anthropic"),
        (["OPENAI_API_KEY", "OPENROUTER_API_KEY"], "anthropic"),  # not exactly one: the default
        ([], "anthropic"),
    ],
)
def test_one_key_variable_picks_the_provider(
    tmp_path: Path, variables: list[str], provider: str
) -> None:
    env = {name: f"key-of-{name}" for name in variables}
    config = load_config(tmp_path, env)
    assert config.provider == provider
    if len(variables) == 1:
        assert config.api_key == Secret(f"key-of-{variables[0]}")


def test_a_provider_named_anywhere_beats_the_key_variables(tmp_path: Path) -> None:
    assert load_config(
        tmp_path, {"OPENAI_API_KEY": "k", "EVERTALK_PROVIDER": "anthropic"}
    ).provider == ("anthropic")
    write(tmp_path, 'provider = "anthropic"\n')
    config = load_config(tmp_path, {"OPENAI_API_KEY": "k"})
    assert config.provider == "anthropic" and config.api_key is None


def test_switching_provider_by_environment_leaves_the_files_provider_settings(
    tmp_path: Path,
) -> None:
    write(
        tmp_path,
        f'provider = "anthropic"\nmodel = "claude-opus-5-5"\napi_key = "{KEY}"\n'
        'base_url = "https://anthropic-proxy.example"\n[memory]\nmodel = "claude-haiku-5-5"\n'
        "concurrency = 2\n",
    )
    config = load_config(tmp_path, {"EVERTALK_PROVIDER": "openrouter"})
    assert config.provider == "openrouter"
    assert config.api_key is None  # the Anthropic key is never sent to OpenRouter
    assert config.base_url == "https://openrouter.ai/api/v1"
    assert (config.model, config.memory.model) == ("openai/gpt-5.6-terra", "openai/gpt-5.6-luna")
    assert config.memory.concurrency == 2  # not tied to a provider: kept


# --- errors ----------------------------------------------------------------------------------


def test_bad_toml_names_the_file_and_the_line(tmp_path: Path) -> None:
    path = write(tmp_path, 'provider = "openai"\nmodel = \n')
    message = error_of(tmp_path)
    assert message.startswith(f"{path}: not valid TOML: line 2")


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ('provider = "antropic"', "`provider` must be one of anthropic, openai"),
        ('[tools]\nshell = "yes"', "`tools.shell` must be allow, ask or deny, not 'yes'"),
        ("[tools]\nread = true", "`tools.read` must be allow, ask or deny, not True"),
        ('[memory]\nconcurrency = "eight"', "`memory.concurrency` must be a whole number from"),
        ("[memory]\nconcurrency = 0", "`memory.concurrency` must be a whole number from 1 to 8"),
        ("[memory]\nconcurrency = 9", "`memory.concurrency` must be a whole number from 1 to 8"),
        ("[memory]\nconcurrency = true", "`memory.concurrency` must be a whole number"),
        ("[memory]\nsettle_timeout = -1", "`memory.settle_timeout` must be a number of seconds"),
        ("[memory]\ndeadline = 0", "`memory.deadline` must be a positive number of seconds"),
        ("[memory]\ndeadline = nan", "`memory.deadline` must be a number of seconds"),
        ('[memory]\neffort = "extreme"', "`memory.effort` must be one of none"),
        ("model = 5", "`model` must be a model name, not 5"),
        ('model = ""', "`model` must be a model name"),
        ('base_url = "localhost:8080"', "`base_url` must be an http:// or https:// address"),
        ("memory = 3", "`memory` must be a table"),
        ('[memory]\nmodle = "x"', "unknown setting `memory.modle`"),
        ('colour = "blue"', "unknown setting `colour`"),
        ("api_key = 12345", "`api_key` must be a non-empty string"),
        ('api_key = ""', "`api_key` must be a non-empty string"),
        ("[turn]\ncontext_window = 7999", "`turn.context_window` must be a whole number of tokens"),
        ("[turn]\ncontext_window = true", "`turn.context_window` must be a whole number"),
        ("[turn]\ncontext_window = 64000.0", "`turn.context_window` must be a whole number"),
        ('[turn]\ncontext_window = "64k"', "`turn.context_window` must be a whole number"),
        ("workdir = 5", "`workdir` must be a directory's path, not 5"),
        ('workdir = ""', "`workdir` must be a directory's path"),
    ],
)
def test_bad_values_are_one_line_naming_the_file(tmp_path: Path, text: str, expected: str) -> None:
    path = write(tmp_path, text + "\n")
    message = error_of(tmp_path)
    assert message.startswith(f"{path}: {expected}"), message


@pytest.mark.parametrize("calls", [1, 8])
def test_concurrency_is_at_most_eight_calls(tmp_path: Path, calls: int) -> None:
    write(tmp_path, f"[memory]\nconcurrency = {calls}\n")
    assert load_config(tmp_path, {}).memory.concurrency == calls


# --- the compactor's server --------------------------------------------------------------------


@pytest.mark.parametrize("provider", ["ollama", "llamacpp", "vllm"])
def test_a_local_server_gets_one_compaction_at_a_time_and_turns_first(
    tmp_path: Path, provider: str
) -> None:
    write(tmp_path, f'provider = "{provider}"\nmodel = "qwen3:8b"\n')
    memory = load_config(tmp_path, {}).memory
    assert (memory.concurrency, memory.yield_to_turns) == (1, True)


def test_a_hosted_provider_keeps_eight_calls_and_no_lane(tmp_path: Path) -> None:
    memory = load_config(tmp_path, {}).memory
    assert (memory.concurrency, memory.yield_to_turns) == (8, False)
    assert (memory.max_tokens, memory.min_shared_words) == (1_000, 0.5)


def test_the_files_concurrency_and_lane_win(tmp_path: Path) -> None:
    write(
        tmp_path,
        'provider = "llamacpp"\nmodel = "smol"\n'
        "[memory]\nconcurrency = 4\nyield_to_turns = false\n",
    )
    memory = load_config(tmp_path, {}).memory
    assert (memory.concurrency, memory.yield_to_turns) == (4, False)
    write(tmp_path, "[memory]\nyield_to_turns = true\n")
    assert load_config(tmp_path, {}).memory.yield_to_turns


def test_a_local_turn_model_with_a_hosted_summarizer(tmp_path: Path) -> None:
    """The compactor's own provider: its usual address, its cheap model, its own key variable;
    eight calls at once and no lane, since it shares no server with the turns."""
    write(
        tmp_path,
        f'provider = "llamacpp"\nmodel = "smol"\napi_key = "{KEY}"\n'
        '[memory]\nprovider = "anthropic"\n',
    )
    env = {"ANTHROPIC_API_KEY": "sk-ant-memory-key-0123456789", "OPENAI_API_KEY": "sk-other"}
    config = load_config(tmp_path, env)
    assert config.memory_provider == "anthropic" and config.memory_base_url is None
    assert config.memory.model == "claude-haiku-5-5" and not config.memory_shares_server
    assert config.memory_api_key == Secret("sk-ant-memory-key-0123456789")
    assert (config.memory.concurrency, config.memory.yield_to_turns) == (8, False)
    assert config.base_url == "http://localhost:8080/v1" and config.api_key == Secret(KEY)


def test_a_hosted_turn_model_with_a_local_summarizer(tmp_path: Path) -> None:
    write(tmp_path, '[memory]\nprovider = "ollama"\n')
    message = error_of(tmp_path, {"ANTHROPIC_API_KEY": KEY})
    assert "the compactor's provider 'ollama' needs a model" in message
    write(tmp_path, '[memory]\nprovider = "ollama"\nmodel = "qwen3:8b"\n')
    config = load_config(tmp_path, {"ANTHROPIC_API_KEY": KEY})
    assert config.memory_base_url == "http://localhost:11434/v1"
    assert config.memory_api_key is None  # the Anthropic key is not sent to the local server
    assert (config.memory.concurrency, config.memory.yield_to_turns) == (1, False)


def test_a_second_local_server_for_the_compactor(tmp_path: Path) -> None:
    """Same kind of server at another address: its own model, one call at a time, no lane."""
    write(
        tmp_path,
        'provider = "llamacpp"\nmodel = "big"\n[memory]\nbase_url = "http://localhost:8081/v1"\n'
        'model = "small"\n',
    )
    config = load_config(tmp_path, {})
    assert config.memory_provider == "llamacpp" and not config.memory_shares_server
    assert config.memory_base_url == "http://localhost:8081/v1"
    assert (config.memory.concurrency, config.memory.yield_to_turns) == (1, False)


def test_the_compactor_follows_the_turns_server_by_default(tmp_path: Path) -> None:
    write(tmp_path, 'provider = "vllm"\nmodel = "m"\nbase_url = "http://gpu:8000/v1"\n')
    config = load_config(tmp_path, {})
    assert config.memory_shares_server and config.memory_base_url == "http://gpu:8000/v1"
    assert config.memory_api_key is None and config.memory.yield_to_turns


def test_a_switch_by_environment_keeps_a_compactor_of_its_own(tmp_path: Path) -> None:
    write(
        tmp_path,
        'provider = "anthropic"\nbase_url = "https://proxy.example"\n[memory]\n'
        'provider = "anthropic"\nmodel = "claude-haiku-5-5"\nbase_url = "https://memory.example"\n',
    )
    env = {"EVERTALK_PROVIDER": "llamacpp", "EVERTALK_MODEL": "smol", "ANTHROPIC_API_KEY": KEY}
    config = load_config(tmp_path, env)
    assert config.base_url == "http://localhost:8080/v1"  # the file's belongs to anthropic
    assert (config.memory.model, config.memory_base_url) == (
        "claude-haiku-5-5",
        "https://memory.example",
    )
    assert config.memory_api_key == Secret(KEY)


def test_saving_a_local_config_does_not_pin_its_defaults(tmp_path: Path) -> None:
    write(tmp_path, 'provider = "llamacpp"\nmodel = "smol"\n')
    save_config(tmp_path, load_config(tmp_path, {}))
    assert tomllib.loads((tmp_path / "config.toml").read_text()) == {
        "provider": "llamacpp",
        "model": "smol",
    }


def test_the_compactors_settings_round_trip(tmp_path: Path) -> None:
    config = Config(
        provider="llamacpp",
        model="smol",
        base_url="http://localhost:8080/v1",
        memory=MemoryConfig(
            "qwen",
            provider="ollama",
            base_url="http://box:11434/v1",
            concurrency=2,
            yield_to_turns=True,
            min_shared_words=0.25,
            max_tokens=4_000,
        ),
    )
    save_config(tmp_path, config)
    assert load_config(tmp_path, {}) == config


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ('[memory]\nprovider = "gemini"', "`memory.provider` must be one of anthropic"),
        ('[memory]\nbase_url = "localhost"', "`memory.base_url` must be an http://"),
        ('[memory]\nyield_to_turns = "yes"', "`memory.yield_to_turns` must be true or false"),
        ("[memory]\nmin_shared_words = 1.5", "`memory.min_shared_words` must be a share from 0"),
        ("[memory]\nmin_shared_words = true", "`memory.min_shared_words` must be a share"),
        ("[memory]\nmax_tokens = 100", "`memory.max_tokens` must be a whole number of tokens >="),
        ("[memory]\nmax_tokens = 2000.0", "`memory.max_tokens` must be a whole number"),
    ],
)
def test_bad_compactor_values(tmp_path: Path, text: str, expected: str) -> None:
    path = write(tmp_path, text + "\n")
    assert error_of(tmp_path).startswith(f"{path}: {expected}")


def test_a_bad_variable_is_named(tmp_path: Path) -> None:
    assert error_of(tmp_path, {"EVERTALK_PROVIDER": "gemini"}).startswith(
        "EVERTALK_PROVIDER: `provider` must be one of"
    )
    assert error_of(tmp_path, {"ANTHROPIC_BASE_URL": "nope"}).startswith(
        "ANTHROPIC_BASE_URL: `base_url` must be an http"
    )
    assert error_of(tmp_path, {"EVERTALK_MODEL": " padded "}).startswith(
        "EVERTALK_MODEL: `model` must be a model name"
    )


def test_an_unreadable_file_is_a_config_error(tmp_path: Path) -> None:
    write(tmp_path, "")
    (tmp_path / "config.toml").write_bytes(b'model = "\xff"\n')
    assert "not UTF-8" in error_of(tmp_path)


# --- the key never shows ---------------------------------------------------------------------


def test_secret_shows_nothing() -> None:
    secret = Secret(KEY)
    assert repr(secret) == str(secret) == f"{secret}" == "Secret('***')"
    assert KEY not in f"{secret!r} {secret!s} {[secret]} { ({'k': secret}) }"
    assert secret.reveal() == KEY
    assert secret == Secret(KEY) and secret != Secret("other") and hash(secret) == hash(Secret(KEY))


def test_the_key_is_not_in_the_configs_repr_or_str(tmp_path: Path) -> None:
    write(tmp_path, f'api_key = "{KEY}"\n')
    config = load_config(tmp_path, {"OPENAI_API_KEY": KEY + "-openai"})
    shown = repr(config) + str(config) + f"{config}" + repr(config.origin)
    assert "SECRET" not in shown and "Secret('***')" in shown


@pytest.mark.parametrize(
    "text",
    [
        f'api_key = "{KEY}"\nprovider = "antropic"\n',  # a bad value on the next line
        f'api_key = "{KEY}\n',  # an unterminated string
        f"api_key = {KEY}\n",  # no quotes
        f'api_key = "{KEY}\x01"\n',  # a control character inside the key
        f'api_key = "{KEY}"\napi_key = "{KEY}"\n',  # twice
        f'api_key = ["{KEY}"]\n',  # wrong type
        f'[memory]\napi_key = "{KEY}"\n',  # in the wrong table
        f'base_url = "{KEY}"\n',  # in the wrong setting
        f'model = "{KEY} "\n',
        f'[tools]\nshell = "{KEY}"\n',
    ],
)
def test_errors_near_the_key_do_not_repeat_it(tmp_path: Path, text: str) -> None:
    write(tmp_path, text)
    message = error_of(tmp_path)
    assert "SECRET" not in message, message


def test_a_traceback_does_not_show_the_key(tmp_path: Path) -> None:
    write(tmp_path, f'api_key = "{KEY}"\n[tools]\nshell = "sometimes"\n')
    script = "import sys; from pathlib import Path; from evertalk.config import load_config; "
    script += "load_config(Path(sys.argv[1]), {})"
    result = subprocess.run(
        [sys.executable, "-c", script, str(tmp_path)], capture_output=True, text=True
    )
    assert result.returncode == 1 and "ConfigError" in result.stderr
    assert "SECRET" not in result.stderr + result.stdout


# --- saving ----------------------------------------------------------------------------------


def test_save_is_private_and_atomic(tmp_path: Path, hostile_umask: None) -> None:
    home = tmp_path / "new" / "home"
    save_config(home, Config(provider="openai", api_key=Secret(KEY)))
    assert home.stat().st_mode & 0o777 == 0o700
    assert (tmp_path / "new").stat().st_mode & 0o777 == 0o700
    assert (home / "config.toml").stat().st_mode & 0o777 == 0o600
    assert [p.name for p in home.iterdir()] == ["config.toml"]  # no temporary file left
    # Replacing a file that someone made readable by others leaves a private one.
    (home / "config.toml").chmod(0o644)
    save_config(home, Config(provider="openai"))
    assert (home / "config.toml").stat().st_mode & 0o777 == 0o600


def test_round_trip(tmp_path: Path) -> None:
    config = Config(
        provider="openrouter",
        model='vendor/model "quoted" \\ \t name',
        base_url="https://openrouter.example/api/v1",
        api_key=Secret(KEY),
        memory=MemoryConfig("vendor/small", "max", 0.25, 6, 1200),
        turn=TurnConfig("low"),
        tools=ToolPolicies(shell="allow", read="deny", write="deny", edit="allow"),
    )
    save_config(tmp_path, config)
    assert load_config(tmp_path, {}) == config
    loaded = load_config(tmp_path, {})
    save_config(tmp_path, loaded)
    assert load_config(tmp_path, {}) == config


def test_a_default_config_saves_as_just_the_provider(tmp_path: Path) -> None:
    save_config(tmp_path, Config())
    text = (tmp_path / "config.toml").read_text()
    assert tomllib.loads(text) == {"provider": "anthropic"}


def test_saving_a_loaded_config_writes_only_the_users_settings(tmp_path: Path) -> None:
    write(tmp_path, 'model = "claude-opus-5-5"\n[memory]\nconcurrency = 4\n')
    env = {
        "ANTHROPIC_API_KEY": KEY,
        "EVERTALK_MODEL": "claude-fable-5-1",
        "ANTHROPIC_BASE_URL": "http://127.0.0.1:1",
    }
    loaded = load_config(tmp_path, env)
    changed = replace(loaded, tools=replace(loaded.tools, shell="allow"))
    save_config(tmp_path, changed)
    text = (tmp_path / "config.toml").read_text()
    assert "SECRET" not in text  # a key from the environment is never written
    assert tomllib.loads(text) == {
        "model": "claude-opus-5-5",  # the file's value, not the environment's
        "memory": {"concurrency": 4},
        "tools": {"shell": "allow"},
    }


def test_saving_after_a_provider_switch_keeps_the_files_settings(tmp_path: Path) -> None:
    original = f'provider = "anthropic"\nmodel = "claude-opus-5-5"\napi_key = "{KEY}"\n'
    write(tmp_path, original)
    save_config(tmp_path, load_config(tmp_path, {"EVERTALK_PROVIDER": "openai"}))
    assert tomllib.loads((tmp_path / "config.toml").read_text()) == tomllib.loads(original)


def test_saving_checks_the_values(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"tools\.shell"):
        save_config(tmp_path, Config(tools=ToolPolicies(shell="maybe")))  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="`model`"):
        save_config(tmp_path, Config(provider="ollama"))
    assert not (tmp_path / "config.toml").exists()


# --- saving changes the file, comments and all -------------------------------------------------

README = Path(__file__).resolve().parents[1] / "README.md"


def readme_example() -> str:
    """The config.toml that the README shows, comments and all."""
    found = re.search(r"```toml\n(.*?)```", README.read_text(encoding="utf-8"), re.DOTALL)
    assert found is not None
    return found.group(1)


def test_a_model_change_leaves_the_readmes_example_as_written(tmp_path: Path) -> None:
    example = readme_example()
    write(tmp_path, example)
    model = load_config(tmp_path, {}).model
    save_models(tmp_path, model="claude-opus-5-5")  # as /model does
    line = next(line for line in example.splitlines() if line.startswith("model = "))
    changed = line.replace(f'"{model}"', '"claude-opus-5-5"')
    assert (tmp_path / "config.toml").read_text() == example.replace(line, changed, 1)
    assert load_config(tmp_path, {}).model == "claude-opus-5-5"
    assert (tmp_path / "config.toml").stat().st_mode & 0o777 == 0o600


def test_setup_keeps_every_comment_and_reads_back_what_it_saved(tmp_path: Path) -> None:
    example = readme_example()
    write(tmp_path, example)
    loaded = load_config(tmp_path, {})
    changed = replace(
        loaded,
        base_url="https://proxy.example/v1",
        api_key=Secret(KEY),
        memory=replace(loaded.memory, effort="low"),
        turn=replace(loaded.turn, context_window=64_000),
    )
    save_config(tmp_path, changed)  # as /setup does
    text = (tmp_path / "config.toml").read_text()
    comments = [line for line in example.splitlines() if line.lstrip().startswith("#")]
    assert comments and [line for line in text.splitlines() if line in comments] == comments
    assert load_config(tmp_path, {}) == changed
    assert text.count("\n") == example.count("\n") + 3  # base_url, api_key, context_window


def test_a_table_evertalk_does_not_know_is_kept(tmp_path: Path) -> None:
    original = (
        "# my settings\n"
        'provider = "anthropic"  # for now\n'
        "\n"
        "# read by my wrapper script, not by evertalk\n"
        "[wrapper]\n"
        'theme = "dark"  # its colours\n'
        "retries = 3\n"
        "\n"
        "[tools]\n"
        "# the shell without asking\n"
        'shell = "allow"\n'
    )
    write(tmp_path, original)
    config = Config(
        provider="openai", model="gpt-5.6-sol", api_key=Secret(KEY), tools=ToolPolicies("allow")
    )
    save_config(tmp_path, config)
    text = (tmp_path / "config.toml").read_text()
    kept = [line for line in original.splitlines() if "#" in line or "wrapper" in line]
    kept += ['theme = "dark"  # its colours', "retries = 3"]
    assert all(line in text.splitlines() for line in kept if "anthropic" not in line)
    assert 'provider = "openai"  # for now' in text.splitlines()
    assert tomllib.loads(text) == {
        "provider": "openai",
        "model": "gpt-5.6-sol",
        "api_key": KEY,
        "wrapper": {"theme": "dark", "retries": 3},
        "tools": {"shell": "allow"},
    }
    assert (tmp_path / "config.toml").stat().st_mode & 0o777 == 0o600


def test_a_file_that_is_not_toml_is_not_overwritten(tmp_path: Path) -> None:
    path = write(tmp_path, f'api_key = "{KEY}\nmodel = "claude-opus-5-5"\n')
    before = path.read_bytes()
    with pytest.raises(ConfigError) as caught:
        save_config(tmp_path, Config(model="claude-sonnet-5-5"))
    message = str(caught.value)
    assert message.startswith(f"{path}: not valid TOML (line ") and "SECRET" not in message
    assert path.read_bytes() == before


@given(st.text(min_size=1).filter(lambda name: name == name.strip()))
def test_any_model_name_round_trips(name: str) -> None:
    """The file is TOML that tomllib reads back as written: quotes, backslashes, control
    characters and any other character in a value."""
    with tempfile.TemporaryDirectory() as folder:
        save_config(Path(folder), Config(provider="openrouter", model=name))
        assert load_config(Path(folder), {}).model == name
