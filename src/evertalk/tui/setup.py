"""The setup form: which provider Ever talks to, and how.

Provider, model (the provider's default when left empty; a local server needs one named), the API
key (cloud providers) or the server's address (local ones, or a proxy). The answers are saved to
`<home>/config.toml` with `save_config` (0600, in a 0700 folder); the other settings of an
existing file are kept.

The form is a screen: `SetupApp` shows it on the first run, before the chat opens; `/setup`
shows it over the chat (`SetupScreen(..., change=True)`) to fix a wrong key, provider, base URL
or model. Then it comes filled in with the settings in use, except the key, which is never shown:
its field left empty keeps the key in use.

A local server (Ollama, llama.cpp, vLLM) also gets a context window field (`[turn]
context_window`) and a connection test (`server_info`, in a worker thread: the screen
never waits on the network) that lists the server's models to pick from and fills in the window
the server reports. Save tests the server first and saves only answers it can serve; the same
answers saved again are saved anyway (a server may be set up before it is started).

Keys read in one go (a password manager types so, and a terminal hands over at once what was
typed while the app was busy) are taken in the order typed: each goes to the field focused when
it was typed, a field's editing keys act between the characters around them, and a save waits
for the keys typed before it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace
from functools import partial
from pathlib import Path
from typing import ClassVar, Final, Literal, cast

from rich.text import Text
from textual import events
from textual.app import App, ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal, VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Button, Input, Label, Select, Static
from textual.worker import Worker, WorkerState

from evertalk.config import (
    DEFAULT_BASE_URLS,
    DEFAULT_MODELS,
    KEY_VARIABLES,
    LOCAL_PROVIDERS,
    MIN_CONTEXT_WINDOW,
    Config,
    ConfigError,
    ProviderName,
    Secret,
    config_path,
    load_config,
    save_config,
)
from evertalk.context_budget import CONTEXT_BUDGET
from evertalk.runtime import configuration_problem
from evertalk.server_info import ServedModel, ServerInfo, ServerInfoError, list_models
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
    window: str | None = None,
) -> Config:
    """The settings to save: the answers over `current` (its other settings kept). An empty
    model means the provider's default; an empty base URL the provider's usual address; an
    empty key, with `keep_key` and the same provider, the key in use. `window` is the turn's
    context window as typed (empty: none set, the default); None keeps the one in use."""
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
    turn = current.turn
    if window is not None:
        turn = replace(turn, context_window=parse_window(window))
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
        turn=turn,
    )


WINDOW_TEXT = re.compile(r"\d{1,3}(?:[,_]\d{3})+|\d+")  # 32768, 32,768 or 32_768


def parse_window(text: str) -> int | None:
    """A context window as typed: None when empty (the default), else a whole number of tokens
    no smaller than the smallest window a turn fits in."""
    text = text.strip()
    if not text:
        return None
    if not WINDOW_TEXT.fullmatch(text):
        raise SetupError(f"the context window is a number of tokens (e.g. 32768), not {text!r}")
    tokens = int(re.sub("[,_]", "", text))
    if tokens < MIN_CONTEXT_WINDOW:
        raise SetupError(
            f"a context window of {tokens:,} tokens is too small: at least {MIN_CONTEXT_WINDOW:,} "
            "(the system prompt and the chat's view need room)"
        )
    return tokens


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
TEST_HINT = "Test (Ctrl+T) asks the server for its models and window; Save asks it too."
WINDOW_HINTS: Final[dict[str, str]] = {
    "ollama": "the num_ctx Ollama runs with (`ollama ps`)",
    "llamacpp": "the server's --ctx-size (per slot)",
    "vllm": "the server's --max-model-len",
}
SHOWN_MODELS: Final = 3  # the models the status line names; the list has them all


@dataclass(frozen=True)
class _Check:
    """A question to the server in flight: for the Test button, or before a save."""

    purpose: Literal["test", "save"]
    server: tuple[str, str]  # the provider and address asked
    answers: tuple[str, ...]  # the form's answers when it was asked
    config: Config | None = None  # what a save check saves once the server is fine


def ask_server(
    url: str, provider: str, model: str, key: str | None
) -> ServerInfo | ServerInfoError:
    """In the worker thread: the server's answer, or why there is none (not raised: an error
    raised there would be the worker's failure, not the server's)."""
    try:
        return list_models(url, provider=provider, model=model or None, api_key=key)
    except ServerInfoError as error:
        return error


def connected(info: ServerInfo) -> str:
    """The status line's news of a server that answered."""
    ids = info.ids
    if not ids:
        return f"connected to {info.url}, but it serves no models yet"
    names = ", ".join(ids[:SHOWN_MODELS]) + (", …" if len(ids) > SHOWN_MODELS else "")
    return f"connected: {len(ids)} model{'s' if len(ids) != 1 else ''} ({names})"


