"""The setup form: on the first run it saves a provider to config.toml (0600); `/setup` shows it
over the chat, filled in but for the key, and the chat goes on with the new settings. And a chat
open in another process is refused before any screen is drawn."""

from __future__ import annotations

import socket
import tomllib
from contextlib import AbstractAsyncContextManager
from pathlib import Path

import pytest
from textual.app import App
from textual.pilot import Pilot
from textual.widgets import Input, Select, Static
from tui_support import (
    API_KEY,
    MODEL,
    agent_of,
    enter_line,
    fake_opener,
    log_of,
    running,
    script,
    turn_models,
    wait_until,
    write_config,
)

from evertalk.agent.session import Agent, NotConfigured, configuration_problem
from evertalk.chat import Chat
from evertalk.config import Config, MemoryConfig, TurnConfig, load_config
from evertalk.service.server import Service
from evertalk.tui import run_terminal
from evertalk.tui.app import ChatApp
from evertalk.tui.setup import SetupApp, SetupError, SetupScreen, build_config, parse_window
from evertalk.tui.turn_rows import KEY_HINT
from evertalk.tui.widgets import NoteRow, OutputRow, ReplyView
from fakes import AnthropicFake, OpenAIFake, serve, slow
from fakes import chat as answer
from providers.test_server_info import QWEN_INFO, ollama
from providers.test_server_info import running as raw_server

KEY = "sk-ant-setup-0123456789"


async def form_of(pilot: Pilot[bool]) -> None:
    """Until the form is up (the app pushes it once mounted)."""
    while not isinstance(pilot.app.screen, SetupScreen):
        await pilot.pause(0.02)


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


def test_the_context_window_is_checked_and_set_in_turn() -> None:
    assert parse_window("") is None and parse_window(" 32768 ") == 32_768
    assert parse_window("32,768") == parse_window("32_768") == 32_768
    with pytest.raises(SetupError, match=r"too small: at least 8,000"):
        parse_window("4096")
    for bad in ("32k", "-9000", "1e5", "12,34"):
        with pytest.raises(SetupError, match="a number of tokens"):
            parse_window(bad)
    current = Config(turn=TurnConfig(context_window=50_000, tools="off"))
    url = "http://127.0.0.1:8080/v1"
    local = build_config(current, "llamacpp", "m", "", url, window="16384")
    assert local.turn == TurnConfig(context_window=16_384, tools="off")
    assert build_config(current, "llamacpp", "m", "", url, window="").turn.context_window is None
    kept = build_config(current, "openai", "", "sk-openai", "")  # no window asked: as it was
    assert kept.turn == current.turn


def test_an_empty_key_keeps_the_key_in_use_for_the_same_provider_only() -> None:
    current = build_config(Config(), "anthropic", "", KEY, "")
    kept = build_config(current, "anthropic", "claude-opus-5-5", "", "", keep_key=True)
    assert kept.api_key is not None and kept.api_key.reveal() == KEY
    assert kept.model == "claude-opus-5-5"
    with pytest.raises(SetupError, match="API key"):  # another provider's key is not sent
        build_config(current, "openai", "", "", "", keep_key=True)
    with pytest.raises(SetupError, match="API key"):  # the first run has no key to keep
        build_config(current, "anthropic", "", "", "")


@pytest.mark.anyio
async def test_the_form_saves_a_key_privately(tmp_path: Path) -> None:
    home = tmp_path / "home"
    assert configuration_problem(home, load_config(home)) is not None
    app = SetupApp(home, load_config(home))
    async with app.run_test(size=(100, 36)) as pilot:
        await form_of(pilot)
        for local_only in ("#window", "#test", "#status", "#models"):  # a cloud provider's form
            assert app.screen.query_one(local_only).has_class("hidden")
        await pilot.press("ctrl+s")  # nothing typed yet
        assert "API key" in str(app.screen.query_one("#problem", Static).render())
        assert app.is_running
        app.screen.query_one("#key", Input).focus()
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
    with serve(OpenAIFake(models=["qwen3:8b"])) as url:
        async with app.run_test(size=(100, 36)) as pilot:
            await form_of(pilot)
            form = app.screen
            form.query_one("#provider", Select).value = "ollama"
            await pilot.pause()
            assert form.query_one("#url", Input).value == "http://localhost:11434/v1"
            assert form.query_one("#key").has_class("hidden")
            form.query_one("#url", Input).value = f"{url}/v1"
            form.query_one("#model", Input).focus()
            await pilot.press(*"qwen3:8b", "enter")  # the server serves it: saved at once
            await wait_until(pilot, lambda: not app.is_running)
    assert app.return_value is True
    config = load_config(home)
    assert (config.provider, config.model, config.base_url) == ("ollama", "qwen3:8b", f"{url}/v1")
    assert config.turn.context_window is None


