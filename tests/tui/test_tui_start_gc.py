"""The app starts with the garbage collector off (start-up makes many objects and little
garbage) and turns it back on, with what start-up made frozen out of its way, once the first
screen shows."""

from __future__ import annotations

import gc
from collections.abc import Iterator
from pathlib import Path

import pytest

from evertalk.tui.main import _collect_once_shown
from fakes import AnthropicFake
from tui.tui_support import app_of, running, script

pytestmark = pytest.mark.anyio


@pytest.fixture
def collector_restored() -> Iterator[None]:
    yield
    gc.unfreeze()
    gc.enable()


async def test_the_collector_is_back_on_once_the_first_screen_shows(
    home: Path, collector_restored: None
) -> None:
    async with running(home, AnthropicFake(script())) as pilot:
        gc.disable()  # as `run_terminal` leaves it
        frozen = gc.get_freeze_count()
        await _collect_once_shown(app_of(pilot))  # the app shows its log: at once
        assert gc.isenabled()
        assert gc.get_freeze_count() > frozen
