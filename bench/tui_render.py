"""How fast the terminal app draws Ever's replies: `python -m bench.tui_render`.

Headless (Textual's `App.run_test`, 120×40), the way the app uses `ReplyView`: a finished
reply mounted whole (as a reply that did not stream, or one of the earlier messages shown when
a chat opens), a chat reopened with eight replies, and a reply streamed in 50-byte deltas through
`Markdown.get_stream` (as `ChatApp._text` does) while keys are typed into an input.

Figures: wall time and CPU time from the mount (or the first delta) until the app is idle with
everything drawn; for the stream, the time the app needs after the last delta, the longest stall
of the event loop and how long typed keys took to reach the input.

`--before` draws the replies with Textual's `Markdown` widget, as `ReplyView` did before it drew
with Rich. On the 2-core machine it was written on (11 KB reply, 1.4 KB ones):

    before: finished 1.4 KB 0.84 s, 11 KB 5.6 s (884 widgets); reopen 9.5 s; streamed 11 KB
            54 s for 2.2 s of deltas, loop stalls up to 0.94 s, keys up to 0.87 s late
    after:  finished 1.4 KB 0.12 s, 11 KB 0.27 s (2 widgets); reopen 0.42 s; streamed 11 KB
            3.0 s, done 0.13 s after the last delta, stalls up to 0.07 s, keys 4 ms late at most

(the finished figures include about 0.08 s of the benchmark's own waiting for the app to idle).
"""

from __future__ import annotations

import asyncio
import statistics
import sys
import time
from collections.abc import Callable, Coroutine
from dataclasses import dataclass, field
from typing import TypeVar

from textual import events
from textual.app import App, ComposeResult
from textual.pilot import Pilot
from textual.widgets import Markdown, TextArea

from evertalk.tui.widgets import ChatLog, ReplyView

SIZE = (120, 40)
DELTA = 50  # bytes of text per streamed delta
PACE = 0.01  # seconds between two deltas: a fast model
KEY_EVERY = 0.05  # seconds between two typed keys while a reply streams

T = TypeVar("T")


def long_reply(size: int = 11_000) -> str:
    """A Markdown reply of about `size` bytes: headings, paragraphs, lists, code, a table."""
    parts: list[str] = ["# Rotating the logs of the notes service", ""]
    i = 0
    while sum(len(part) + 1 for part in parts) < size:
        i += 1
        parts += [f"## Step {i}: check part {i}" if i % 2 else f"### Detail {i}", ""]
        kind = i % 5
        if kind == 0:
            parts += [
                f"The rule in `/etc/logrotate.d/notes-{i}` keeps **four** old files; see "
                f"[the manual](https://example.org/logrotate#{i}) for more.",
                "",
            ]
        elif kind == 1:
            parts += [f"- keep {i} files", "- compress the old ones", "- `missingok`", ""]
        elif kind == 2:
            parts += [f"1. stop service {i}", "2. rotate", "3. start it again", ""]
        elif kind == 3:
            parts += [
                "```python",
                f"def rotate_{i}(path: str) -> None:",
                f"    print('rotating', path, {i})",
                "```",
                "",
            ]
        else:
            parts += [f"> Note {i}: *weekly* is the default.", ""]
        if i == 20:
            parts += ["| file | kept | size |", "|---|---|---|"]
            parts += [f"| notes.log.{n} | yes | {n * 12} KB |" for n in range(1, 6)]
            parts.append("")
    return "\n".join(parts).rstrip() + "\n"


class TextualReply(Markdown):
    """`ReplyView` as it was before it drew with Rich, Textual's `Markdown` widget: `--before`."""

    DEFAULT_CSS = """
    TextualReply {
        margin: 1 0;
        padding: 0 1;
        background: transparent;
    }
    TextualReply > *:last-child { margin-bottom: 0; }
    TextualReply.earlier { color: $text-muted; }
    """


View: type[Markdown] = ReplyView


class Bench(App[None]):
    """A chat log and an input, as in the chat screen."""

    CSS = "Screen { layout: vertical; } TextArea { height: 3; }"

    def __init__(self) -> None:
        super().__init__()
        self.typed_at: list[float] = []  # when each key reached the input

    def compose(self) -> ComposeResult:
        yield ChatLog()
        yield TextArea(id="prompt")

    def on_mount(self) -> None:
        self.query_one(ChatLog).anchor()  # as the app: the log follows its end

    def on_text_area_changed(self, event: TextArea.Changed) -> None:
        self.typed_at.append(time.perf_counter())


@dataclass
class Stalls:
    """The longest delays of a 5 ms heartbeat: how long the event loop was busy at once."""

    lags: list[float] = field(default_factory=list)
    running: bool = True

    async def beat(self) -> None:
        while self.running:
            start = time.perf_counter()
            await asyncio.sleep(0.005)
            self.lags.append(time.perf_counter() - start - 0.005)

    @property
    def worst(self) -> float:
        return max(self.lags, default=0.0)