@pytest.mark.anyio
async def test_leaving_the_form_saves_nothing(tmp_path: Path) -> None:
    app = SetupApp(tmp_path / "home")
    async with app.run_test() as pilot:
        await form_of(pilot)
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


# -- /setup in the chat -----------------------------------------------------------------------

WRONG_KEY = "sk-ant-expired-9876543210"


def chat_of(pilot: Pilot[int]) -> ChatApp:
    app = pilot.app
    assert isinstance(app, ChatApp)
    return app


def notes(app: ChatApp) -> list[str]:
    return [row.text for row in app.query(NoteRow)]


async def open_form(pilot: Pilot[int]) -> SetupScreen:
    await enter_line(pilot, "/setup")
    await wait_until(pilot, lambda: isinstance(pilot.app.screen, SetupScreen))
    form = pilot.app.screen
    assert isinstance(form, SetupScreen)
    return form


@pytest.mark.anyio
async def test_setup_in_the_chat_fixes_a_refused_key(tmp_path: Path) -> None:
    home = tmp_path / "home"
    write_config(home, api_key=WRONG_KEY)
    fake = AnthropicFake(script().push(answer("Hello again.")), api_key=API_KEY)
    async with running(home, fake) as pilot:
        app = chat_of(pilot)
        await enter_line(pilot, "hi")
        await wait_until(pilot, lambda: KEY_HINT in notes(app))
        assert any("invalid x-api-key" in note for note in notes(app))
        first = agent_of(app)

        form = await open_form(pilot)
        assert form.query_one("#provider", Select).value == "anthropic"
        assert form.query_one("#model", Input).value == MODEL
        key = form.query_one("#key", Input)
        assert key.value == "" and key.password  # the key in use is never shown
        assert key.placeholder == "empty: keep the key in use"
        key.focus()
        await pilot.press(*API_KEY, "ctrl+s")
        await wait_until(pilot, lambda: any(n.startswith("settings applied") for n in notes(app)))
        assert notes(app)[-1] == f"settings applied: anthropic, model {MODEL}"
        assert agent_of(app) is not first

        await enter_line(pilot, "hi again")
        await wait_until(
            pilot,
            lambda: [view.source for view in app.query(ReplyView)][-1:] == ["Hello again."],
        )
    saved = tomllib.loads((home / "config.toml").read_text())
    assert saved["api_key"] == API_KEY and saved["model"] == MODEL
    assert (home / "config.toml").stat().st_mode & 0o777 == 0o600
    log = log_of(home)
    assert log[0] == ("user", "hi") and log[-2:] == [("user", "hi again"), ("ever", "Hello again.")]


@pytest.mark.anyio
async def test_setup_keeps_the_key_and_waits_for_the_turn(tmp_path: Path) -> None:
    home = tmp_path / "home"
    write_config(home)
    fake = AnthropicFake(script().push(slow(1.5, answer("Slow.")), answer("Fast.")))
    async with running(home, fake) as pilot:
        app = chat_of(pilot)
        await enter_line(pilot, "take your time")
        await wait_until(pilot, lambda: agent_of(app).busy)
        await enter_line(pilot, "/setup")  # the agent is closed to apply settings: not now
        await wait_until(pilot, lambda: app.query(OutputRow))
        assert app.query(OutputRow).last().text.startswith("a turn is running: /setup once")
        assert not isinstance(app.screen, SetupScreen)
        await wait_until(pilot, lambda: not agent_of(app).busy, timeout=20)

        form = await open_form(pilot)
        await pilot.press("escape")
        await wait_until(pilot, lambda: "setup left: nothing changed" in notes(app))
        assert app.screen is not form

        form = await open_form(pilot)
        model = form.query_one("#model", Input)
        model.value = "claude-opus-5-5"
        model.focus()
        await pilot.press("enter")  # the key field left empty: the key in use is kept
        await wait_until(pilot, lambda: any(n.startswith("settings applied") for n in notes(app)))
        assert agent_of(app).model == "claude-opus-5-5"
        await enter_line(pilot, "and now?")
        await wait_until(pilot, lambda: not agent_of(app).busy and len(app.query(ReplyView)) == 2)
    saved = tomllib.loads((home / "config.toml").read_text())
    assert saved["api_key"] == API_KEY and saved["model"] == "claude-opus-5-5"
    assert turn_models(fake) == [MODEL, "claude-opus-5-5"]


