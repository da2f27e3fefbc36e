"""The setup form: which provider Ever talks to, and how.

Provider, model (the provider's default when left empty; a local server needs one named), the API
key (cloud providers) or the server's address (local ones, or a proxy). The answers are saved to
`<home>/config.toml` with `save_config` (0600, in a 0700 folder); the other settings of an
existing file are kept.

The form is a screen: `SetupApp` shows it on the first run, before the chat opens; `/setup`
shows it over the chat (`SetupScreen(..., change=True)`) to fix a wrong key, provider, base URL
or model. Then it comes filled in with the settings in use, except the key, which is never shown:
its field left empty keeps the key in use.
"""

from __future__ import annotations

import re
from dataclasses import replace
from pathlib import Path
from typing import ClassVar, Final, cast

from textual.app import App, ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal, Vertical
from textual.screen import ModalScreen
from textual.widgets import Button, Input, Label, Select, Static

from evertalk.agent.session import configuration_problem
from evertalk.config import (
    DEFAULT_BASE_URLS,
    DEFAULT_MODELS,
    KEY_VARIABLES,
    LOCAL_PROVIDERS,
    Config,
    ConfigError,
    ProviderName,
    Secret,
    config_path,
    load_config,
    save_config,
)
from evertalk.terminal_text import escape_controls

LABELS: Final[dict[str, str]] = {
    "anthropic": "Anthropic (Claude)",
    "openai": "OpenAI",
    "openrouter": "OpenRouter",
    "ollama": "Ollama (local)",
    "llamacpp": "llama.cpp server (local)",
    "vllm": "vLLM (local)",
}


USUAL_URLS: Final = frozenset(url for url in DEFAULT_BASE_URLS.values() if url)


class SetupError(Exception):
    """An answer that cannot be used: one line for the form."""


def build_config(
    current: Config,
    provider: str,
    model: str,
    key: str,
    base_url: str,
    *,
    keep_key: bool = False,
) -> Config:
    """The settings to save: the answers over `current` (its other settings kept). An empty
    model means the provider's default; an empty base URL the provider's usual address; an
    empty key, with `keep_key` and the same provider, the key in use."""
    if provider not in DEFAULT_MODELS:
        raise SetupError(f"unknown provider {provider!r}")
    name = cast(ProviderName, provider)
    model, key, base_url = model.strip(), key.strip(), base_url.strip()
    local = provider in LOCAL_PROVIDERS
    kept = keep_key and not key and provider == current.provider
    if local and not model:
        raise SetupError("name the model your server runs (e.g. qwen3:8b)")
    if not local and not key and not kept:
        raise SetupError(f"paste your {LABELS[provider]} API key")
    if model and any(char.isspace() for char in model):
        raise SetupError("a model name has no spaces")
    if base_url and not re.match(r"https?://[^\s/]", base_url):
        raise SetupError("the address starts with http:// or https://")
    memory = current.memory
    if provider != current.provider:  # the compaction model belongs to the old provider
        memory = replace(memory, model="")
    # `replace` keeps where `current` was loaded from: what came from the environment (a key
    # variable, EVERTALK_MODEL) and was not changed stays out of the file
    return replace(
        current,
        provider=name,
        model=model,
        base_url=base_url or None,
        api_key=current.api_key if kept else (Secret(key) if key else None),
        memory=memory,
    )


def save_setup(home: Path, config: Config) -> None:
    """Save the answers; a SetupError, and nothing saved, if the chat could not call a model
    with them."""
    try:
        problem = configuration_problem(home, config)
        if problem is None:
            save_config(home, config)
            problem = configuration_problem(home, load_config(home))
    except (ConfigError, ValueError) as error:
        raise SetupError(str(error)) from None
    except OSError as error:
        raise SetupError(f"cannot write {config_path(home)}: {error.strerror or error}") from None
    if problem is not None:
        raise SetupError(problem)


FIRST_RUN = (
    "Welcome to evertalk. Ever needs a model to talk to: pick a provider. This is saved to "
    "{path} (readable by you only); /setup changes it later, /model and /memory-model the models."
)
CHANGE = (
    "The settings in use. The key is not shown: leave its field empty to keep it. Saved to "
    "{path} (readable by you only); the chat goes on with them at once."
)