async def settle(pilot: Pilot[None]) -> None:
    """Until the app is idle and the screen drawn (the widget tree no longer changes)."""
    app = pilot.app
    count = -1
    while True:
        await pilot.pause()
        now = len(list(app.screen.walk_children(with_self=True)))
        if now == count:
            break
        count = now
    app.screen._on_timer_update()  # draw the screen now
    await pilot.pause()


def widgets_in(view: Markdown) -> int:
    return len(list(view.walk_children(with_self=True)))


async def finished(text: str) -> dict[str, float]:
    """One finished reply mounted whole."""
    app = Bench()
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        wall, cpu = time.perf_counter(), time.process_time()
        view = View(text)
        await app.query_one(ChatLog).mount(view)
        await settle(pilot)
        result = {
            "wall": time.perf_counter() - wall,
            "cpu": time.process_time() - cpu,
            "widgets": widgets_in(view),
        }
        assert view.source == text
    return result


async def reopened(texts: list[str]) -> dict[str, float]:
    """A chat reopened: its earlier replies mounted at once."""
    app = Bench()
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        wall, cpu = time.perf_counter(), time.process_time()
        await app.query_one(ChatLog).mount_all([View(text, classes="earlier") for text in texts])
        await settle(pilot)
        return {"wall": time.perf_counter() - wall, "cpu": time.process_time() - cpu}


async def streamed(text: str, pace: float) -> dict[str, float]:
    """A reply streamed in `DELTA`-byte deltas, one each `pace` seconds, while keys are typed."""
    app = Bench()
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        app.query_one(TextArea).focus()
        await pilot.pause()
        stalls = Stalls()
        beating = asyncio.create_task(stalls.beat())
        sent: list[float] = []
        typing = True

        async def type_keys() -> None:
            while typing:
                sent.append(time.perf_counter())
                app.post_message(events.Key("x", "x"))  # as the driver does with a key
                await asyncio.sleep(KEY_EVERY)

        typist = asyncio.create_task(type_keys())
        wall, cpu = time.perf_counter(), time.process_time()
        view = View("")
        await app.query_one(ChatLog).mount(view)
        stream = Markdown.get_stream(view)
        for at in range(0, len(text), DELTA):
            await stream.write(text[at : at + DELTA])
            await asyncio.sleep(pace)
        last = time.perf_counter()
        typing = False
        await typist
        await stream.stop()
        await settle(pilot)
        end = time.perf_counter()
        stalls.running = False
        await beating
        assert view.source == text
        # each key against the first change of the input after it was sent
        delays = []
        for when in sent:
            after = [t for t in app.typed_at if t >= when]
            if after:
                delays.append(after[0] - when)
        return {
            "wall": end - wall,
            "cpu": time.process_time() - cpu,
            "after_last": end - last,
            "stall": stalls.worst,
            "key_median": statistics.median(delays) if delays else float("nan"),
            "key_max": max(delays, default=float("nan")),
            "keys": len(delays),
            "widgets": widgets_in(view),
        }


def median_of(
    runs: int, measure: Callable[[T], Coroutine[object, object, dict[str, float]]], argument: T
) -> dict[str, float]:
    """The run of median wall time (a shared machine's noise moves single runs a lot)."""
    found = sorted(
        (asyncio.run(measure(argument)) for _ in range(runs)), key=lambda result: result["wall"]
    )
    return found[len(found) // 2]


def main() -> int:
    global View
    args = sys.argv[1:]
    if "--before" in args:
        args.remove("--before")
        View = TextualReply
    print(f"replies drawn by {View.__name__}", flush=True)
    big = long_reply()
    small = long_reply(1_400)
    print(f"reply: {len(big):,} B, {big.count(chr(10))} lines", flush=True)
    asyncio.run(finished(small))  # warm up: imports, Pygments' lexers
    for name, text in (("1.4 KB", small), ("11 KB", big)):
        found = median_of(3, finished, text)
        print(
            f"finished {name} reply: {found['wall']:.3f} s wall, {found['cpu']:.3f} s CPU, "
            f"{found['widgets']:.0f} widgets (median of 3)",
            flush=True,
        )
    found = median_of(3, reopened, [big] + [small] * 7)
    print(
        f"reopen, 8 replies (11 KB + 7 × 1.4 KB): {found['wall']:.3f} s wall, "
        f"{found['cpu']:.3f} s CPU (median of 3)",
        flush=True,
    )
    pace = float(args[0]) if args else PACE
    found = asyncio.run(streamed(big, pace))
    print(
        f"streamed 11 KB in {DELTA} B deltas every {pace * 1e3:.0f} ms: "
        f"{found['wall']:.2f} s wall ({len(big) / DELTA * pace:.2f} s of deltas), "
        f"{found['cpu']:.2f} s CPU, done {found['after_last']:.3f} s after the last delta; "
        f"longest loop stall {found['stall'] * 1e3:.0f} ms; typed keys reached the input in "
        f"{found['key_median'] * 1e3:.0f} ms median, {found['key_max'] * 1e3:.0f} ms max "
        f"({found['keys']:.0f} keys); {found['widgets']:.0f} widgets",
        flush=True,
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
