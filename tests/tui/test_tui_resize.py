"""The status bar fits the terminal's width again as soon as it changes: widened, it shows the
whole line at once, not at its next look at the service's status."""

from __future__ import annotations

from pathlib import Path

import pytest
from rich.cells import cell_len
from tui_support import app_of, running, script, wait_until, write_config

from evertalk.tui import app as app_module
from evertalk.tui.status import status_line
from evertalk.tui.widgets import StatusBar
from fakes import AnthropicFake

pytestmark = pytest.mark.anyio


async def test_a_widened_terminal_shows_the_whole_status_line_at_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    home = tmp_path / "home"
    write_config(home)
    # no look at the status between the resize and the check: only the resize can redraw it
    monkeypatch.setattr(app_module, "STATUS_EVERY", 3600.0)
    async with running(home, AnthropicFake(script()), size=(40, 20)) as pilot:
        app = app_of(pilot)
        bar = app.query_one(StatusBar)
        await wait_until(pilot, lambda: bar.status is not None)
        status = bar.status
        assert status is not None
        whole = status_line(status)
        assert cell_len(whole) > 38 and bar.text != whole  # cut to the narrow terminal
        await pilot.resize_terminal(160, 20)
        await pilot.pause()
        assert bar.status is status, "the status was not looked at again"
        assert bar.text == whole
        assert str(bar.render()) == whole
        await pilot.resize_terminal(40, 20)  # and narrowed again, cut again at once
        await pilot.pause()
        assert bar.text == status_line(status, 38) and cell_len(bar.text) <= 38