class SetupScreen(ModalScreen[bool]):
    """The form; its result is True once the settings are saved, False if left."""

    DEFAULT_CSS = """
    SetupScreen { align: center middle; }
    SetupScreen #form {
        width: 80;
        max-width: 100%;
        height: auto;
        border: round $accent;
        background: $surface;
        padding: 1 2;
    }
    SetupScreen #form Label { margin-top: 1; }
    SetupScreen #intro { margin-bottom: 1; }
    SetupScreen #problem { color: $text-error; margin-top: 1; height: auto; display: none; }
    SetupScreen #problem.shown { display: block; }
    SetupScreen #buttons { height: auto; margin-top: 1; }
    SetupScreen #buttons Button { margin-right: 2; }
    SetupScreen .hidden { display: none; }
    """
    BINDINGS: ClassVar[list[BindingType]] = [
        # Not priority bindings: they then come after the keys typed before them (a pasted key
        # and Ctrl+S at once), as they pass through the focused field first.
        Binding("ctrl+s", "save", "save"),
        Binding("escape", "leave", "leave"),
    ]

    def __init__(self, home: Path, current: Config, *, change: bool = False) -> None:
        super().__init__()
        self.home = home
        self.current = current
        self.change = change  # over the chat: filled in with the settings in use
        # the server address the form itself put in (not typed): it belongs to the provider
        # chosen then, and goes when another one is chosen
        self._filled_url = self._url_in_use() if change else ""

    def compose(self) -> ComposeResult:
        provider = self.current.provider
        intro = CHANGE if self.change else FIRST_RUN
        with Vertical(id="form"):
            shown = escape_controls(intro.format(path=config_path(self.home)))
            yield Static(shown, id="intro", markup=False)
            yield Label("Provider")
            yield Select(
                [(LABELS[name], name) for name in LABELS],
                value=provider,
                allow_blank=False,
                id="provider",
            )
            yield Label("Model", id="model-label")
            yield Input(self.current.model if self.change else "", id="model")
            yield Label("API key", id="key-label")
            yield Input(password=True, id="key")
            yield Label("Server address", id="url-label")
            yield Input(self._filled_url, id="url")
            yield Static("", id="problem", markup=False)
            with Horizontal(id="buttons"):
                save = "Save and apply (Ctrl+S)" if self.change else "Save and start (Ctrl+S)"
                yield Button(save, id="save", variant="primary")
                yield Button("Cancel (Esc)" if self.change else "Quit (Esc)", id="leave")

    def _url_in_use(self) -> str:
        """The base URL in use, unless it is the provider's usual one (shown as the hint)."""
        url = self.current.base_url
        return "" if url is None or url == DEFAULT_BASE_URLS[self.current.provider] else url

    def on_mount(self) -> None:
        self._fit(self.current.provider)
        self.query_one("#provider", Select).focus()

    def _fit(self, provider: str) -> None:
        """Labels and placeholders for this provider."""
        local = provider in LOCAL_PROVIDERS
        default = DEFAULT_MODELS[provider][0]
        model = self.query_one("#model", Input)
        model.placeholder = f"empty: {default}" if default else "the model your server runs"
        if self.change and model.value in ("", self.current.model):
            # the model in use belongs to its provider: another one starts from its default
            model.value = self.current.model if provider == self.current.provider else ""
        self._fit_key(provider, local)
        url = self.query_one("#url", Input)
        usual = DEFAULT_BASE_URLS[provider]
        label = "Server address" if local else "Base URL (only for a proxy)"
        self.query_one("#url-label", Label).update(label)
        url.placeholder = f"empty: {usual}" if usual else "empty: the provider's own"
        if url.value == self._filled_url or url.value in USUAL_URLS:
            url.value = self._filled_url = self._url_for(provider)

    def _url_for(self, provider: str) -> str:
        """The address the form suggests: the one in use for the provider in use, the usual
        one of a local server, else none (the provider's own)."""
        if self.change and provider == self.current.provider and self._url_in_use():
            return self._url_in_use()
        return (DEFAULT_BASE_URLS[provider] or "") if provider in LOCAL_PROVIDERS else ""

    def _fit_key(self, provider: str, local: bool) -> None:
        variable = KEY_VARIABLES.get(provider)
        key = self.query_one("#key", Input)
        if self._keeps_key(provider):
            key.placeholder = "empty: keep the key in use"
        else:
            key.placeholder = f"your key (or set {variable} instead)" if variable else ""
        for name in ("#key", "#key-label"):
            self.query_one(name).set_class(local, "hidden")

    def _keeps_key(self, provider: str) -> bool:
        return self.change and provider == self.current.provider and bool(self.current.api_key)

    def on_select_changed(self, event: Select.Changed) -> None:
        self._clear_problem()
        if isinstance(event.value, str):
            self._fit(event.value)

    def on_input_changed(self, event: Input.Changed) -> None:
        self._clear_problem()  # it was about the answers before this change

    def _clear_problem(self) -> None:
        self.query_one("#problem", Static).remove_class("shown")

    def on_input_submitted(self, event: Input.Submitted) -> None:
        event.stop()
        self.action_save()

    def on_button_pressed(self, event: Button.Pressed) -> None:
        event.stop()
        if event.button.id == "save":
            self.action_save()
        else:
            self.action_leave()

    def action_save(self) -> None:
        provider = str(self.query_one("#provider", Select).value)
        local = provider in LOCAL_PROVIDERS
        try:
            config = build_config(
                self.current,
                provider,
                self.query_one("#model", Input).value,
                "" if local else self.query_one("#key", Input).value,
                self.query_one("#url", Input).value,
                keep_key=self._keeps_key(provider),
            )
            save_setup(self.home, config)
        except SetupError as error:
            problem = self.query_one("#problem", Static)
            problem.update(escape_controls(str(error)))
            problem.add_class("shown")
            return
        self.dismiss(True)

    def action_leave(self) -> None:
        self.dismiss(False)


class SetupApp(App[bool]):
    """The first run: the form alone; the app's result is True once the settings are saved."""

    TITLE = "evertalk setup"
    ENABLE_COMMAND_PALETTE = False

    def __init__(self, home: Path, current: Config | None = None) -> None:
        super().__init__()
        self.home = home
        self.current = current or Config()

    def on_mount(self) -> None:
        self.push_screen(SetupScreen(self.home, self.current), callback=self.exit)
