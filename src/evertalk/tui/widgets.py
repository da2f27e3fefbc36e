"""The pieces of the chat screen: the rows of the log, the input, the status bar, and the dialog
that asks before a tool runs.

Text that comes from the model, the tools or the log is never read as Textual markup: a tool's
output full of `[brackets]` shows as it is. Nor does it reach the terminal with its control
characters: each widget shows the text through `escape_controls` (ESC as `\\x1b`), and keeps it
as it came in its `text` (or `output_text`, `source`) for the app.
"""

from __future__ import annotations

import json
from typing import Any, ClassVar

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

from evertalk.agent.permissions import Decision
from evertalk.terminal_text import escape_controls, one_line
from evertalk.tui.commands import SlashSuggester, matching
from evertalk.tui.reply_markdown import ReplyBody

CLIP_TITLE = 90  # characters of a tool's input in its row's title
CLIP_SHOWN = 20_000  # characters of a tool's input or output shown in its row


def clip(text: str, size: int) -> str:
    return text if len(text) <= size else text[: size - 1] + "…"


# --- rows of the log -------------------------------------------------------------------------


class UserRow(Static):
    """A message the user sent; `held` while it waits for the running turn."""

    DEFAULT_CSS = """
    UserRow {
        border-left: thick $accent;
        padding: 0 1;
        margin: 1 0;
        background: $boost;
    }
    UserRow.held { border-left: thick $warning; }
    UserRow.earlier { color: $text-muted; }
    """

    def __init__(self, text: str, *, held: bool = False, classes: str | None = None) -> None:
        super().__init__(escape_controls(text), markup=False, classes=classes)
        self.text = text
        self.set_class(held, "held")
        if held:
            self.tooltip = "held: Ever reads it between two steps of the running turn"

    def delivered(self) -> None:
        self.remove_class("held")
        self.tooltip = None


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

    def finish(self, output: str, is_error: bool) -> None:
        self.finished = True
        self.is_error = is_error
        self.set_class(is_error, "error")
        self.title = self._heading("✗" if is_error else "✓", output if is_error else "")
        self.output.update(escape_controls(clip(output, CLIP_SHOWN)))
        self.output_text = output


# --- the input -------------------------------------------------------------------------------


class PromptInput(TextArea):
    """The message being typed: Enter sends it, Shift+Enter or Ctrl+J starts a new line, Up and
    Down at the first or last line go through the messages sent before, and a slash command is
    completed as it is typed (Tab or Right takes the suggestion). Page Up and Down scroll the
    log."""

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
    ]

    NEWLINE_KEYS: ClassVar[frozenset[str]] = frozenset({"shift+enter", "ctrl+j", "alt+enter"})

    class Submitted(Message):
        def __init__(self, text: str) -> None:
            super().__init__()
            self.text = text

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
        self.suggester = SlashSuggester()
        self.sent: list[str] = []  # the messages sent before, oldest first
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

    @staticmethod
    def _stop(event: events.Key) -> None:
        event.stop()
        event.prevent_default()

    def action_submit(self) -> None:
        text = self.text
        if not text.strip():
            return
        self.remember(text)
        self.clear()
        self.post_message(self.Submitted(text))

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
        value = self.text
        at_end = self.cursor_location == self.document.end
        found = self.suggester.suggest(value) if at_end else None
        self.suggestion = found[len(value) :] if found else ""

    # -- history --------------------------------------------------------------------------

    def remember(self, text: str) -> None:
        if not self.sent or self.sent[-1] != text:
            self.sent.append(text)
        self._place = None
        self._draft = ""

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

    def set_text(self, text: str) -> None:
        if text != self.text:
            self.text = text
            self.update(escape_controls(text))


class ChatLog(VerticalScroll):
    """The rows, oldest first; it follows the end while new rows come, unless scrolled up."""

    DEFAULT_CSS = """
    ChatLog {
        height: 1fr;
        padding: 0 1;
        scrollbar-size-vertical: 1;
        scrollbar-gutter: stable;  /* a long reply is not drawn twice when the bar appears */
    }
    """


# --- the permission dialog -------------------------------------------------------------------


class PermissionScreen(ModalScreen[Decision]):
    """Ever wants to run a tool whose policy is `ask`: allow it once, always, or deny it.

    The dialog opens while the user may be typing a message, so nothing typed can allow a tool
    by accident: for `GRACE` seconds its buttons are disabled and nothing has the focus (a click
    cannot move it to Allow), then Deny has it (Enter denies); it has no letter keys. The keys
    it does not use (all of them in the grace period) are kept in `typed` for the app to hand
    back to the input once it closes: the user's words are not lost. An answer takes Tab or
    Left/Right to a button, then Enter; or a click.
    """

    GRACE: ClassVar[float] = 0.7  # seconds: longer than a typist's next few keys take
    AUTO_FOCUS = None  # nothing has the focus in the grace period: `_arm` gives it to Deny
    DIALOG_KEYS: ClassVar[frozenset[str]] = frozenset(
        {"tab", "shift+tab", "left", "right", "enter", "escape"}
    )

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

    def __init__(self, tool: str, tool_input: dict[str, Any]) -> None:
        super().__init__()
        self.tool = tool
        self.tool_input = tool_input
        self.typed: list[events.Key] = []
        self.answerable = False  # the grace period is over

    def compose(self) -> ComposeResult:
        always = "Always this command" if self.tool == "shell" else f"Always allow {self.tool}"
        with Vertical():
            question = escape_controls(f"Ever wants to run {self.tool}. Allow it?")
            yield Label(question, id="question", markup=False)
            with VerticalScroll():
                call = escape_controls(describe_call(self.tool, self.tool_input))
                yield Static(call, markup=False, id="call")
            with Horizontal():
                yield Button("Allow once", id="once", variant="success", disabled=True)
                yield Button(always, id="always", variant="primary", disabled=True)
                yield Button("Deny", id="deny", variant="error", disabled=True)
            yield Label(
                "Tab or Left/Right chooses, Enter answers, Esc denies. "
                "What you type meanwhile stays in your message.",
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
