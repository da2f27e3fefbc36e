"""Ever's replies drawn as Markdown (`ReplyView`), driven by Textual's Pilot: the text shows,
a streamed reply ends as the whole one, a long reply stays a couple of widgets (what keeps it
fast: Textual's own `Markdown` mounted a widget per block), width changes wrap it again, links
open. No timings here: `python -m bench.tui_render` measures them."""

from __future__ import annotations

import pytest
from textual.app import App, ComposeResult
from textual.geometry import Region
from textual.pilot import Pilot
from textual.widgets import Markdown
from tui_support import wait_until

from evertalk.tui.widgets import ChatLog, ReplyView

pytestmark = pytest.mark.anyio

SIZE = (100, 40)

SHORT = """# Rotating the logs

The rule is in `/etc/logrotate.d/notes`; see [the manual](https://example.org/logrotate).

- keep **four** files
- compress them

```python
def rotate(path: str) -> None:
    print("rotating", path)
```

| file | kept |
|------|------|
| notes.log.1 | yes |
"""


def long_reply(sections: int = 150) -> str:
    """About 11 KB: headings, paragraphs, lists, code blocks, quotes and a table."""
    parts = ["# Rotating the logs of the notes service", ""]
    for i in range(1, sections + 1):
        parts += [f"## Step {i} of the rotation" if i % 2 else f"### Detail {i}", ""]
        kind = i % 4
        if kind == 0:
            parts += [f"The rule in `/etc/logrotate.d/notes-{i}` keeps **four** old files.", ""]
        elif kind == 1:
            parts += [f"- keep {i} files", "- compress the old ones", ""]
        elif kind == 2:
            parts += ["```python", f"def rotate_{i}(path: str) -> None:", "    pass", "```", ""]
        else:
            parts += [f"1. stop service {i}", "2. start it again", ""]
        if i == 50:
            parts += ["| file | kept |", "|---|---|", "| notes.log.1 | yes |", ""]
    return "\n".join(parts)


class Log(App[None]):
    def compose(self) -> ComposeResult:
        yield ChatLog()


def drawn(view: ReplyView) -> list[str]:
    """Every line the reply draws (not only those on the screen), trailing spaces dropped."""
    body = view.body
    return [
        strip.text.rstrip()
        for strip in body.render_lines(Region(0, 0, body.size.width, body.size.height))
    ]


def on_screen(app: App[None]) -> str:
    """The text of the screen as the terminal would show it (Textual has no public call for it)."""
    return "\n".join(strip.text for strip in app.screen._compositor.render_strips())


def widgets(view: ReplyView) -> int:
    return len(list(view.walk_children(with_self=True)))


async def mounted(pilot: Pilot[None], view: ReplyView) -> ReplyView:
    await pilot.app.query_one(ChatLog).mount(view)
    await pilot.pause()
    if view.source.strip():
        await wait_until(pilot, lambda: view.body.size.height > 0)
        await pilot.pause()
    return view


async def streamed(pilot: Pilot[None], text: str, size: int = 50) -> ReplyView:
    """A reply streamed as the app streams one: `Markdown.get_stream`, `size`-byte deltas."""
    view = await mounted(pilot, ReplyView(""))
    stream = Markdown.get_stream(view)
    for at in range(0, len(text), size):
        await stream.write(text[at : at + size])
    await stream.stop()
    return view


async def test_a_finished_reply_shows_its_markdown() -> None:
    async with Log().run_test(size=SIZE) as pilot:
        view = await mounted(pilot, ReplyView(SHORT))
        assert view.source == SHORT
        lines = drawn(view)
        text = "\n".join(lines)
        assert "Rotating the logs" in text
        assert "# Rotating" not in text, "the heading is drawn as a heading"
        assert "The rule is in /etc/logrotate.d/notes; see the manual." in text
        assert "• keep four files" in text
        assert '    print("rotating", path)' in text, "the code keeps its indentation"
        assert any("notes.log.1" in line and "yes" in line for line in lines), "the table"
        screen = on_screen(pilot.app)
        assert "Rotating the logs" in screen
        assert "def rotate(path: str) -> None:" in screen


