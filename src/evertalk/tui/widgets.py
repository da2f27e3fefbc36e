"""The pieces of the chat screen: the rows of the log, the input, the status bar, and the dialog
that asks before a tool runs.

Text that comes from the model, the tools or the log is never read as Textual markup: a tool's
output full of `[brackets]` shows as it is. Nor does it reach the terminal with its control
characters: each widget shows the text through `escape_controls` (ESC as `\\x1b`), and keeps it
as it came in its `text` (or `output_text`, `source`) for the app.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any, ClassVar, Final

from rich.text import Text
from textual import events
from textual.actions import SkipAction
from textual.app import ComposeResult
from textual.await_complete import AwaitComplete
from textual.binding import Binding, BindingType
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.markup import escape
from textual.message import Message
from textual.screen import ModalScreen
from textual.widgets import Button, Collapsible, Label, Markdown, Static, TextArea

from evertalk.client.asks import request
from evertalk.grants import Decision
from evertalk.memory.text import MESSAGE_LIMIT, split_text, valid_unicode
from evertalk.protocol.replies import Ask
from evertalk.protocol.status import AgentStatus
from evertalk.terminal_text import escape_controls, one_line
from evertalk.tui.ask_text import ask_body
from evertalk.tui.commands import CommandError, SlashSuggester, file_size, matching, read_line
from evertalk.tui.reply_markdown import ReplyBody
from evertalk.tui.status import status_line

CLIP_TITLE = 90  # characters of a tool's input in its row's title
CLIP_SHOWN = 20_000  # characters of a tool's input or output shown in its row


def clip(text: str, size: int) -> str:
    return text if len(text) <= size else text[: size - 1] + "…"


# --- rows of the log -------------------------------------------------------------------------


PASTE_LINES: Final = 10  # a paste of more lines than this shows folded in the chat
PASTE_CHARS: Final = 2_000  # … or of more characters
HEAD_LINES: Final = 3  # lines of a long message shown above its size while it is folded


def is_big(text: str) -> bool:
    """Whether a paste (or a message) is long enough to show folded in the chat."""
    return len(text) > PASTE_CHARS or len(text.splitlines()) > PASTE_LINES


def size_of(text: str) -> str:
    """`50 KB, 650 lines`: the bytes the text takes in UTF-8, and its lines."""
    lines = max(1, len(text.splitlines()))
    size = len(text.encode("utf-8", "surrogatepass"))
    return f"{file_size(size)}, {lines:,} line{'s' if lines != 1 else ''}"


def log_pages(text: str) -> int:
    """The messages the log keeps a text as: a long one is split (SPEC §1.6)."""
    return len(split_text(valid_unicode(text))) if len(text) > MESSAGE_LIMIT else 1


def paste_label(text: str) -> str:
    return f"[pasted {size_of(text)}]"


def folded_parts(text: str, pasted: Sequence[str] = ()) -> list[tuple[str, bool]] | None:
    """A long message as it shows folded: (text, whether it stands for a part) in order, or
    None for one short enough to show whole. The big pastes the window knows of (its own) each
    become `[pasted 50 KB, 650 lines]`; a long message with none known (another window's, an
    earlier session's) shows its first lines, then its size."""
    spans: list[tuple[int, int]] = []
    for piece in (piece for piece in pasted if piece and is_big(piece)):
        at = text.find(piece)
        # the same text pasted twice: each paste takes the next place it is found at
        while at >= 0 and any(at < end and start < at + len(piece) for start, end in spans):
            at = text.find(piece, at + 1)
        if at >= 0:
            spans.append((at, at + len(piece)))
    if spans:
        parts: list[tuple[str, bool]] = []
        done = 0
        for start, end in sorted(spans):
            if start > done:
                parts.append((text[done:start], False))
            parts.append((paste_label(text[start:end]), True))
            done = end
        if done < len(text):
            parts.append((text[done:], False))
        return parts
    if not is_big(text):
        return None
    head = clip("\n".join(text.splitlines()[:HEAD_LINES]), PASTE_CHARS // 4)
    return [(head + "\n", False), (f"[long message: {size_of(text)} in all]", True)]


HELD_LABEL: Final = "held: it waits for the running turn, which reads it at its next step"


class UserRow(Static):
    """A message the user sent; `held` while it waits for the running turn.

    A long one shows folded (`folded_parts`), so that a big paste does not fill the chat: a
    click, or Enter once Shift+Tab has reached it, shows it whole, and folds it again."""

    DEFAULT_CSS = """
    UserRow {
        border-left: thick $accent;
        padding: 0 1;
        margin: 1 0;
        background: $boost;
    }
    UserRow.held { border-left: thick $warning; }
    UserRow.earlier { color: $text-muted; }
    UserRow:focus { background: $accent 20%; }
    """

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("enter", "unfold", "show whole", show=False),
    ]

    def __init__(
        self,
        text: str,
        *,
        held: bool = False,
        classes: str | None = None,
        pasted: Sequence[str] = (),
    ) -> None:
        self.text = text
        self.parts = folded_parts(text, pasted)
        self.folded = self.parts is not None
        self.held = held
        super().__init__(self._content(), markup=False, classes=classes)
        self.can_focus = self.parts is not None  # a short one has nothing to open
        self.set_class(held, "held")
        self._tip()

    @property
    def shown(self) -> str:
        """The text as it shows now, folded or whole (unescaped)."""
        if self.parts is None or not self.folded:
            return self.text
        return "".join(part for part, _ in self.parts)

    def _content(self) -> Text:
        if self.parts is None or not self.folded:
            content = Text(escape_controls(self.text))
        else:
            content = Text()
            for part, label in self.parts:
                content.append(escape_controls(part), style="bold italic" if label else "")
        if self.held:
            content.append(f"\n{HELD_LABEL}", style="italic")
        return content

    def _tip(self) -> None:
        tips = []
        if self.held:
            tips.append("held: Ever reads it between two steps of the running turn")
        if self.parts is not None:
            tips.append("a click shows it whole" if self.folded else "a click folds it again")
        self.tooltip = "; ".join(tips) or None

    def delivered(self) -> None:
        self.held = False
        self.remove_class("held")
        self.update(self._content())
        self._tip()

    def action_unfold(self) -> None:
        """Show it whole, or folded again."""
        if self.parts is None:
            return
        self.folded = not self.folded
        self.update(self._content())
        self._tip()

    def on_click(self, event: events.Click) -> None:
        if self.parts is not None:
            event.stop()
            self.action_unfold()


class ReplyView(Markdown):
    """One reply of Ever, streamed in as Markdown.

    A `Markdown` for the app (`source`, `update`, `append`, `Markdown.get_stream`), but drawn
    by a single `ReplyBody` (Rich's Markdown, see `reply_markdown`): Textual's `Markdown` mounts
    a widget per block, and a long reply took seconds to draw while the keys typed waited.
    """

    DEFAULT_CSS = """
    ReplyView {
        margin: 1 0;
        padding: 0 1;
        background: transparent;
    }
    ReplyView > *:last-child { margin-bottom: 0; }
    ReplyView.earlier { color: $text-muted; }
    """

    def __init__(
        self,
        markdown: str | None = None,
        *,
        name: str | None = None,
        id: str | None = None,
        classes: str | None = None,
    ) -> None:
        super().__init__(None, name=name, id=id, classes=classes)
        self._markdown = markdown or ""
        self.body = ReplyBody(self._markdown)

    def compose(self) -> ComposeResult:
        yield self.body

    def on_mount(self, event: events.Mount) -> None:
        event.prevent_default()  # and so not Markdown's `_on_mount`: a widget per block

    def update(self, markdown: str) -> AwaitComplete:
        self._markdown = markdown
        self.body.set_text(markdown)
        return AwaitComplete()

    def append(self, markdown: str) -> AwaitComplete:
        """More of the reply: shown at once in `source`, drawn within `REDRAW_EVERY`."""
        self._markdown += markdown
        self.body.extend(markdown)
        return AwaitComplete()


class WorkRow(ReplyView):
    """A subagent's report (`[Name] …`), drawn as fast as a reply."""

    DEFAULT_CSS = """
    WorkRow {
        border-left: thick $success;
        margin: 1 0;
        padding: 0 1;
        background: transparent;
    }
    WorkRow > *:last-child { margin-bottom: 0; }
    """


class ThoughtRow(Static):
    """The model's reasoning: shown dimmed while it comes, never logged."""

    DEFAULT_CSS = """
    ThoughtRow {
        color: $text-muted;
        text-style: italic;
        padding: 0 1;
        margin: 1 0;
    }
    """

    def __init__(self) -> None:
        super().__init__("", markup=False)
        self.text = ""

    def add(self, text: str) -> None:
        self.text += text
        self.update(escape_controls(self.text.strip()))


class NoteRow(Static):
    """One line from the app: `memory: …`, `waiting for summaries (3)`, `cancelled`, errors."""

    DEFAULT_CSS = """
    NoteRow {
        color: $text-muted;
        padding: 0 1;
    }
    NoteRow.error { color: $text-error; }
    NoteRow.memory { color: $text-secondary; }
    """

    def __init__(self, text: str, *, classes: str | None = None) -> None:
        super().__init__(escape_controls(text), markup=False, classes=classes)
        self.text = text

    def set_text(self, text: str) -> None:
        self.text = text
        self.update(escape_controls(text))


class OutputRow(Static):
    """What a slash command printed."""

    DEFAULT_CSS = """
    OutputRow {
        padding: 0 1;
        margin: 1 0;
        border-left: thick $secondary;
    }
    OutputRow.error { border-left: thick $error; color: $text-error; }
    """

    def __init__(self, text: str, *, classes: str | None = None) -> None:
        super().__init__(escape_controls(text), markup=False, classes=classes)
        self.text = text

    def set_text(self, text: str) -> None:
        self.text = text
        self.update(escape_controls(text))

    def withdraw(self, why: str) -> None:
        """Shown no more (it quoted what a forget took away): `why` in its place."""
        self.text = why
        self.update(why)
        self.remove_class("recalls")


ALWAYS: Final = {"shell": "Always this command", "fetch": "Always this host"}
"""The "always" button where it covers less than the tool (`agent/policy.py`)."""


def describe_call(tool: str, tool_input: dict[str, Any]) -> str:
    """A tool call as the user reads it: the command, the file and what changes in it."""
    command = tool_input.get("command")
    if tool == "shell" and isinstance(command, str):
        text = "$ " + command
        if "timeout" in tool_input:
            text += f"\n(timeout {tool_input['timeout']} s)"
        return text
    path = tool_input.get("path")
    if tool == "write" and isinstance(path, str) and isinstance(tool_input.get("content"), str):
        content = tool_input["content"]
        count = len(content.splitlines())
        lines = f"{count} line{'s' if count != 1 else ''}"
        return f"{path}: {lines}\n\n{clip(content, CLIP_SHOWN)}"
    if tool == "edit" and isinstance(path, str):
        old, new = str(tool_input.get("old", "")), str(tool_input.get("new", ""))
        return f"{path}\n\n- {clip(old, CLIP_SHOWN // 2)}\n\n+ {clip(new, CLIP_SHOWN // 2)}"
    return clip(json.dumps(tool_input, ensure_ascii=False, indent=2), CLIP_SHOWN)


def call_summary(tool: str, tool_input: dict[str, Any]) -> str:
    """The call on one line, for a row's title."""
    if tool == "shell" and isinstance(tool_input.get("command"), str):
        shown = tool_input["command"]
    elif isinstance(tool_input.get("path"), str):
        shown = tool_input["path"]
    elif tool == "agent" and isinstance(tool_input.get("name"), str):
        shown = tool_input["name"]
    elif tool == "fetch" and isinstance(tool_input.get("url"), str):
        shown = tool_input["url"]
    else:
        shown = ", ".join(f"{key}={value}" for key, value in tool_input.items())
    return clip(one_line(shown), CLIP_TITLE)


class ToolRow(Collapsible):
    """A tool call and, once it finished, its result; collapsed, its title on one line."""

    DEFAULT_CSS = """
    ToolRow {
        margin: 0;
        padding: 0 0 0 1;
        border-top: none;
        background: transparent;
    }
    ToolRow > Contents { padding: 0 0 0 3; }
    ToolRow CollapsibleTitle { color: $text-muted; padding: 0; }
    ToolRow.error CollapsibleTitle { color: $text-error; }
    ToolRow .tool-output { color: $text-muted; }
    ToolRow.error .tool-output { color: $text-error; }
    """

    def __init__(self, name: str, tool_input: dict[str, Any]) -> None:
        self.tool = name
        self.summary = call_summary(name, tool_input)
        self.output = Static("", markup=False, classes="tool-output")
        self.output_text = ""
        self.is_error = False
        self.finished = False
        shown = escape_controls(describe_call(name, tool_input))
        call = Static(shown, markup=False, classes="tool-input")
        super().__init__(call, self.output, title=self._heading("…"), collapsed=True)

    def _heading(self, mark: str, error: str = "") -> str:
        """The title as markup; `heading` keeps it as shown."""
        title = f"{mark} {self.tool}  {self.summary}"
        if error:
            title += f"  — {clip(one_line(error), CLIP_TITLE)}"
        self.heading = escape_controls(title)
        return escape(self.heading)

    def finish(self, output: str, failed: bool) -> None:
        """The call's result; `failed` marks it ✗, with the output's last line in the title: an
        error's one line, or a command's `[exit status 2]`."""
        self.finished = True
        self.is_error = failed
        self.set_class(failed, "error")
        last = output.rstrip().rpartition("\n")[2]
        self.title = self._heading("✗" if failed else "✓", last if failed else "")
        self.output.update(escape_controls(clip(output, CLIP_SHOWN)))
        self.output_text = output


# --- the input -------------------------------------------------------------------------------


def completion(value: str) -> str:
    """What Tab or Right adds to a partly typed command: the rest of the only command it may
    become, or what all those it may become share (`/me` → `/memory`); nothing when they part
    at once (`/i`: `/image` or `/instructions`, which the hint lists)."""
    if not value.startswith("/") or "\n" in value or value.startswith("//"):
        return ""
    found = [
        candidate
        for candidate in SlashSuggester.CANDIDATES
        if candidate.startswith(value) and candidate.rstrip() != value.rstrip()
    ]
    if not found:
        return ""
    shared = min(found, key=len)
    while not all(candidate.startswith(shared) for candidate in found):
        shared = shared[:-1]
    return shared[len(value) :]


class PromptInput(TextArea):
    """The message being typed: Enter sends it, Shift+Enter or Ctrl+J starts a new line, Up and
    Down at the first or last line go through the messages sent before, and a slash command is
    completed as it is typed (Tab or Right takes the suggestion). Page Up and Down scroll the
    log. Esc clears it, Ctrl+U deletes to the start of the line typed (not of the row it wraps
    to), and Ctrl+Z brings back what either took.

    A big paste stays whole here, where it can be read and edited before it goes; the pastes
    are kept (`pasted`) so that the chat can show each folded once the message is sent."""

    DEFAULT_CSS = """
    PromptInput {
        height: auto;
        min-height: 3;
        max-height: 12;
        border: round $accent 50%;
        padding: 0 1;
    }
    PromptInput:focus { border: round $accent; }
    """

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("enter", "submit", "send", show=True),
        Binding("ctrl+j", "newline", "new line", show=True, key_display="^j"),
        Binding("ctrl+d", "delete_or_quit", "quit", show=True),
        Binding("escape", "clear_input", "clear", show=False),
    ]

    NEWLINE_KEYS: ClassVar[frozenset[str]] = frozenset({"shift+enter", "ctrl+j", "alt+enter"})

    class Submitted(Message):
        def __init__(self, text: str, pasted: Sequence[str] = ()) -> None:
            super().__init__()
            self.text = text
            self.pasted = list(pasted)  # the big pastes in it, to show folded

    class Empty(Message):
        """Enter with nothing typed: a turn that waits for the chat to catch up starts now."""

    class Page(Message):
        """Page Up or Down: the log scrolls (the input is short)."""

        def __init__(self, pages: int) -> None:
            super().__init__()
            self.pages = pages

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(
            "",
            soft_wrap=True,
            show_line_numbers=False,
            tab_behavior="focus",
            placeholder="Message Ever: Enter sends, Ctrl+J starts a new line, /help lists more",
            id=id,
        )
        self.sent: list[str] = []  # the messages sent before, oldest first
        self.pasted: list[str] = []  # the big pastes since the input was last empty
        self._place: int | None = None  # where in the history Up/Down got to
        self._draft = ""  # what was typed before going into the history

    async def _on_key(self, event: events.Key) -> None:
        if event.key == "enter":
            self._stop(event)
            self.action_submit()
        elif event.key in self.NEWLINE_KEYS:
            self._stop(event)
            self.action_newline()
        elif event.key == "tab" and self.suggestion:
            self._stop(event)
            self.action_complete()
        elif event.key == "tab" and len(matching(self.text)) > 1:
            # more than one command fits what is typed: the hint lists them, and Tab stays
            # here rather than take the focus to the rows
            self._stop(event)
            self.app.bell()

    async def _on_paste(self, event: events.Paste) -> None:
        """As TextArea pastes, and a big paste is kept as it reads in the input (its line
        ends as the input has them) for the chat to fold."""
        event.prevent_default()  # TextArea's own paste would insert it a second time
        if self.read_only:
            return
        start, end = sorted(self.selection)
        result = self.replace(event.text, start, end, maintain_selection_offset=False)
        self.move_cursor(result.end_location)
        self.focus()
        pasted = self.get_text_range(start, result.end_location)
        if is_big(pasted):  # kept before the input's Changed is handled, which shows it
            self.pasted.append(pasted)

    def pastes(self) -> list[str]:
        """The big pastes still in the input as they were pasted."""
        text = self.text
        return [piece for piece in self.pasted if piece in text]

    @staticmethod
    def _stop(event: events.Key) -> None:
        event.stop()
        event.prevent_default()

    def action_submit(self) -> None:
        text = self.text
        if not text.strip():
            self.post_message(self.Empty())
            return
        pasted = self.pastes()
        self.remember(text)
        self.clear()
        self.pasted = []
        self.post_message(self.Submitted(text, pasted))

    def clear_input(self) -> None:
        """Empty the input (Ctrl+Z undoes it); Up starts again from the last message sent."""
        self.clear()
        self.pasted = []
        self._place = None
        self._draft = ""

    def action_clear_input(self) -> None:
        """Esc: clear what is typed; on an empty input, Esc is left to others."""
        if not self.text:
            raise SkipAction()
        self.clear_input()

    def action_delete_to_start_of_line(self) -> None:
        """Ctrl+U: delete back to the start of the line as typed, as a shell does; TextArea's
        own stops at the start of the row the line wraps to on the screen. At a line's start
        it joins the line to the one before."""
        if self.read_only:
            return
        start, end = sorted(self.selection)
        row, column = start
        if start != end or column > 0:
            self.delete((row, 0), end, maintain_selection_offset=False)
        elif row > 0:
            self.delete((row - 1, len(self.document[row - 1])), start)

    def action_delete_or_quit(self) -> None:
        """Ctrl+D: on an empty input the app's binding (quit) runs; else delete forward, as in a
        shell. Being the input's own binding, it comes after the keys typed before it."""
        if not self.text:
            raise SkipAction()
        self.action_delete_right()

    def action_newline(self) -> None:
        start, end = self.selection
        self.replace("\n", start, end, maintain_selection_offset=False)

    def action_complete(self) -> None:
        if self.suggestion:
            self.insert(self.suggestion)

    def action_cursor_page_up(self) -> None:
        self.post_message(self.Page(-1))

    def action_cursor_page_down(self) -> None:
        self.post_message(self.Page(1))

    def update_suggestion(self) -> None:
        at_end = self.cursor_location == self.document.end
        self.suggestion = completion(self.text) if at_end else ""

    # -- history --------------------------------------------------------------------------

    def remember(self, text: str) -> None:
        if not self.sent or self.sent[-1] != text:
            self.sent.append(text)
        self._place = None
        self._draft = ""

    def edit_again(self) -> None:
        """`/edit`: the last message sent (not a command) back in the input, to change and
        send again as a new message; what the input held goes (Ctrl+Z brings it back)."""
        text = next((t for t in reversed(self.sent) if isinstance(read_line(t), str)), None)
        if text is None:
            raise CommandError("no message sent yet: nothing to edit")
        self.replace(text, (0, 0), self.document.end, maintain_selection_offset=False)
        self.move_cursor(self.document.end)
        self.pasted = [text] if is_big(text) else []
        self._place = None

    def action_cursor_up(self, select: bool = False) -> None:
        if (
            select
            or not self.sent
            or not self.navigator.is_first_wrapped_line(self.cursor_location)
        ):
            super().action_cursor_up(select)
            return
        if self._place is None:
            self._draft = self.text
            self._place = len(self.sent)
        if self._place == 0:
            return
        self._place -= 1
        self._show(self.sent[self._place])

    def action_cursor_down(self, select: bool = False) -> None:
        if (
            select
            or self._place is None
            or not self.navigator.is_last_wrapped_line(self.cursor_location)
        ):
            super().action_cursor_down(select)
            return
        self._place += 1
        if self._place >= len(self.sent):
            self._place = None
            self._show(self._draft)
        else:
            self._show(self.sent[self._place])

    def _show(self, text: str) -> None:
        self.load_text(text)
        self.move_cursor(self.document.end)


