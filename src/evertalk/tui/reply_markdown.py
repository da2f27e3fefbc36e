"""Ever's replies drawn as Markdown by Rich, one widget a reply, fast enough to stream.

Textual's `Markdown` widget mounts a widget per block (a heading, a list item, a table cell):
a long reply is hundreds of widgets, and styling and laying them out took seconds, while the
keys typed meanwhile waited. Here a reply is one widget, `ReplyBody`, that renders Rich's
Markdown renderable. Its text is split into its top-level blocks (a paragraph, a list, a code
block, a table); each block is rendered once for a width and kept, so a redraw only yields the
kept lines. While a reply streams, every block but the last is complete (a block ends only
where the next one starts): only the last is parsed and rendered again, at most every
`REDRAW_EVERY` seconds.

The colours come from the app's Textual theme (headings, inline code, bullets, quotes, tables),
close to those of Textual's `Markdown` widget; code blocks are highlighted by Pygments. A click
on a link opens it.
"""

from __future__ import annotations

import time
from collections import OrderedDict
from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar

from markdown_it import MarkdownIt
from markdown_it.token import Token
from rich.color import Color as RichColor
from rich.console import Console, ConsoleOptions, RenderResult
from rich.errors import StyleSyntaxError
from rich.markdown import BlockQuote, CodeBlock, ListItem, MarkdownElement, UnknownElement
from rich.markdown import Markdown as RichMarkdown
from rich.segment import Segment
from rich.style import Style
from rich.syntax import Syntax
from rich.text import Text
from rich.theme import Theme
from textual.color import Color, ColorParseError
from textual.geometry import Size
from textual.strip import Strip
from textual.widget import Widget

from evertalk.terminal_text import escape_controls

if TYPE_CHECKING:
    from textual.app import App
    from textual.timer import Timer

REDRAW_EVERY = 0.1  # seconds: a streaming reply is drawn again at most this often

# The parser Rich's Markdown uses: CommonMark with tables and strikethrough.
PARSER = MarkdownIt().enable("strikethrough").enable("table")


# --- the look ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Look:
    """The styles a reply is drawn with, from the app's theme."""

    key: tuple[str, bool]  # the theme's name and whether ANSI colours are used
    theme: Theme  # Rich's `markdown.*` styles
    code_theme: str  # Pygments style of code blocks
    code_background: str | None  # None: the terminal's own background


_looks: dict[tuple[str, bool], Look] = {}


def look_of(app: App[Any]) -> Look:
    key = (app.theme, app.native_ansi_color)
    look = _looks.get(key)
    if look is None:
        look = _looks[key] = make_look(
            app.theme_variables, dark=app.current_theme.dark, ansi=key[1], key=key
        )
    return look


def make_look(variables: dict[str, str], *, dark: bool, ansi: bool, key: tuple[str, bool]) -> Look:
    """Rich styles close to what Textual's Markdown widget draws with the same variables."""
    under = _color(variables.get("background"))
    if under is None or under.ansi is not None:
        under = Color(0, 0, 0) if dark else Color(255, 255, 255)

    def color(name: str, alpha: float = 1.0) -> RichColor | None:
        found = _color(variables.get(name))
        if found is None or found.a * alpha == 0:
            return None
        if found.ansi is not None:  # an ANSI theme's colour: as it is, the terminal's own
            return found.rich_color
        return (under + found.multiply_alpha(alpha)).rich_color

    def style(
        fore: RichColor | None = None, back: RichColor | None = None, text: str = ""
    ) -> Style:
        try:
            base = Style.parse(text or "none")
        except StyleSyntaxError:  # a text style Rich does not know
            base = Style()
        return base + Style(color=fore, bgcolor=back)

    styles: dict[str, Style] = {}
    for level in range(1, 7):
        name = f"markdown-h{level}"
        styles[f"markdown.h{level}"] = style(
            color(f"{name}-color"),
            color(f"{name}-background"),
            variables.get(f"{name}-text-style", "bold"),
        )
    if dark:
        styles["markdown.code"] = style(color("text-warning", 0.95), color("warning", 0.1))
        marks = color("text-primary")
        quote_bar = color("text-primary", 0.5)
    else:
        styles["markdown.code"] = style(color("text-error", 0.95), color("error", 0.05))
        marks = color("text-secondary")
        quote_bar = marks
    styles.update(
        {
            "markdown.paragraph": Style(),
            "markdown.text": Style(),
            "markdown.item": Style(),
            "markdown.list": Style(),
            "markdown.code_block": Style(),
            "markdown.block_quote": Style(),
            "markdown.block_quote.bar": style(quote_bar),
            "markdown.item.bullet": style(marks, text="bold"),
            "markdown.item.number": style(marks),
            "markdown.hr": style(color("secondary")),
            "markdown.link": Style(underline=True),
            "markdown.link_url": Style(underline=True),
            "markdown.table.border": style(color("foreground", 0.2)),
            "markdown.table.header": style(color("primary"), text="bold"),
            "markdown.kbd": Style(bold=True),
            "markdown.html": Style(dim=True),
        }
    )
    if ansi:
        styles["markdown.code"] = Style(bold=True)
        return Look(key, Theme(styles), "ansi_dark" if dark else "ansi_light", "default")
    # as Textual's code blocks: the background a little darker (lighter in a light theme)
    code_background = (under + Color(0, 0, 0, 0.1)) if dark else (under + Color(255, 255, 255, 0.3))
    return Look(key, Theme(styles), "monokai" if dark else "default", code_background.hex)


