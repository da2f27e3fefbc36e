"""The first run: the setup form saves a provider to config.toml (0600); and a chat open in
another process is refused before any screen is drawn."""

from __future__ import annotations

from pathlib import Path

import pytest
from textual.widgets import Input, Select, Static

from evertalk.agent.session import configuration_problem
from evertalk.chat import Chat
from evertalk.config import Config, MemoryConfig, load_config
from evertalk.tui.app import run_terminal
from evertalk.tui.setup import SetupApp, SetupError, build_config

KEY = "sk-ant-setup-0123456789"


def test_build_config_checks_the_answers() -> None:
    current = Config(memory=MemoryConfig(model="claude-haiku-5-5", effort="low"))
    with pytest.raises(SetupError, match="API key"):
        build_config(current, "anthropic", "", "", "")
    with pytest.raises(SetupError, match="model your server runs"):
        build_config(current, "ollama", "", "", "http://localhost:11434/v1")
    with pytest.raises(SetupError, match="http"):
        build_config(current, "openai", "", "k", "localhost:1234")
    same = build_config(current, "anthropic", "", KEY, "")
    assert same.model == "claude-sonnet-5-5" and same.memory.effort == "low"
    assert same.api_key is not None and same.api_key.reveal() == KEY
    other = build_config(current, "openai", "", "sk-openai", "")
    assert other.memory.model == "gpt-5.6-luna" and other.memory.effort == "low"
    local = build_config(current, "ollama", "qwen3:8b", "", "http://127.0.0.1:11434/v1")
    assert local.memory.model == "qwen3:8b" and local.api_key is None


@pytest.mark.anyio
async def test_the_form_saves_a_key_privately(tmp_path: Path) -> None:
    home = tmp_path / "home"
    assert configuration_problem(home, load_config(home)) is not None
    app = SetupApp(home, load_config(home))
    async with app.run_test(size=(100, 36)) as pilot:
        await pilot.press("ctrl+s")  # nothing typed yet
        assert "API key" in str(app.query_one("#problem", Static).render())
        assert app.is_running
        app.query_one("#key", Input).focus()
        await pilot.press(*KEY)
        await pilot.press("enter")
        await pilot.pause()
    assert app.return_value is True
    config = load_config(home)
    assert config.provider == "anthropic" and config.api_key is not None
    assert config.api_key.reveal() == KEY
    assert (home / "config.toml").stat().st_mode & 0o777 == 0o600
    assert home.stat().st_mode & 0o777 == 0o700
    assert configuration_problem(home, config) is None


@pytest.mark.anyio
async def test_a_local_server_needs_a_model_and_an_address(tmp_path: Path) -> None:
    home = tmp_path / "home"
    app = SetupApp(home)
    async with app.run_test(size=(100, 36)) as pilot:
        app.query_one("#provider", Select).value = "ollama"
        await pilot.pause()
        assert app.query_one("#url", Input).value == "http://localhost:11434/v1"
        assert app.query_one("#key").has_class("hidden")
        app.query_one("#model", Input).focus()
        await pilot.press(*"qwen3:8b", "enter")
        await pilot.pause()
    assert app.return_value is True
    config = load_config(home)
    assert (config.provider, config.model, config.base_url) == (
        "ollama",
        "qwen3:8b",
        "http://localhost:11434/v1",
    )


@pytest.mark.anyio
async def test_leaving_the_form_saves_nothing(tmp_path: Path) -> None:
    app = SetupApp(tmp_path / "home")
    async with app.run_test() as pilot:
        await pilot.press("escape")
    assert app.return_value is False
    assert not (tmp_path / "home" / "config.toml").exists()


def test_a_chat_open_elsewhere_is_refused_before_the_app_starts(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    home = tmp_path / "home"
    home.mkdir()
    (home / "config.toml").write_text(f'api_key = "{KEY}"\n')
    with Chat.open(home / "chat"):  # the lock is per open file: this process is "elsewhere"
        assert run_terminal(home) == 1
    err = capsys.readouterr().err
    assert err.startswith("evertalk: the chat at ") and "is open in another process (pid " in err
    assert "close the other one first" in err and KEY not in err
    assert len(err.strip().splitlines()) == 1