@pytest.mark.anyio
async def test_settings_the_service_cannot_open_are_said_in_the_chat(tmp_path: Path) -> None:
    home = tmp_path / "home"
    write_config(home)
    opener = fake_opener(home, AnthropicFake(script()))
    opened: list[Service] = []

    def first_only(service: Service) -> AbstractAsyncContextManager[Agent]:
        if opened:
            raise NotConfigured("no provider is configured: the test says so")
        opened.append(service)
        return opener(service)

    async with running(home, AnthropicFake(script()), opener=first_only) as pilot:
        app = chat_of(pilot)
        await open_form(pilot)
        await pilot.press("ctrl+s")  # as it is: the key in use is kept
        why = "cannot open the chat with the new settings: no provider is configured: the test says"
        await wait_until(pilot, lambda: any(why in note for note in notes(app)))
        await wait_until(pilot, lambda: any("cannot reach the service" in n for n in notes(app)))
        assert app.is_running  # the window stays, and connects once a service can start


class ChangeApp(App[bool]):
    """The form as `/setup` shows it (filled in with the settings in use), alone."""

    def __init__(self, home: Path) -> None:
        super().__init__()
        self.home = home

    def on_mount(self) -> None:
        form = SetupScreen(self.home, load_config(self.home), change=True)
        self.push_screen(form, callback=self.exit)