class CommandHint(Static):
    """Under the input while a slash command is typed: the commands it may become."""

    DEFAULT_CSS = """
    CommandHint {
        color: $text-muted;
        padding: 0 2;
        height: auto;
        max-height: 9;
        display: none;
    }
    CommandHint.shown { display: block; }
    """

    def show_for(self, value: str) -> None:
        found = matching(value)
        if not found:
            self.remove_class("shown")
            return
        width = max(len(command.usage) for command in found)
        self.update("\n".join(f"{c.usage.ljust(width)}  {c.summary}" for c in found))
        self.add_class("shown")

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__("", markup=False, id=id)


class StatusBar(Static):
    """One line: the turn model, `mem N/128K`, the compactor's activity, the session's cost."""

    DEFAULT_CSS = """
    StatusBar {
        height: 1;
        padding: 0 1;
        background: $panel;
        color: $text;
    }
    """

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__("", markup=False, id=id)
        self.text = ""
        self.status: AgentStatus | None = None  # what the line says, when it is the status

    def set_text(self, text: str) -> None:
        """A line of its own (`connecting to the service…`) in place of the status."""
        self.status = None
        self._show(text)

    def show(self, status: AgentStatus) -> None:
        """The service's status, fitted to the bar's width (and again whenever that changes)."""
        self.status = status
        self._show(status_line(status, self.content_size.width or None))

    def on_resize(self, event: events.Resize) -> None:
        # at once: the next look at the status may be a while off, and a line cut for a narrow
        # terminal must not stay cut in a wide one
        if self.status is not None:
            self._show(status_line(self.status, self.content_size.width or None))

    def _show(self, text: str) -> None:
        if text != self.text:
            self.text = text
            self.update(escape_controls(text))