def served_as(info: ServerInfo, model: str, provider: str) -> ServedModel | None:
    """The server's entry for the model named; Ollama takes a name without a tag as `:latest`."""
    found = info.get(model)
    if found is None and provider == "ollama" and ":" not in model:
        found = info.get(f"{model}:latest")
    return found


def listed(ids: tuple[str, ...], most: int = 10) -> str:
    return ", ".join(ids[:most]) + (f" and {len(ids) - most} more" if len(ids) > most else "")


def save_problem(config: Config, info: ServerInfo | ServerInfoError) -> str | None:
    """Why the server cannot serve these settings as they are, or None."""
    if isinstance(info, ServerInfoError):
        return str(info)
    served = served_as(info, config.model, config.provider)
    if served is None:
        if not info.ids:
            return f"the server at {info.url} serves no models yet"
        return f"the server does not serve {config.model}: it has {listed(info.ids)}"
    window = served.window
    wanted = config.turn.context_window or CONTEXT_BUDGET
    if window is None or not window.runs_with or wanted <= window.tokens:
        return None
    said = f"{wanted:,}" if config.turn.context_window else f"empty ({wanted:,}, the default)"
    fix = (
        f"type {window.tokens}"
        if window.tokens >= MIN_CONTEXT_WINDOW
        else f"start the server with at least {MIN_CONTEXT_WINDOW:,}"
    )
    return (
        f"{served.id} runs with {window.tokens:,} tokens ({window.source}) and the window is "
        f"{said}: a longer prompt would fail; {fix}"
    )


class Field(Input):
    """An Input whose own keys (Backspace, Ctrl+U, the arrows, Enter) act when the field reads
    them, in the order they were typed. Textual runs a widget's key bindings only once the key
    has gone up from the field to the app, while the characters typed after it are put in at
    once: Ctrl+U then a new address, read together, wiped the new address (and an empty base
    URL was saved)."""

    async def _on_key(self, event: events.Key) -> None:
        for binding in self._bindings.key_to_bindings.get(event.key, ()):
            if not binding.priority and await self.app.run_action(binding.action, self):
                event.prevent_default()  # not again by Input's own handler
                event.stop()  # nor by the app's bindings, later
                return