@pytest.mark.anyio
async def test_another_provider_does_not_keep_the_old_ones_address(tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    server = "http://127.0.0.1:9/v1"
    (home / "config.toml").write_text(
        f'provider = "ollama"\nmodel = "qwen3:8b"\nbase_url = "{server}"\n'
    )
    app = ChangeApp(home)
    async with app.run_test(size=(100, 36)) as pilot:
        await form_of(pilot)
        form = app.screen
        provider, url = form.query_one("#provider", Select), form.query_one("#url", Input)

        async def choose(name: str) -> None:
            provider.value = name
            await pilot.pause()

        assert url.value == server
        await choose("anthropic")
        assert url.value == "" and url.placeholder == "empty: the provider's own"
        await choose("ollama")  # back: the address in use
        assert url.value == server
        await choose("openrouter")
        assert url.value == "" and url.placeholder == "empty: https://openrouter.ai/api/v1"
        url.focus()
        await pilot.press(*"https://proxy.example/v1")
        await choose("openai")  # typed in this form: it stays
        assert url.value == "https://proxy.example/v1"
        url.value = ""
        await choose("anthropic")
        form.query_one("#key", Input).focus()
        await pilot.press(*KEY, "ctrl+s")
        await pilot.pause()
    assert app.return_value is True
    config = load_config(home)
    assert (config.provider, config.base_url) == ("anthropic", None)
    assert "base_url" not in tomllib.loads((home / "config.toml").read_text())


@pytest.mark.anyio
async def test_the_forms_error_goes_once_an_answer_changes(tmp_path: Path) -> None:
    app = SetupApp(tmp_path / "home")
    async with app.run_test(size=(100, 36)) as pilot:
        await form_of(pilot)
        app.screen.query_one("#provider", Select).value = "ollama"
        await pilot.pause()
        await pilot.press("ctrl+s")
        await pilot.pause()
        problem = app.screen.query_one("#problem", Static)
        assert problem.has_class("shown")
        assert "name the model your server runs" in str(problem.render())
        app.screen.query_one("#model", Input).focus()
        await pilot.press("q")
        await pilot.pause()
        assert not problem.has_class("shown")
        await pilot.press("escape")


# -- a local server: the connection test, its models and window ------------------------------


def closed_port() -> int:
    """A loopback port nothing listens on (bound, then let go)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
    return port


def text_of(form: SetupScreen, name: str) -> str:
    return str(form.query_one(name, Static).render())


def shown_problem(form: SetupScreen) -> str:
    problem = form.query_one("#problem", Static)
    return str(problem.render()) if problem.has_class("shown") else ""


async def local_form(pilot: Pilot[bool], provider: str, url: str) -> SetupScreen:
    await form_of(pilot)
    form = pilot.app.screen
    assert isinstance(form, SetupScreen)
    form.query_one("#provider", Select).value = provider
    await pilot.pause()
    form.query_one("#url", Input).value = url
    return form


@pytest.mark.anyio
async def test_the_test_button_lists_the_models_and_fills_the_window(tmp_path: Path) -> None:
    home = tmp_path / "home"
    served = ["qwen3-8b", "llama-3.1-8b", "phi-4", "gemma-3"]
    windows = {"qwen3-8b": 32_768, "llama-3.1-8b": 65_536}
    app = SetupApp(home)
    with serve(OpenAIFake(models=served, max_model_len=windows)) as url:
        async with app.run_test(size=(100, 40)) as pilot:
            form = await local_form(pilot, "vllm", f"{url}/v1")
            model, window = form.query_one("#model", Input), form.query_one("#window", Input)
            models = form.query_one("#models", Select)
            assert not form.query_one("#test").has_class("hidden") and models.has_class("hidden")
            assert model.value == window.value == ""
            await pilot.press("ctrl+t")
            await wait_until(pilot, lambda: text_of(form, "#status").startswith("connected"))
            assert text_of(form, "#status") == (
                "connected: 4 models (qwen3-8b, llama-3.1-8b, phi-4, …); "
                "window 32,768 tokens, from vLLM's max_model_len"
            )
            assert (model.value, window.value) == ("qwen3-8b", "32768")
            assert not models.has_class("hidden") and models.value == "qwen3-8b"

            models.focus()  # the keyboard picks the next model: its window comes with it
            await pilot.press("enter", "down", "enter")
            await wait_until(pilot, lambda: model.value == "llama-3.1-8b")
            assert window.value == "65536"
            assert text_of(form, "#status") == (
                "llama-3.1-8b chosen; window 65,536 tokens, from vLLM's max_model_len"
            )
            await pilot.press("ctrl+s")  # the server serves it as set: saved at once
            await wait_until(pilot, lambda: not app.is_running)
    assert app.return_value is True
    saved = tomllib.loads((home / "config.toml").read_text())
    assert saved["provider"] == "vllm" and saved["model"] == "llama-3.1-8b"
    assert saved["turn"] == {"context_window": 65_536}


@pytest.mark.anyio
async def test_a_server_that_is_not_there_is_saved_only_when_asked_twice(tmp_path: Path) -> None:
    home = tmp_path / "home"
    base = f"http://127.0.0.1:{closed_port()}/v1"
    app = SetupApp(home)
    async with app.run_test(size=(100, 40)) as pilot:
        form = await local_form(pilot, "llamacpp", base)
        form.query_one("#model", Input).value = "qwen3-8b"
        form.query_one("#window", Input).value = "8192"
        refused = f"no server answers at {base}: is it running? Save again to save anyway."

        await pilot.press("ctrl+s")
        await wait_until(pilot, lambda: shown_problem(form) == refused)
        assert app.is_running and not (home / "config.toml").exists()

        form.query_one("#window", Input).value = "16384"  # another answer: asked again
        await wait_until(pilot, lambda: not shown_problem(form))
        await pilot.press("ctrl+s")
        await wait_until(pilot, lambda: shown_problem(form) == refused)
        assert app.is_running and not (home / "config.toml").exists()

        await pilot.press("ctrl+s")  # the same answers again: saved as they are
        await wait_until(pilot, lambda: not app.is_running)
    assert app.return_value is True
    saved = tomllib.loads((home / "config.toml").read_text())
    assert (saved["provider"], saved["model"], saved["base_url"]) == ("llamacpp", "qwen3-8b", base)
    assert saved["turn"] == {"context_window": 16_384}


@pytest.mark.anyio
async def test_a_model_the_server_lacks_is_refused_once_naming_its_models(tmp_path: Path) -> None:
    home = tmp_path / "home"
    app = SetupApp(home)
    with serve(OpenAIFake(models=["qwen3-8b", "phi-4"])) as url:
        async with app.run_test(size=(100, 40)) as pilot:
            form = await local_form(pilot, "vllm", f"{url}/v1")
            form.query_one("#model", Input).value = "qwen3-32b"
            await pilot.press("ctrl+s")
            await wait_until(pilot, lambda: bool(shown_problem(form)))
            assert shown_problem(form) == (
                "the server does not serve qwen3-32b: it has qwen3-8b, phi-4. "
                "Save again to save anyway."
            )
            assert not form.query_one("#models", Select).has_class("hidden")  # to pick from
            assert app.is_running and not (home / "config.toml").exists()
            await pilot.press("ctrl+s")
            await wait_until(pilot, lambda: not app.is_running)
    assert load_config(home).model == "qwen3-32b"


@pytest.mark.anyio
async def test_a_window_too_small_or_not_a_number_is_refused(tmp_path: Path) -> None:
    home = tmp_path / "home"
    app = SetupApp(home)
    async with app.run_test(size=(100, 40)) as pilot:
        form = await local_form(pilot, "ollama", f"http://127.0.0.1:{closed_port()}/v1")
        form.query_one("#model", Input).value = "qwen3:8b"
        window = form.query_one("#window", Input)
        window.focus()
        await pilot.press(*"4096", "enter")
        await wait_until(pilot, lambda: bool(shown_problem(form)))
        assert shown_problem(form) == (
            "a context window of 4,096 tokens is too small: at least 8,000 "
            "(the system prompt and the chat's view need room)"
        )
        await pilot.press("ctrl+u", *"32k", "ctrl+s")
        await wait_until(pilot, lambda: "32k" in shown_problem(form))
        assert shown_problem(form) == (
            "the context window is a number of tokens (e.g. 32768), not '32k'"
        )
        await pilot.press("ctrl+s")  # refused before any server is asked: never saved
        await pilot.pause(0.2)
        assert app.is_running and not (home / "config.toml").exists()
        await pilot.press("escape")
    assert app.return_value is False


@pytest.mark.anyio
async def test_setup_over_the_chat_checks_the_window_against_the_server(tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    key = "sk-local-server-key-12345"
    fake = OpenAIFake(models=["smol"], props_n_ctx=8_192, api_key=key)
    with serve(fake) as url:
        (home / "config.toml").write_text(
            f'provider = "llamacpp"\nmodel = "smol"\nbase_url = "{url}/v1"\n'
            f'api_key = "{key}"\n\n[turn]\ncontext_window = 16384\ntools = "off"\n'
        )
        (home / "config.toml").chmod(0o600)
        app = ChangeApp(home)
        async with app.run_test(size=(100, 40)) as pilot:
            await form_of(pilot)
            form = app.screen
            assert isinstance(form, SetupScreen)
            window = form.query_one("#window", Input)
            assert window.value == "16384"  # the window in use
            await pilot.press("ctrl+t")  # the key in use is sent: the server answers
            await wait_until(pilot, lambda: text_of(form, "#status").startswith("connected"))
            assert text_of(form, "#status") == (
                "connected: 1 model (smol); "
                "it runs with 8,192 tokens (the server's n_ctx in /props)"
            )
            assert window.value == "16384"  # typed by the user: said, not overwritten

            window.value = ""  # empty: the default, far more than the server runs with
            await pilot.press("ctrl+s")
            await wait_until(pilot, lambda: bool(shown_problem(form)))
            assert shown_problem(form) == (
                "smol runs with 8,192 tokens (the server's n_ctx in /props) and the window is "
                "empty (200,000, the default): a longer prompt would fail; type 8192. "
                "Save again to save anyway."
            )
            assert app.is_running
            await pilot.press("ctrl+s")
            await wait_until(pilot, lambda: not app.is_running)
    assert app.return_value is True
    saved = tomllib.loads((home / "config.toml").read_text())
    assert saved["turn"] == {"tools": "off"} and saved["api_key"] == key


@pytest.mark.anyio
async def test_ollamas_model_maximum_is_said_not_filled_in(tmp_path: Path) -> None:
    app = SetupApp(tmp_path / "home")
    with raw_server(ollama(QWEN_INFO)) as server:
        async with app.run_test(size=(100, 40)) as pilot:
            form = await local_form(pilot, "ollama", server.base)
            await pilot.press("ctrl+t")
            await wait_until(pilot, lambda: text_of(form, "#status").startswith("connected"))
            assert text_of(form, "#status") == (
                "connected: 2 models (qwen3:8b, llama3.2:latest); it supports 40,960 tokens "
                "(the model's context_length in Ollama), but Ollama runs it with a smaller "
                "num_ctx unless OLLAMA_CONTEXT_LENGTH says otherwise (`ollama ps` shows the one "
                "in use)"
            )
            assert form.query_one("#model", Input).value == "qwen3:8b"
            assert form.query_one("#window", Input).value == ""  # not trusted to be the one
            await pilot.press("escape")