class ChatLog(VerticalScroll):
    """The rows, oldest first; it follows the end while new rows come, unless scrolled up.
    Scrolled up to its top (or further up once there), it says so (`AtTop`): the app may
    have older rows to show."""

    DEFAULT_CSS = """
    ChatLog {
        height: 1fr;
        padding: 0 1;
        scrollbar-size-vertical: 1;
        scrollbar-gutter: stable;  /* a long reply is not drawn twice when the bar appears */
    }
    """

    class AtTop(Message):
        """The user scrolled to the top of the log, or tried to go past it."""

    def watch_scroll_y(self, old_value: float, new_value: float) -> None:
        super().watch_scroll_y(old_value, new_value)
        if new_value <= 0 < old_value:
            self.post_message(self.AtTop())

    def on_mouse_scroll_up(self, event: events.MouseScrollUp) -> None:
        # handled before the scroll itself: at the top already, or rows that all fit, where
        # the wheel moves nothing and so no scroll says it reached the top
        if self.scroll_y <= 0 and not (event.ctrl or event.shift):
            self.post_message(self.AtTop())

    def page_up(self) -> None:
        """Page Up from the input: one page up, or older rows when at the top already."""
        if self.scroll_y <= 0:
            self.post_message(self.AtTop())
        else:
            self.scroll_page_up()


