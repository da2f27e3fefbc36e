"""`evertalk memory browse` on the generated chat, in a real headless Chromium: how long the
page takes to show the view's lines (from navigation start until they are in the page) and
how long a drill-down takes (from the click until the two lines beneath are shown), each the
median of ten. Targets: 1 s and 100 ms. The system's Chromium (/usr/bin/chromium) through
playwright; without either the probe says so and is skipped."""

from __future__ import annotations

import importlib.util
import re
import statistics
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from playwright.sync_api import Browser, Page

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))  # the browser

CHROMIUM = Path("/usr/bin/chromium")
LOADS = 10
URL = re.compile(r"http://127\.0\.0\.1:\d+/\S+/")


@dataclass(frozen=True)
class BrowseFigures:
    messages: int
    first_load_ms: float  # the very first load, while the sawtooth is worked out beside it
    paint_ms: list[float]
    drill_ms: list[float]
    sawtooth_s: float  # from the server's start until the sawtooth is ready

    def line(self) -> str:
        paint, drill = statistics.median(self.paint_ms), statistics.median(self.drill_ms)
        return (
            f"browse page at {self.messages:,} messages: lines shown {paint:.0f} ms after "
            f"navigation (median of {len(self.paint_ms)}, max {max(self.paint_ms):.0f}; first "
            f"load {self.first_load_ms:.0f} ms; target 1,000), drill-down {drill:.1f} ms "
            f"(median of {len(self.drill_ms)}, max {max(self.drill_ms):.1f}; target 100); "
            f"sawtooth ready after {self.sawtooth_s:.1f} s"
        )


def run(chat_dir: Path) -> BrowseFigures | str:
    """The figures, or why they could not be taken."""
    if not CHROMIUM.exists():
        return "browse page: chromium is not installed; skipped"
    if importlib.util.find_spec("playwright") is None:
        return "browse page: playwright is not installed; skipped"
    from browse.browser_support import chromium

    command = [sys.executable, "-m", "evertalk", "memory", "browse", "--no-open"]
    server = subprocess.Popen(
        [*command, "--home", str(chat_dir.parent)], stdout=subprocess.PIPE, text=True
    )
    try:
        started = time.perf_counter()
        assert server.stdout is not None
        found = URL.search(server.stdout.readline())
        if not found:
            return "browse page: the command printed no URL"
        with chromium() as browser:
            return _measure(browser, found.group(0), started)
    finally:
        server.terminate()
        server.wait()


def _measure(browser: Browser, url: str, started: float) -> BrowseFigures:
    page = browser.new_page(viewport={"width": 1400, "height": 1000})
    paints = [_load(page, url) for _ in range(LOADS + 1)]
    page.wait_for_selector('body[data-sawtooth="ready"]', timeout=600_000)
    sawtooth_s = time.perf_counter() - started
    last = page.locator(".line").last
    messages = int(last.get_attribute("data-id") or 0) + int(last.get_attribute("data-n") or 0)
    drills: list[float] = []
    page.locator(".line").first.click()  # the oldest line, the highest: down to a message
    page.wait_for_selector("body[data-zoom]")
    depth = 0
    while page.locator(".child").count():
        child = page.locator(".child").nth(depth % 2)
        depth += 1
        name = f"{child.get_attribute('data-id')}+{child.get_attribute('data-n')}"
        child.click()
        page.wait_for_selector(f'body[data-zoom="{name}"]')
        drills.append(
            page.evaluate("performance.getEntriesByName('evertalk:zoom').at(-1).duration")
        )
    return BrowseFigures(messages, paints[0], paints[1:], drills, sawtooth_s)


def _load(page: Page, url: str) -> float:
    page.goto(url)
    page.wait_for_selector("body[data-lines]")
    mark = "performance.getEntriesByName('evertalk:lines')[0].startTime"
    return float(page.evaluate(mark))
