"""The first run: no provider can be called yet, so a short form asks for one.

Provider, model (the provider's default when left empty; a local server needs one named), the API
key (cloud providers) or the server's address (local ones, or a proxy). The answers are saved to
`<home>/config.toml` with `save_config` (0600, in a 0700 folder); then the chat opens. The other
settings of an existing file are kept.
"""

from __future__ import annotations

import re
from dataclasses import replace
from pathlib import Path
from typing import ClassVar, Final, cast

from textual.app import App, ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal, Vertical
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

LABELS: Final[dict[str, str]] = {
    "anthropic": "Anthropic (Claude)",
    "openai": "OpenAI",
    "openrouter": "OpenRouter",
    "ollama": "Ollama (local)",
    "llamacpp": "llama.cpp server (local)",
    "vllm": "vLLM (local)",
}


class SetupError(Exception):
    """An answer that cannot be used: one line for the form."""


def build_config(current: Config, provider: str, model: str, key: str, base_url: str) -> Config:
    """The settings to save: the answers over `current` (its other settings kept). An empty
    model means the provider's default; an empty base URL the provider's usual address."""
    if provider not in DEFAULT_MODELS:
        raise SetupError(f"unknown provider {provider!r}")
    name = cast(ProviderName, provider)
    model, key, base_url = model.strip(), key.strip(), base_url.strip()
    local = provider in LOCAL_PROVIDERS
    if local and not model:
        raise SetupError("name the model your server runs (e.g. qwen3:8b)")
    if not local and not key:
        raise SetupError(f"paste your {LABELS[provider]} API key")
    if model and any(char.isspace() for char in model):
        raise SetupError("a model name has no spaces")
    if base_url and not re.match(r"https?://[^\s/]", base_url):
        raise SetupError("the address starts with http:// or https://")
    memory = current.memory
    if provider != current.provider:  # the compaction model belongs to the old provider
        memory = replace(memory, model="")
    return Config(
        provider=name,
        model=model,
        base_url=base_url or None,
        api_key=Secret(key) if key else None,
        memory=memory,
        turn=current.turn,
        tools=current.tools,
    )


def save_setup(home: Path, config: Config) -> None:
    """Save the answers; a SetupError if the chat still could not call a model with them."""
    try:
        save_config(home, config)
        problem = configuration_problem(home, load_config(home))
    except (ConfigError, ValueError) as error:
        raise SetupError(str(error)) from None
    except OSError as error:
        raise SetupError(f"cannot write {config_path(home)}: {error.strerror or error}") from None
    if problem is not None:
        raise SetupError(problem)


class SetupApp(App[bool]):
    """The form; the app's result is True once the settings are saved."""

    TITLE = "evertalk setup"
    ENABLE_COMMAND_PALETTE = False
    CSS = """
    Screen { align: center middle; }
    #form {
        width: 80;
        max-width: 100%;
        height: auto;
        border: round $accent;
        padding: 1 2;
    }
    #form Label { margin-top: 1; }
    #intro { margin-bottom: 1; }
    #problem { color: $text-error; margin-top: 1; height: auto; display: none; }
    #problem.shown { display: block; }
    #buttons { height: auto; margin-top: 1; }
    #buttons Button { margin-right: 2; }
    .hidden { display: none; }
    """
    BINDINGS: ClassVar[list[BindingType]] = [
        # Not priority bindings: they then come after the keys typed before them (a pasted key
        # and Ctrl+S at once), as they pass through the focused field first.
        Binding("ctrl+s", "save", "save"),
        Binding("escape", "leave", "quit"),
    ]

    def __init__(self, home: Path, current: Config | None = None) -> None:
        super().__init__()
        self.home = home
        self.current = current or Config()

    def compose(self) -> ComposeResult:
        provider = self.current.provider
        with Vertical(id="form"):
            yield Static(
                "Welcome to evertalk. Ever needs a model to talk to: pick a provider. "
                f"This is saved to {config_path(self.home)} (readable by you only); "
                "/model and /memory-model change it later.",
                id="intro",
                markup=False,
            )
            yield Label("Provider")
            yield Select(
                [(LABELS[name], name) for name in LABELS],
                value=provider,
                allow_blank=False,
                id="provider",
            )
            yield Label("Model", id="model-label")
            yield Input(id="model")
            yield Label("API key", id="key-label")
            yield Input(password=True, id="key")
            yield Label("Server address", id="url-label")
            yield Input(id="url")
            yield Static("", id="problem", markup=False)
            with Horizontal(id="buttons"):
                yield Button("Save and start (Ctrl+S)", id="save", variant="primary")
                yield Button("Quit (Esc)", id="leave")

    def on_mount(self) -> None:
        self._fit(self.current.provider)
        self.query_one("#provider", Select).focus()

    def _fit(self, provider: str) -> None:
        """Labels and placeholders for this provider."""
        local = provider in LOCAL_PROVIDERS
        default = DEFAULT_MODELS[provider][0]
        model = self.query_one("#model", Input)
        model.placeholder = f"empty: {default}" if default else "the model your server runs"
        variable = KEY_VARIABLES.get(provider)
        key = self.query_one("#key", Input)
        key.placeholder = f"your key (or set {variable} instead)" if variable else ""
        for name in ("#key", "#key-label"):
            self.query_one(name).set_class(local, "hidden")
        url = self.query_one("#url", Input)
        usual = DEFAULT_BASE_URLS[provider]
        label = "Server address" if local else "Base URL (only for a proxy)"
        self.query_one("#url-label", Label).update(label)
        url.placeholder = f"empty: {usual}" if usual else "empty: the provider's own"
        if local and not url.value:
            url.value = usual or ""
        elif not local and url.value in DEFAULT_BASE_URLS.values():
            url.value = ""

    def on_select_changed(self, event: Select.Changed) -> None:
        if isinstance(event.value, str):
            self._fit(event.value)

    def on_input_submitted(self, event: Input.Submitted) -> None:
        self.action_save()

    def on_button_pressed(self, event: Button.Pressed) -> None:
        if event.button.id == "save":
            self.action_save()
        else:
            self.action_leave()

    def action_save(self) -> None:
        provider = self.query_one("#provider", Select).value
        local = provider in LOCAL_PROVIDERS
        try:
            config = build_config(
                self.current,
                str(provider),
                self.query_one("#model", Input).value,
                "" if local else self.query_one("#key", Input).value,
                self.query_one("#url", Input).value,
            )
            save_setup(self.home, config)
        except SetupError as error:
            problem = self.query_one("#problem", Static)
            problem.update(str(error))
            problem.add_class("shown")
            return
        self.exit(True)

    def action_leave(self) -> None:
        self.exit(False)