def _color(value: str | None) -> Color | None:
    if not value or value in ("transparent", "initial", "none") or value.startswith("auto"):
        return None
    try:
        return Color.parse(value)
    except ColorParseError:
        return None


# --- Rich's Markdown, on tokens parsed already ---------------------------------------------------


class FencedCode(CodeBlock):
    """A code block with the look's background, padded as Textual pads it."""

    background: str | None = None

    @classmethod
    def create(cls, markdown: RichMarkdown, token: Token) -> FencedCode:
        block = cls((token.info or "").partition(" ")[0] or "text", markdown.code_theme)
        if isinstance(markdown, BlockMarkdown):
            block.background = markdown.look.code_background
        return block

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        yield KeptSyntax(str(self.text).rstrip(), self.lexer_name, self.theme, self.background)


class KeptSyntax(Syntax):
    """Syntax whose highlighting (Pygments, the most of its time) is kept for the next render:
    the same code is drawn again at another width, or once its block is complete."""

    kept: ClassVar[OrderedDict[tuple[Any, ...], Text]] = OrderedDict()
    KEEP = 256  # code blocks

    def __init__(self, code: str, lexer: str, theme: str, background: str | None) -> None:
        super().__init__(
            code, lexer, theme=theme, word_wrap=True, padding=(1, 2), background_color=background
        )
        self.key = (lexer, theme, background)

    def highlight(self, code: str, line_range: tuple[int | None, int | None] | None = None) -> Text:
        key = (code, line_range, *self.key)
        found = self.kept.get(key)
        if found is None:
            found = self.kept[key] = super().highlight(code, line_range)
            if len(self.kept) > self.KEEP:
                self.kept.popitem(last=False)
        else:
            self.kept.move_to_end(key)
        return found.copy()


class HtmlBlock(MarkdownElement):
    """A block of HTML, which Rich would drop: shown as it is written."""

    @classmethod
    def create(cls, markdown: RichMarkdown, token: Token) -> HtmlBlock:
        return cls(token.content)

    def __init__(self, html: str) -> None:
        self.html = html

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        yield Text(self.html.rstrip("\n"), style="markdown.html")


class Quote(BlockQuote):
    """A block quote: a bar on the left, the text in its own colours."""

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        lines = console.render_lines(self.elements, options.update(width=options.max_width - 2))
        bar = Segment("▌ ", console.get_style("markdown.block_quote.bar", default="none"))
        new_line = Segment.line()
        for line in lines:
            yield bar
            yield from line
            yield new_line


class NumberedItem(ListItem):
    """An item of a list: numbered `1.` as Textual numbers them (Rich writes `1`)."""

    def render_number(
        self, console: Console, options: ConsoleOptions, number: int, last_number: int
    ) -> RenderResult:
        width = len(str(last_number)) + 3
        lines = console.render_lines(
            self.elements, options.update(width=options.max_width - width), style=self.style
        )
        style = console.get_style("markdown.item.number", default="none")
        numeral = Segment(f"{number}.".rjust(width - 1) + " ", style)
        padding = Segment(" " * width, style)
        new_line = Segment.line()
        for index, line in enumerate(lines):
            yield padding if index else numeral
            yield from line
            yield new_line