# --- the permission dialog -------------------------------------------------------------------


class PermissionScreen(ModalScreen[Decision]):
    """Ever wants to run a tool whose policy is `ask`: allow it once, always, or deny it.

    The dialog opens while the user may be typing a message, so nothing typed can allow a tool
    by accident: for `GRACE` seconds its buttons are disabled, nothing has the focus (a click
    cannot move it to Allow) and no key answers, then Deny has it (Enter denies). The keys it
    does not use (all of them in the grace period) are kept in `typed` for the app to hand back
    to the input once it closes: the user's words are not lost. An answer is a key once the
    grace period is over (y: once, a: always, n: deny), Tab or Left/Right to a button then
    Enter, or a click. `ask` is the service's question (docs/protocol.md).
    """

    GRACE: ClassVar[float] = 0.7  # seconds: longer than a typist's next few keys take
    AUTO_FOCUS = None  # nothing has the focus in the grace period: `_arm` gives it to Deny
    DIALOG_KEYS: ClassVar[frozenset[str]] = frozenset(
        {"tab", "shift+tab", "left", "right", "enter", "escape"}
    )
    ANSWER_KEYS: ClassVar[dict[str, Decision]] = {"y": "once", "a": "always", "n": "deny"}

    DEFAULT_CSS = """
    PermissionScreen { align: center middle; }
    PermissionScreen > Vertical {
        width: 90%;
        max-width: 110;
        height: auto;
        max-height: 90%;
        border: thick $warning;
        background: $surface;
        padding: 1 2;
    }
    PermissionScreen #question { text-style: bold; margin-bottom: 1; width: 100%; }
    PermissionScreen VerticalScroll {
        height: auto;
        max-height: 20;
        background: $boost;
        padding: 0 1;
    }
    PermissionScreen Horizontal { height: auto; margin-top: 1; }
    PermissionScreen Button { margin-right: 2; }
    PermissionScreen #keys { color: $text-muted; margin-top: 1; width: 100%; }
    PermissionScreen.-narrow > Vertical { width: 100%; padding: 0 1; }
    PermissionScreen.-narrow Button { min-width: 0; margin-right: 1; }
    """
    # below 80 columns the dialog takes the whole width and its buttons only what their labels
    # need, so that all three fit on one line down to about 50 columns. Textual sets these
    # classes; its annotation of the name (`ClassVar[…] | None`) reads to mypy as an instance
    # variable, so a ClassVar here would not type-check.
    HORIZONTAL_BREAKPOINTS = [(0, "-narrow"), (80, "-wide")]  # noqa: RUF012

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("left", "app.focus_previous", "previous", show=False),
        Binding("right", "app.focus_next", "next", show=False),
        Binding("escape", "answer('deny')", "deny", show=False),
    ]

    def __init__(self, ask: Ask) -> None:
        super().__init__()
        self.ask = ask
        self.tool = ask.tool
        self.tool_input: dict[str, Any] = ask.input
        self.typed: list[events.Key] = []
        self.answerable = False  # the grace period is over

    def compose(self) -> ComposeResult:
        always = ALWAYS.get(self.tool, f"Always allow {self.tool}")
        with Vertical():
            question = escape_controls(request(self.ask))
            yield Label(question, id="question", markup=False)
            with VerticalScroll():
                call = describe_call(self.tool, self.tool_input)
                yield Static(ask_body(self.ask, call), id="call")
            with Horizontal():
                yield Button("Allow once", id="once", variant="success", disabled=True)
                yield Button(always, id="always", variant="primary", disabled=True)
                yield Button("Deny", id="deny", variant="error", disabled=True)
            yield Label(
                "y allows it once, a always, n or Esc denies (or Tab, Left/Right and Enter). "
                "What you type as it opens stays in your message.",
                id="keys",
                markup=False,
            )

    def on_mount(self) -> None:
        self.set_timer(self.GRACE, self._arm)

    def _arm(self) -> None:
        """The grace period is over: the buttons answer."""
        for button in self.query(Button):
            button.disabled = False
        self.query_one("#deny", Button).focus()
        self.answerable = True

    def on_key(self, event: events.Key) -> None:
        """Every key passes here before the bindings (the app checks them once the key has gone
        up from the focused button): a key that must not answer is kept and goes no further."""
        if event.key in self.DIALOG_KEYS and self.answerable:
            return
        event.stop()
        event.prevent_default()
        if self.answerable and event.key in self.ANSWER_KEYS:
            self.dismiss(self.ANSWER_KEYS[event.key])
            return
        self.typed.append(event)  # in the grace period even Enter: it was meant for the input

    def on_button_pressed(self, event: Button.Pressed) -> None:
        event.stop()
        if event.button.id in ("once", "always", "deny"):
            self.action_answer(event.button.id)

    def action_answer(self, decision: str) -> None:
        if not self.answerable:
            return
        if decision == "once":
            self.dismiss("once")
        elif decision == "always":
            self.dismiss("always")
        else:
            self.dismiss("deny")