async def test_text_is_never_read_as_markup() -> None:
    text = "Use [bold]x[/bold] and [link=https://a.org]y[/link] as written."
    async with Log().run_test(size=SIZE) as pilot:
        view = await mounted(pilot, ReplyView(text))
        assert drawn(view)[0] == text


async def test_a_long_reply_is_one_widget_and_shows_all_of_it() -> None:
    text = long_reply()
    assert len(text) > 10_000
    async with Log().run_test(size=SIZE) as pilot:
        view = await mounted(pilot, ReplyView(text))
        assert widgets(view) < 10, "a widget per block is what made long replies slow"
        lines = drawn(view)
        assert len(lines) > 400
        assert "Step 149 of the rotation" in lines
        assert "  def rotate_146(path: str) -> None:" in lines, "code, padded as in Textual"
        assert lines.index("Step 1 of the rotation") < lines.index("Step 149 of the rotation")


async def test_a_streamed_reply_ends_as_the_whole_one() -> None:
    text = long_reply(40)
    async with Log().run_test(size=SIZE) as pilot:
        whole = await mounted(pilot, ReplyView(text))
        view = await streamed(pilot, text)
        assert view.source == text
        await wait_until(pilot, lambda: drawn(view) == drawn(whole))
        assert widgets(view) < 10


async def test_a_stream_shows_its_text_while_it_comes() -> None:
    async with Log().run_test(size=SIZE) as pilot:
        view = await mounted(pilot, ReplyView(""))
        stream = Markdown.get_stream(view)
        await stream.write("# Plan\n\nFirst, stop the ser")
        await wait_until(pilot, lambda: "First, stop the ser" in drawn(view))
        assert drawn(view)[0].strip() == "Plan"
        await stream.write("vice.\n\n```sh\nsystemctl stop notes\n")  # an unclosed code block
        await wait_until(pilot, lambda: any("systemctl stop notes" in x for x in drawn(view)))
        await stream.write("```\n\nDone.")
        await stream.stop()
        await wait_until(pilot, lambda: drawn(view)[-1] == "Done.")
        assert "First, stop the service." in drawn(view)
        assert view.source.endswith("Done.")


async def test_update_replaces_the_text() -> None:
    async with Log().run_test(size=SIZE) as pilot:
        view = await mounted(pilot, ReplyView("# Old\n\nold text"))
        await view.update("New text, with\r\nWindows line ends.")
        await wait_until(pilot, lambda: drawn(view) == ["New text, with Windows line ends."])
        assert view.source == "New text, with\r\nWindows line ends."


async def test_a_narrower_window_wraps_the_reply_again() -> None:
    text = " ".join(f"word{i}" for i in range(60)) + "\n"
    async with Log().run_test(size=SIZE) as pilot:
        view = await mounted(pilot, ReplyView(text))
        wide = drawn(view)
        await pilot.resize_terminal(40, 40)
        await wait_until(pilot, lambda: len(drawn(view)) > len(wide))
        narrow = drawn(view)
        assert max(len(line) for line in narrow) <= 40
        assert " ".join(narrow).split() == text.split()


async def test_a_click_on_a_link_opens_it(monkeypatch: pytest.MonkeyPatch) -> None:
    opened: list[str] = []
    async with Log().run_test(size=SIZE) as pilot:
        monkeypatch.setattr(pilot.app, "open_url", lambda url, **_: opened.append(url))
        view = await mounted(pilot, ReplyView("See [the manual](https://example.org/a_(b)) now."))
        x = drawn(view)[0].index("manual")
        await pilot.click(view.body, offset=(x, 0))
        assert opened == ["https://example.org/a_(b)"]