class BlockMarkdown(RichMarkdown):
    """Rich's Markdown renderable for tokens parsed already (one top-level block of a reply)."""

    elements: ClassVar[dict[str, type[MarkdownElement]]] = {
        **RichMarkdown.elements,
        "fence": FencedCode,
        "code_block": FencedCode,
        "blockquote_open": Quote,
        "list_item_open": NumberedItem,
        "html_block": HtmlBlock,
    }

    def __init__(self, tokens: list[Token], look: Look) -> None:
        # Not RichMarkdown.__init__: it builds a parser (about 1 ms) and parses the text again.
        self.markup = ""
        self.parsed = tokens
        self.code_theme = look.code_theme
        self.justify = None
        self.style = "none"
        self.hyperlinks = True
        self.inline_code_lexer = None
        self.inline_code_theme = look.code_theme
        self.look = look

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        rendered = iter(super().__rich_console__(console, options))
        for first in rendered:
            # Rich puts a blank line before a block that holds others (a list, a quote, a
            # table) even when it comes first: `Document` puts the blank lines between blocks
            if first != Segment.line():
                yield first
            break
        yield from rendered


# --- a reply: its blocks, each rendered once for a width -----------------------------------------


class Block:
    """A top-level block of a reply, and its lines as drawn for the last widths asked."""

    __slots__ = ("drawn", "new_line", "tokens")

    def __init__(self, tokens: list[Token]) -> None:
        self.tokens = tokens
        element = BlockMarkdown.elements.get(tokens[0].type, UnknownElement)
        self.new_line = element.new_line  # as Rich does: a blank line before the next block
        self.drawn: dict[tuple[Any, ...], list[Strip]] = {}

    def strips(self, console: Console, options: ConsoleOptions, style: Styling) -> list[Strip]:
        key = (options.max_width, style.look.key, style.base, style.link)
        found = self.drawn.get(key)
        if found is None:
            with console.use_theme(style.look.theme):
                lines = console.render_lines(
                    BlockMarkdown(self.tokens, style.look), options, pad=False
                )
            found = [Strip(style.apply(line)) for line in lines]
            if len(self.drawn) >= 2:  # two widths: with and without the log's scrollbar
                self.drawn.pop(next(iter(self.drawn)))
            self.drawn[key] = found
        return found


@dataclass(frozen=True)
class Styling:
    """How the segments Rich renders are drawn in the widget."""

    look: Look
    base: Style  # the widget's colours, under the Markdown's own
    link: Style | None  # Textual's style of links

    def apply(self, line: Iterable[Segment]) -> list[Segment]:
        """The line on the widget's colours; a link opens on a click and looks like Textual's."""
        base, link = self.base, self.link
        styled: list[Segment] = []
        for text, style, _ in line:
            if style is not None and style.link:
                style += Style.from_meta({"@click": f"open_link({style.link!r})"})
                if link is not None:
                    style += link
            styled.append(Segment(text, base + style))
        return styled


def split_blocks(tokens: list[Token]) -> list[tuple[int, list[Token]]]:
    """The tokens of each top-level block, with the line the block starts on."""
    blocks: list[tuple[int, list[Token]]] = []
    for token in tokens:
        if token.level == 0 and token.nesting >= 0:
            blocks.append((token.map[0] if token.map else 0, [token]))
        elif blocks:
            blocks[-1][1].append(token)
    return blocks


def normalized(text: str) -> str:
    """Line ends as markdown-it reads them: its line numbers count line feeds only."""
    return text.replace("\r\n", "\n").replace("\r", "\n")


