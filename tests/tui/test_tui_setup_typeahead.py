"""The setup form against keys typed ahead: keys read in one go (a password manager types
them so, and a terminal hands over at once what was typed while the app was busy) go to the
field that had the focus when each was typed, act in the order typed, and are all in the answers
a save reads."""

from __future__ import annotations

import unicodedata
from pathlib import Path

import anyio
import pytest
from textual import events
from textual.app import App
from textual.pilot import Pilot
from textual.widgets import Input, Select

from evertalk.config import load_config
from evertalk.tui.setup import SetupApp, SetupScreen
from fakes import OpenAIFake, serve

KEY = "sk-ant-setup-0123456789"
WRONG_KEY = "sk-ant-expired-9876543210"


async def form_of(pilot: Pilot[bool]) -> SetupScreen:
    """The form, once the app has pushed it."""
    while not isinstance(pilot.app.screen, SetupScreen):
        await pilot.pause(0.02)
    return pilot.app.screen


async def until_done(pilot: Pilot[bool], timeout: float = 10) -> None:
    """Until the app has exited. Not `pilot.pause`: it waits for every widget of the screen to
    take a message, and a screen torn down while it waits never does (30 s, then an error)."""
    with anyio.fail_after(timeout):
        while pilot.app.is_running:
            await anyio.sleep(0.02)


def write_private(home: Path, text: str) -> None:
    home.mkdir(mode=0o700)
    path = home / "config.toml"
    path.write_text(text)
    path.chmod(0o600)


class ChangeApp(App[bool]):
    """The form as `/setup` shows it (filled in with the settings in use), alone."""

    def __init__(self, home: Path) -> None:
        super().__init__()
        self.home = home

    def on_mount(self) -> None:
        form = SetupScreen(self.home, load_config(self.home), change=True)
        self.push_screen(form, callback=self.exit)


PROXY = "https://proxy.example/v1"


def key_event(key: str) -> events.Key:
    """A key as the terminal driver makes it: a character's key is its Unicode name."""
    if len(key) > 1:
        return events.Key(key, None)
    name = key if key.isalnum() else unicodedata.name(key).lower().replace("-", "_")
    return events.Key(name.replace(" ", "_"), key)


async def burst(pilot: Pilot[bool], *keys: str) -> None:
    """Keys read at once, as a password manager types them or as a terminal hands over what
    was typed while the app was busy: all queued before the app handles the first one
    (`pilot.press` lets the app go idle after each key, which hides the race)."""
    app = pilot.app
    for key in keys:
        event = key_event(key)
        event.set_sender(app)
        app.post_message(event)
    await pilot.pause(0.1)
    await pilot.pause()


@pytest.mark.anyio
async def test_keys_typed_after_a_tab_go_to_the_next_field(tmp_path: Path) -> None:
    home = tmp_path / "home"
    app = SetupApp(home)
    async with app.run_test(size=(100, 36)) as pilot:
        await form_of(pilot)
        app.screen.query_one("#key", Input).focus()
        await pilot.pause()
        await burst(pilot, *KEY, "tab", *PROXY, "enter")
        await until_done(pilot)
    assert app.return_value is True
    config = load_config(home)
    assert config.api_key is not None and config.api_key.reveal() == KEY
    assert config.base_url == PROXY


@pytest.mark.anyio
async def test_setup_saves_the_address_typed_while_the_form_opened(tmp_path: Path) -> None:
    """Tab, Shift+Tab and text typed ahead, before the form handled any of it: the address is
    saved, not left empty, and the key is the key alone."""
    home = tmp_path / "home"
    write_private(home, f'api_key = "{WRONG_KEY}"\n')
    app = ChangeApp(home)
    async with app.run_test(size=(100, 36)) as pilot:
        await burst(pilot, "tab", "tab", "tab", *PROXY, "shift+tab", *KEY, "ctrl+s")
        await until_done(pilot)
    assert app.return_value is True
    config = load_config(home)
    assert config.base_url == PROXY
    assert config.api_key is not None and config.api_key.reveal() == KEY


@pytest.mark.anyio
async def test_an_address_cleared_and_retyped_at_once_is_saved(tmp_path: Path) -> None:
    """Ctrl+U then the new address, read together: the field's own keys act in the order
    typed, not once they have gone back up to the app (which wiped the new address, and saved
    none)."""
    home = tmp_path / "home"
    write_private(home, f'api_key = "{KEY}"\nbase_url = "{PROXY}"\n')
    app = ChangeApp(home)
    async with app.run_test(size=(100, 36)) as pilot:
        await form_of(pilot)
        url = app.screen.query_one("#url", Input)
        url.focus()
        await pilot.pause()
        typo = "https://other-proxy.example/v3"
        await burst(pilot, "end", "ctrl+u", *typo, "backspace", "2", "enter")
        await until_done(pilot)
    assert app.return_value is True
    assert load_config(home).base_url == "https://other-proxy.example/v2"


@pytest.mark.anyio
async def test_a_save_waits_for_the_keys_a_field_has_yet_to_take(tmp_path: Path) -> None:
    home = tmp_path / "home"
    app = SetupApp(home)
    async with app.run_test(size=(100, 36)) as pilot:
        await form_of(pilot)
        form = app.screen
        assert isinstance(form, SetupScreen)
        key = form.query_one("#key", Input)
        for char in KEY:  # handed to the field, which has not taken them yet
            key.post_message(key_event(char))
        form.action_save()
        await until_done(pilot, timeout=3)
    config = load_config(home)
    assert config.api_key is not None and config.api_key.reveal() == KEY


@pytest.mark.anyio
async def test_the_provider_lists_first_report_does_not_undo_a_save(tmp_path: Path) -> None:
    """The provider list reports the value it starts with after the form has been filled in
    for it; that report arriving while a save asks the server no longer drops the save."""
    home = tmp_path / "home"
    with serve(OpenAIFake(models=["qwen3:8b"])) as url:
        write_private(home, f'provider = "ollama"\nmodel = "qwen3:8b"\nbase_url = "{url}/v1"\n')
        app = ChangeApp(home)
        async with app.run_test(size=(100, 36)) as pilot:
            form = await form_of(pilot)
            form.action_save()  # a local server is asked first
            provider = form.query_one("#provider", Select)
            provider.post_message(Select.Changed(provider, "ollama"))  # late, as at mount
            await until_done(pilot)
    assert app.return_value is True
    assert load_config(home).base_url == f"{url}/v1"