class SetupScreen(ModalScreen[bool]):
    """The form; its result is True once the settings are saved, False if left."""

    DEFAULT_CSS = """
    SetupScreen { align: center middle; }
    SetupScreen #form {
        width: 80;
        max-width: 100%;
        height: auto;
        max-height: 100%;
        border: round $accent;
        background: $surface;
        padding: 1 2;
    }
    SetupScreen #form Label { margin-top: 1; }
    SetupScreen #intro { margin-bottom: 1; }
    SetupScreen .row { height: auto; }
    SetupScreen .row Input { width: 1fr; }
    SetupScreen #models { width: 45%; margin-left: 1; }
    SetupScreen #test { margin-left: 1; }
    SetupScreen #status { color: $text-muted; margin-top: 1; height: auto; }
    SetupScreen #problem { color: $text-error; margin-top: 1; height: auto; display: none; }
    SetupScreen #problem.shown { display: block; }
    SetupScreen #buttons { height: auto; margin-top: 1; }
    SetupScreen #buttons Button { margin-right: 2; }
    SetupScreen .hidden { display: none; }
    """
    BINDINGS: ClassVar[list[BindingType]] = [
        # Priority, unlike Textual's own Tab: that one moves the focus only once the key has
        # gone through the focused field and back up to the app, and the app has meanwhile
        # handed the keys read after it (a password manager's "key, Tab, address") to the field
        # still focused. Here the focus moves as soon as the app reads the key, so each key
        # goes to the field focused when it was typed.
        Binding("tab", "focus_next", "next field", show=False, priority=True),
        Binding("shift+tab", "focus_previous", "previous field", show=False, priority=True),
        # Textual's own Tab, for an open list of choices (see `check_action`)
        Binding("tab", "app.focus_next", "next field", show=False),
        Binding("shift+tab", "app.focus_previous", "previous field", show=False),
        # Not priority bindings: they then come after the keys typed before them (a pasted key
        # and Ctrl+S at once), as they pass through the focused field first.
        Binding("ctrl+s", "save", "save"),
        Binding("ctrl+t", "test", "test the server"),
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
        self._filled_window = ""  # likewise the window the form took from a server
        self._served: ServerInfo | None = None  # the last answer of the server in the form
        self._check: _Check | None = None
        self._worker: Worker[ServerInfo | ServerInfoError] | None = None
        # answers whose problem the form showed: Save again saves them anyway, with it as a warning
        self._excused: tuple[str, ...] | None = None
        self._excuse = ""
        self._fitted = ""  # the provider the fields were last fitted to

    def compose(self) -> ComposeResult:
        provider = self.current.provider
        intro = CHANGE if self.change else FIRST_RUN
        window = self.current.turn.context_window
        with VerticalScroll(id="form"):
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
            with Horizontal(classes="row"):
                yield Field(self.current.model if self.change else "", id="model")
                yield Select[str]([], prompt="the server's models", id="models", classes="hidden")
            yield Label("API key", id="key-label")
            yield Field(password=True, id="key")
            yield Label("Server address", id="url-label")
            with Horizontal(classes="row"):
                yield Field(self._filled_url, id="url")
                yield Button("Test (Ctrl+T)", id="test")
            yield Label("Context window (tokens)", id="window-label")
            yield Field("" if window is None else str(window), id="window")
            yield Static(TEST_HINT, id="status", markup=False)
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

    def action_focus_next(self) -> None:
        self.focus_next()

    def action_focus_previous(self) -> None:
        self.focus_previous()

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if action in ("focus_next", "focus_previous"):
            # While a list of choices is open, Tab takes Textual's usual path, behind the keys
            # before it: an Enter that picks a choice refocuses its Select when handled, which
            # would pull the focus back from where a Tab taken at once had moved it.
            return not any(select.expanded for select in self.query(Select))
        return True

    def _fit(self, provider: str) -> None:
        """Labels and placeholders for this provider."""
        self._fitted = provider
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
        self._forget_server()  # it was another provider's
        self._fit_server(provider, local)

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

    def _fit_server(self, provider: str, local: bool) -> None:
        """A local server's own fields: the window, the test, its status line."""
        hint = WINDOW_HINTS.get(provider, "")
        self.query_one("#window", Input).placeholder = f"empty: {CONTEXT_BUDGET:,}; {hint}"
        for name in ("#window", "#window-label", "#test", "#status"):
            self.query_one(name).set_class(not local, "hidden")

    def _keeps_key(self, provider: str) -> bool:
        return self.change and provider == self.current.provider and bool(self.current.api_key)

    def on_select_changed(self, event: Select.Changed) -> None:
        if event.select.id == "models":
            self._picked(event.value)
            return
        # The list reports the provider it starts with only after `on_mount` has fitted the
        # form to it, by when a save may be asking the server: that is no change to undo it.
        if isinstance(event.value, str) and event.value != self._fitted:
            self._clear_problem()
            self._fit(event.value)

    def on_input_changed(self, event: Input.Changed) -> None:
        self._clear_problem()  # it was about the answers before this change
        if event.input.id == "url" and self._served is not None:
            self._forget_server()  # its list and window were another address's

    def _clear_problem(self) -> None:
        self.query_one("#problem", Static).remove_class("shown")
        self._excused = None  # "Save again" was about the answers before this change

    def _show_problem(self, text: str) -> None:
        problem = self.query_one("#problem", Static)
        problem.update(escape_controls(text))
        problem.add_class("shown")

    def _say(self, text: str) -> None:
        self.query_one("#status", Static).update(escape_controls(text))

    def on_input_submitted(self, event: Input.Submitted) -> None:
        event.stop()
        self.action_save()

    def on_button_pressed(self, event: Button.Pressed) -> None:
        event.stop()
        if event.button.id == "save":
            self.action_save()
        elif event.button.id == "test":
            self.action_test()
        else:
            self.action_leave()

    # -- the answers --------------------------------------------------------------------------

    def _provider(self) -> str:
        return str(self.query_one("#provider", Select).value)

    def _value(self, name: str) -> str:
        return self.query_one(f"#{name}", Input).value.strip()

    def _answers(self) -> tuple[str, ...]:
        return (self._provider(), self._value("model"), self._value("url"), self._value("window"))

    def _server_url(self) -> str:
        return self._value("url") or DEFAULT_BASE_URLS[self._provider()] or ""

    def _server(self) -> tuple[str, str]:
        return self._provider(), self._server_url()

    # -- asking the server --------------------------------------------------------------------

    def action_test(self) -> None:
        if self._provider() in LOCAL_PROVIDERS:  # a cloud provider has nothing to test here
            self._clear_problem()
            self._ask("test")

    def _ask(self, purpose: Literal["test", "save"], config: Config | None = None) -> None:
        """Ask the server in a worker thread; `on_worker_state_changed` takes the answer."""
        provider = self._provider()
        secret = self.current.api_key if self._keeps_key(provider) else None
        key = secret.reveal() if secret else None  # a local server's key, from config.toml
        self._check = _Check(purpose, self._server(), self._answers(), config)
        self._say(f"asking {self._server_url()} for its models…")
        work = partial(ask_server, self._server_url(), provider, self._value("model"), key)
        self._worker = self.run_worker(
            work, name="server", group="server", exclusive=True, thread=True, exit_on_error=False
        )

    def on_worker_state_changed(self, event: Worker.StateChanged) -> None:
        check = self._check
        if event.worker is not self._worker or check is None:
            return  # a check the form has since given up
        if event.state not in (WorkerState.SUCCESS, WorkerState.ERROR):
            return
        self._check = self._worker = None
        answer = event.worker.result
        if event.state is WorkerState.ERROR or answer is None:  # a bug, said in one line
            answer = ServerInfoError(f"the connection test failed: {event.worker.error}")
        if check.server != self._server():
            self._say(TEST_HINT)  # another provider or server since: the answer is not for it
            return
        if check.purpose == "test":
            self._tested(answer)
        elif check.answers == self._answers() and check.config is not None:
            self._checked(check, answer)
        else:
            self._say(TEST_HINT)  # changed while asked: Save asks again

    def _tested(self, answer: ServerInfo | ServerInfoError) -> None:
        if isinstance(answer, ServerInfoError):
            self._say(TEST_HINT)
            self._show_problem(str(answer))
            return
        self._served = answer
        model = self.query_one("#model", Input)
        if not model.value.strip() and answer.ids:
            model.value = answer.ids[0]
        self._offer(answer)
        news = connected(answer)
        chosen = served_as(answer, model.value.strip(), self._provider())
        if chosen is None and model.value.strip() and answer.ids:
            news += f"; {model.value.strip()} is not among them"
        self._say(news + self._window_news(chosen))

    def _offer(self, info: ServerInfo) -> None:
        """The server's models, to pick from with the list next to the model field."""
        models: Select[str] = self.query_one("#models", Select)
        models.set_options([(Text(model_id), model_id) for model_id in info.ids])
        models.set_class(not info.ids, "hidden")
        chosen = served_as(info, self._value("model"), self._provider())
        if chosen is not None:
            models.value = chosen.id  # its Changed is no news: `_picked` sees the same model

    def _picked(self, value: object) -> None:
        """A model picked from the server's list: into the model field, with its window."""
        if not isinstance(value, str) or value == self._value("model") or self._served is None:
            return
        self.query_one("#model", Input).value = value
        self._say(f"{value} chosen" + self._window_news(self._served.get(value)))

    def _window_news(self, served: ServedModel | None) -> str:
        """Fill the empty window field with the window the server runs the model with, and say
        so; a window that is only the model's maximum is said, not filled in."""
        window = served.window if served is not None else None
        field = self.query_one("#window", Input)
        mine = field.value.strip() in ("", self._filled_window)
        if window is None or not window.runs_with:
            if mine and self._filled_window:  # it was another model's
                field.value = self._filled_window = ""
            if window is None:
                return ""
            return f"; it supports {window.tokens:,} tokens ({window.source}), but {window.caveat}"
        if not mine:
            return f"; it runs with {window.tokens:,} tokens ({window.source})"
        field.value = self._filled_window = str(window.tokens)
        return f"; window {window.tokens:,} tokens, from {window.source}"

    def _forget_server(self) -> None:
        """The server's answer no longer holds (another provider or address)."""
        self._served = None
        self._check = self._worker = None
        models: Select[str] = self.query_one("#models", Select)
        models.set_options([])
        models.add_class("hidden")
        window = self.query_one("#window", Input)
        if self._filled_window and window.value.strip() == self._filled_window:
            window.value = ""
        self._filled_window = ""
        self._say(TEST_HINT)

    # -- saving -------------------------------------------------------------------------------

    def action_save(self) -> None:
        if any(field.message_queue_size for field in self.query(Field)):
            # Keys typed before the save may still wait in a field the focus left (a Tab moves
            # it at once): they are part of the answers.
            self.set_timer(0.01, self.action_save)
            return
        if self._check is not None and self._check.purpose == "save":
            return  # already asking the server before saving
        provider = self._provider()
        local = provider in LOCAL_PROVIDERS
        try:
            config = build_config(
                self.current,
                provider,
                self.query_one("#model", Input).value,
                "" if local else self.query_one("#key", Input).value,
                self.query_one("#url", Input).value,
                keep_key=self._keeps_key(provider),
                window=self.query_one("#window", Input).value if local else None,
            )
        except SetupError as error:
            self._show_problem(str(error))
            return
        if local and self._excused != self._answers():
            self._ask("save", config)  # saved once the server can serve it
            return
        self._save(config, warning=self._excuse if local else "")

    def _checked(self, check: _Check, answer: ServerInfo | ServerInfoError) -> None:
        assert check.config is not None
        problem = save_problem(check.config, answer)
        if problem is None:
            self._save(check.config)
            return
        if isinstance(answer, ServerInfo):
            self._served = answer
            self._offer(answer)  # to pick the model from
        self._say(TEST_HINT if isinstance(answer, ServerInfoError) else connected(answer))
        stop = " " if problem.endswith("?") else ". "
        self._show_problem(f"{problem}{stop}Save again to save anyway.")
        self._excused, self._excuse = check.answers, problem

    def _save(self, config: Config, *, warning: str = "") -> None:
        try:
            save_setup(self.home, config)
        except SetupError as error:
            self._show_problem(str(error))
            return
        if warning:  # over the chat a toast; the first run has nothing more to show it on
            self.app.notify(f"saved as asked, though {warning}", severity="warning", timeout=10)
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
