"""The browse page in a real headless Chromium, served by the real command: the view's lines,
a drill-down to an original message and back up, the image, the charts, chat text shown as
text, and a screenshot."""

from __future__ import annotations

import http.client
import os
import re
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from playwright.sync_api import Page, expect

from browse.browse_chat import HOSTILE, make_chat
from browse.browser_support import chromium
from evertalk.chat import Chat

URL = re.compile(r"http://127\.0\.0\.1:(\d+)/([A-Za-z0-9_-]+)/")


@pytest.fixture
def command(tmp_path: Path) -> Iterator[tuple[subprocess.Popen[str], str, Path]]:
    home = tmp_path / "home"
    make_chat(home / "chat")
    process = subprocess.Popen(
        [sys.executable, "-m", "evertalk", "memory", "browse", "--no-open", "--home", str(home)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert process.stdout is not None
    first = process.stdout.readline()
    found = URL.search(first)
    assert found, first
    yield process, found.group(0), home
    if process.poll() is None:
        process.kill()
    process.wait()


def open_line(page: Page, name: str) -> None:
    page.locator(f'.line[data-id="{name.split("+")[0]}"][data-n="{name.split("+")[1]}"]').click()
    page.wait_for_selector(f'body[data-zoom="{name}"]')


def descend(page: Page, name: str) -> None:
    start, count = name.split("+")
    page.locator(f'.child[data-id="{start}"][data-n="{count}"]').click()
    page.wait_for_selector(f'body[data-zoom="{name}"]')


def test_the_page_shows_the_view_and_drills_down_to_a_message(
    command: tuple[subprocess.Popen[str], str, Path], tmp_path: Path
) -> None:
    _, url, home = command
    with Chat.open(home / "chat", readonly=True) as chat:
        names = chat.render_view().split("\n")[1:-1]
        first_level = next(iter(chat.core.view))[0]
    with chromium() as browser:
        page = browser.new_page(viewport={"width": 1400, "height": 1000})
        problems: list[str] = []
        page.on("console", lambda m: problems.append(m.text) if m.type == "error" else None)
        page.on("pageerror", lambda error: problems.append(str(error)))
        page.goto(url)
        page.wait_for_selector("body[data-lines]")
        rows = page.locator(".line")
        assert rows.count() == len(names)
        assert rows.nth(0).locator(".name").text_content() == names[0].split("|")[0]
        assert rows.nth(0).locator(".level").text_content() == f"L{first_level}"
        assert rows.nth(0).locator(".text").text_content() == names[0].split("|", 1)[1]
        assert "still summarizing messages 56–59" in (page.text_content("#status") or "")

        # 0+32 → 0+16 → 0+8 → 4+4 → 4+2 → message 5, written as HTML: it shows as text
        open_line(page, "0+32")
        for name in ("0+16", "0+8", "4+4", "4+2", "5+1"):
            descend(page, name)
        assert page.text_content(".message-text") == HOSTILE
        assert page.locator(".message-text img").count() == 0
        assert page.evaluate("document.body.dataset.owned") is None
        assert "ever" in (page.text_content(".message .meta") or "")

        page.click("#up")  # back up to 4+2, whose children are messages 4 and 5
        page.wait_for_selector('body[data-zoom="4+2"]')
        assert page.locator(".crumbs button").all_text_contents()[-1] == "4+2"
        assert page.locator(".child").count() == 2

        page.locator(".crumbs button", has_text="0+8").click()  # and up to any step
        page.wait_for_selector('body[data-zoom="0+8"]')
        descend(page, "0+4")
        descend(page, "0+2")
        descend(page, "1+1")
        expect(page.locator(".message img")).to_have_js_property("naturalWidth", 2)

        page.fill("#date-id", "5")
        page.click("#date-form button")
        date = re.compile(r"^\d{4}-\d\d-\d\d \w+day \d\d:\d\d:\d\d [+-]\d\d:\d\d$")
        expect(page.locator("#date-out")).to_have_text(date)

        page.wait_for_selector('body[data-sawtooth="ready"]')
        assert page.locator("#sawtooth polyline").count() == 1
        assert page.locator("#csawtooth polyline").count() == 1
        expect(page.locator("#usage")).to_have_text("No model calls yet.")
        assert problems == []

        shot = tmp_path / "browse.png"
        page.screenshot(path=str(shot), full_page=True)
    data = shot.read_bytes()
    assert data.startswith(b"\x89PNG\r\n\x1a\n") and len(data) > 10_000


def test_no_token_no_page(command: tuple[subprocess.Popen[str], str, Path]) -> None:
    _, url, _ = command
    port = int(URL.search(url).group(1))  # type: ignore[union-attr]
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    connection.request("GET", "/", headers={"Host": f"127.0.0.1:{port}"})
    assert connection.getresponse().status == 403
    connection.close()


def test_ctrl_c_stops_it_with_one_line(command: tuple[subprocess.Popen[str], str, Path]) -> None:
    process, _, _ = command
    os.kill(process.pid, signal.SIGINT)
    out, err = process.communicate(timeout=30)
    assert process.returncode == 0
    assert out.strip() == "evertalk: stopped serving the memory"
    assert err == ""