class Document:
    """The blocks of a reply.

    `settled` blocks are complete; `last` is the block at the end, which more text may still
    change: it is parsed again (from `settled_at`) whenever the text grew.
    """

    def __init__(self) -> None:
        self.reset()

    def reset(self) -> None:
        self.settled: list[Block] = []
        self.last: Block | None = None
        self.settled_at = 0  # characters of the (normalized) text in settled blocks and before
        self.env: dict[str, Any] = {}  # markdown-it's: the link references found so far

    def parse(self, text: str) -> None:
        """Bring the blocks up to `text`, which begins with the text parsed before."""
        tail = text[self.settled_at :]
        blocks = split_blocks(PARSER.parse(tail, self.env))
        if not blocks:
            self.last = None
            return
        self.settled += [Block(tokens) for _, tokens in blocks[:-1]]
        start, tokens = blocks[-1]
        # where the last block starts (its tokens count lines from the start of `tail`; a block
        # rendered on its own does not need them)
        self.settled_at += sum(len(line) + 1 for line in tail.split("\n", start)[:start])
        self.last = Block(tokens)

    @property
    def blocks(self) -> list[Block]:
        return self.settled if self.last is None else [*self.settled, self.last]

    def strips(self, console: Console, options: ConsoleOptions, style: Styling) -> list[Strip]:
        """Every line of the reply, a blank one between two blocks as Rich puts it."""
        lines: list[Strip] = []
        gap = False
        for block in self.blocks:
            drawn = block.strips(console, options, style)
            if not drawn:
                continue  # nothing Rich draws (an empty list item, say): no blank line either
            if gap:
                lines.append(BLANK)
            lines += drawn
            gap = block.new_line
        return lines


BLANK = Strip([], 0)


class ReplyBody(Widget):
    """A reply's text drawn as Markdown: one widget however long the reply.

    It draws lines itself (Textual's line API): a redraw builds no more than the lines shown.
    """

    DEFAULT_CSS = """
    ReplyBody {
        height: auto;
        width: 1fr;
    }
    """

    def __init__(self, text: str = "") -> None:
        super().__init__()
        self.text = text
        self.document = Document()
        self._parsed = ""  # the normalized text the document holds
        self._lines: list[Strip] | None = None  # as drawn at `_width`; None: to draw again
        self._width = 0
        self._redraw: Timer | None = None
        self._drawn_at = 0.0  # time.monotonic() of the last redraw asked

    def set_text(self, text: str) -> None:
        """The whole text again (it may not begin with the old one)."""
        self.text = text
        self._schedule()

    def extend(self, text: str) -> None:
        """More text at the end, as a stream brings it: drawn at most every `REDRAW_EVERY`."""
        self.text += text
        self._schedule()

    def _schedule(self) -> None:
        if not (self.is_mounted and self.is_attached):
            return  # drawn when it is mounted (or never: it was removed)
        if self._redraw is not None:
            return  # a redraw is due already: it shows this text too
        wait = self._drawn_at + REDRAW_EVERY - time.monotonic()
        if wait <= 0:
            self._draw()
        else:
            self._redraw = self.set_timer(wait, self._draw)

    def _draw(self) -> None:
        self._redraw = None
        self._drawn_at = time.monotonic()
        self._lines = None
        self.refresh(layout=True)

    def _parse(self) -> None:
        # escaped as it is parsed, not as it streams in: `normalized` must see a CR with the LF
        # after it (a chunk may end between them); and escaping goes character by character, so
        # what was parsed before still begins what is parsed now
        text = escape_controls(normalized(self.text))
        if text != self._parsed:
            if not text.startswith(self._parsed):
                self.document.reset()
            self.document.parse(text)
            self._parsed = text

    def lines(self, width: int) -> list[Strip]:
        """The reply's lines at `width` (its text as of the last redraw asked)."""
        if self._lines is None or self._width != width:
            self._parse()
            app = self.app
            style = Styling(
                look_of(app),
                self.visual_style.rich_style,
                self.link_style if self.auto_links else None,
            )
            options = app.console_options.update_width(width).update(height=None, highlight=False)
            self._lines = self.document.strips(app.console, options, style)
            self._width = width
        return self._lines

    def get_content_height(self, container: Size, viewport: Size, width: int) -> int:
        return len(self.lines(width))

    def render_line(self, y: int) -> Strip:
        width = self.size.width
        lines = self.lines(width)
        if y < len(lines):
            return lines[y]
        return Strip.blank(width, self.visual_style.rich_style)

    def notify_style_update(self) -> None:
        super().notify_style_update()
        self._lines = None  # the colours or the theme may have changed

    def action_open_link(self, href: str) -> None:
        self.app.open_url(href)
