"""The chat screen: the log of the session, the input, the status bar; and `run_terminal`.

`run_terminal(home)` opens the agent first, so that a chat already open in another process is
reported (with its pid) before any screen is drawn, then runs the app on the same event loop.
On a machine with no provider configured, the setup screen comes first. The agent lives in a
task of its own (`ChatApp.keep_agent`, started by `hosting`): `/setup` saves new settings, has
that task close the agent and open another on them, and the app goes on with it.

The app consumes the agent's events in one worker (`_pump`), in order: each reply streams into
a Markdown row, each tool call is a collapsed row whose title gets ✓ or ✗ when it finished,
thoughts are dimmed. It is also the agent's `Asker`: a tool whose policy is `ask` opens a dialog
(allow once, always, deny) and the turn waits for the answer.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import subprocess
import sys
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from dataclasses import replace
from pathlib import Path
from typing import Any, ClassVar

import anyio
from anyio.abc import TaskStatus
from textual import events
from textual.app import App, ComposeResult, SuspendNotSupported
from textual.binding import Binding, BindingType
from textual.css.query import NoMatches
from textual.markup import escape
from textual.widget import Widget
from textual.widgets import Footer, Markdown, TextArea
from textual.widgets.markdown import MarkdownStream

from evertalk.agent.permissions import Decision
from evertalk.agent.policy import DENIED
from evertalk.agent.session import Agent, NotConfigured, configuration_problem
from evertalk.config import KEY_VARIABLES, ConfigError, load_config, warn_on_stderr
from evertalk.protocol.events import (
    AgentEvent,
    CallUsage,
    CatchingUp,
    Delivered,
    MemoryWarning,
    ReplyLogged,
    Retrying,
    Settling,
    TextDelta,
    ThinkingDelta,
    ToolFinished,
    ToolStarted,
    ToolsUnused,
    TurnEnded,
    TurnStarted,
    catching_up_text,
)
from evertalk.providers.base import ProviderError
from evertalk.store.errors import ChatLocked, StoreError
from evertalk.store.records import MessageRecord
from evertalk.terminal_text import escape_controls
from evertalk.tui import commands
from evertalk.tui.commands import CommandError, Invocation, read_line
from evertalk.tui.setup import SetupScreen
from evertalk.tui.status import MemoryWatch, status_line
from evertalk.tui.widgets import (
    ChatLog,
    CommandHint,
    NoteRow,
    OutputRow,
    PermissionScreen,
    PromptInput,
    ReplyView,
    StatusBar,
    ThoughtRow,
    ToolRow,
    UserRow,
    WorkRow,
    clip,
    one_line,
)

EARLIER = 8  # messages of the log shown when the app opens, at least
EARLIER_MOST = 40  # messages read back to start them at the user message that opened a turn
HISTORY = 200  # messages the user sent before, for Up and Down
HISTORY_SCAN = 2_000  # messages read back to find them
STATUS_EVERY = 0.5  # seconds between two looks at the agent's status

KEY_HINT = "check your key with /setup (it also changes the provider and the base URL)"

EMPTY_REPLY = "(Ever gave an empty reply)"

STOPPED = {
    "cancelled": "cancelled: what was logged stays logged",
    "context_full": "the turn stopped: the context is full",
    "max_steps": "the turn stopped: too many model calls",
    "max_tokens": "the turn stopped: the reply reached the output limit",
    "refusal": "the turn stopped: the model refused to go on",
}

# A failed model call (TurnEnded's text says so) that reads as a refused key: the provider's
# error kind does not reach the app, its message does (a 401, "invalid x-api-key", …)
FAILED_CALL = "the model call failed:"
AUTH_WORDS = re.compile(
    r"\b40[13]\b|auth|api[ _-]?key|credential|forbidden|permission|billing|credit", re.IGNORECASE
)

Editor = Callable[[Path], None]
AgentOpener = Callable[["ChatApp"], AbstractAsyncContextManager[Agent]]


def open_agent(app: ChatApp) -> AbstractAsyncContextManager[Agent]:
    """The agent of the terminal app: the settings in config.toml, the app as its asker."""
    return Agent.open(app.home, asker=app)


def cannot_edit(editor: str, why: str) -> str:
    return f"cannot run the editor {editor!r}: {why} (set $VISUAL or $EDITOR)"


def editor_command(editor: str) -> list[str]:
    """The words of $VISUAL or $EDITOR, checked before the app suspends: a CommandError when
    they cannot be split or name no program on the PATH."""
    try:
        argv = shlex.split(editor)
    except ValueError as error:
        raise CommandError(cannot_edit(editor, str(error))) from None
    if not argv:
        raise CommandError(cannot_edit(editor, "it is empty"))
    if shutil.which(argv[0]) is None:
        raise CommandError(cannot_edit(editor, f"{argv[0]} is not found"))
    return argv


def refused_key(error: str | None, kind: str | None = None) -> bool:
    """Whether a turn's error reads as the provider refusing the key."""
    if kind == "auth":
        return True
    return bool(error and error.startswith(FAILED_CALL) and AUTH_WORDS.search(error))


# --- the rows of the log shown when the app opens ---------------------------------------------


def earlier_records(read: Callable[[int], MessageRecord], t: int) -> list[MessageRecord]:
    """The last EARLIER messages of a log of `t`, and before them the rest of the turn they
    start in: from the user message that opened it, unless that is more than EARLIER_MOST back
    (then the last EARLIER alone)."""
    low = max(0, t - EARLIER_MOST)
    records = [read(i) for i in range(low, t)]
    last = max(0, len(records) - EARLIER)
    opened = [at for at, record in enumerate(records[: last + 1]) if record.kind == "user"]
    start = opened[-1] if opened else last
    return records[start:]


def earlier_rows(records: list[MessageRecord]) -> list[Widget]:
    """Rows as a live session shows them: a `tool` message and the `echo` after it make one
    tool row; an echo of no call (`turn stopped: …`) is a note."""
    rows: list[Widget] = []
    call: ToolRow | None = None  # the last call, waiting for its echo
    for record in join_pages(records):
        if record.kind == "echo" and call is not None:
            output = record.text.removeprefix(f"{call.tool}: ")
            call.finish(output, output.startswith(REFUSED))
            call = None
            continue
        if call is not None:  # the process ended before the call's result was logged
            call.finish("no result was logged", True)
            call = None
        if record.kind == "tool":
            call = ToolRow(*tool_call(record.text))
            rows.append(call)
        else:
            rows.append(earlier_row(record))
    if call is not None:
        call.finish("no result was logged", True)
    return rows


# the starts of an echo that reads as a failed call (the log does not keep whether it failed)
REFUSED = (DENIED, "cancelled by the user")


def earlier_row(record: MessageRecord) -> Widget:
    if record.kind == "user":
        return UserRow(record.text, classes="earlier")
    if record.kind == "ever":
        return ReplyView(record.text, classes="earlier")
    if record.kind == "work":
        return WorkRow(record.text)
    prefix = "" if record.kind == "echo" else f"{record.kind}: "
    return NoteRow(prefix + clip(one_line(record.text), 160))


def tool_call(text: str) -> tuple[str, dict[str, Any]]:
    """A `tool` message's name and input (`shell {"command":"ls"}`)."""
    name, _, raw = text.partition(" ")
    try:
        value = json.loads(raw)
    except ValueError:
        value = None
    return name, value if isinstance(value, dict) else {"input": raw}


def join_pages(records: list[MessageRecord]) -> list[MessageRecord]:
    """The records with the pages of a long message (keys `K.0`, `K.1`, …) joined into one."""
    joined: list[MessageRecord] = []
    for record in records:
        page, before = page_of(record.key), (joined[-1] if joined else None)
        if (
            page is not None
            and before is not None
            and before.kind == record.kind
            and page_of(before.key) == (page[0], page[1] - 1)
        ):
            # the joined record keeps the later key, so that the next page finds it
            joined[-1] = replace(before, text=before.text + record.text, key=record.key)
            continue
        joined.append(record)
    return joined


def page_of(key: str | None) -> tuple[str, int] | None:
    """(K, n) for the key `K.n` of page n of a long message; None for a whole one."""
    stem, dot, number = (key or "").rpartition(".")
    return (stem, int(number)) if dot and number.isdigit() else None


class ChatApp(App[int]):
    """The chat in the terminal. Attach an open agent before running it."""

    TITLE = "evertalk"
    ENABLE_COMMAND_PALETTE = False
    CSS = """
    Screen { layout: vertical; }
    Footer { height: 1; }
    NoteRow.command { margin-top: 1; }
    OutputRow { margin: 0 0 1 0; }
    """
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("ctrl+c", "interrupt", "cancel turn", priority=True),
        Binding("ctrl+d", "quit", "quit"),  # the input's own Ctrl+D defers to it when empty
    ]

    def __init__(
        self, home: Path, *, editor: Editor | None = None, notices: Sequence[str] = ()
    ) -> None:
        super().__init__()
        self.home = home
        self.notices = list(notices)  # what loading the settings corrected, shown as warnings
        self.agent: Agent | None = None
        self.editor = editor  # None: $VISUAL or $EDITOR, the app suspended meanwhile
        self.memory_watch = MemoryWatch()
        self._reply: ReplyView | None = None
        self._stream: MarkdownStream | None = None
        self._streamed = ""  # streamed reply text not yet matched by a ReplyLogged
        self._thought: ThoughtRow | None = None
        self._tools: dict[str, ToolRow] = {}
        self._held: list[UserRow] = []
        self.attachments = commands.Attachments()
        self._settling: NoteRow | None = None
        self._said = True  # the running turn has shown a reply or a tool call
        self._wake: anyio.Event | None = None  # tells `keep_agent` to reopen or to close
        self._reopen = False
        self._released = False
        self.failure: str | None = None  # why the app stopped without an agent

    def attach(self, agent: Agent) -> None:
        self.agent = agent

    def _agent(self) -> Agent:
        if self.agent is None:
            raise RuntimeError("the app runs with an open agent: call attach() first")
        return self.agent

    # -- layout ---------------------------------------------------------------------------

    def compose(self) -> ComposeResult:
        yield ChatLog(id="log")
        yield PromptInput(id="prompt")
        yield CommandHint(id="hint")
        yield StatusBar(id="status")
        yield Footer()

    @property
    def chat_log(self) -> ChatLog:
        return self.query_one(ChatLog)

    @property
    def prompt(self) -> PromptInput:
        return self.query_one(PromptInput)

    @property
    def status_bar(self) -> StatusBar:
        return self.query_one(StatusBar)

    async def on_mount(self) -> None:
        agent = self._agent()
        self.chat_log.anchor()
        self.prompt.focus()
        rows = self._earlier_rows()
        warnings = [*self.notices, *agent.chat.warnings]
        rows += [NoteRow(f"warning: {w}", classes="error") for w in warnings]
        await self.chat_log.mount_all(rows)
        self.prompt.sent = self._sent_before()
        self.refresh_status()
        self.set_interval(STATUS_EVERY, self.refresh_status)
        self._start_pump(agent)

    def _start_pump(self, agent: Agent) -> None:
        self.run_worker(self._pump(agent), name="events", group="events", exit_on_error=True)

    def _earlier_rows(self) -> list[Widget]:
        chat = self._agent().chat
        t = chat.t
        if t == 0:
            return [NoteRow("A new chat. Say hello; /help lists the keys and the commands.")]
        records = earlier_records(chat.store.read_message, t)
        start = t - len(records)
        intro = NoteRow(
            f"{t:,} messages in this chat"
            + (f"; the last {t - start} follow" if start else "")
            + ". /memory shows what Ever remembers, /help the keys and the commands."
        )
        return [intro, *earlier_rows(records)]

    def _sent_before(self) -> list[str]:
        chat = self._agent().chat
        found: list[str] = []
        for i in range(chat.t - 1, max(-1, chat.t - 1 - HISTORY_SCAN), -1):
            record = chat.store.read_message(i)
            if record.kind == "user":
                found.append(record.text)
                if len(found) == HISTORY:
                    break
        return found[::-1]

    async def _add(self, *rows: Widget) -> None:
        await self.chat_log.mount_all(rows)

    # -- the status bar -------------------------------------------------------------------

    def refresh_status(self) -> None:
        if self.agent is None:
            return
        status = self.agent.status()
        try:
            bar, log = self.status_bar, self.chat_log
        except NoMatches:  # the app is closing
            return
        bar.set_text(status_line(status, bar.content_size.width or None))
        row = self.memory_watch.sample(status)
        if row is not None:
            log.mount(NoteRow(row, classes="memory"))

    # -- the agent's events ---------------------------------------------------------------

    async def _pump(self, agent: Agent) -> None:
        async for event in agent.events():  # it ends when the agent closes
            try:
                await self.show(event)
            except NoMatches:  # the app is closing: its widgets are gone
                return
            except Exception as error:  # a row that fails to show must not stop the session
                await self._add(NoteRow(f"display error: {error!r}", classes="error"))

    async def show(self, event: AgentEvent) -> None:
        if isinstance(event, TextDelta):
            await self._text(event.text)
        elif isinstance(event, ThinkingDelta):
            await self._think(event.text)
        elif isinstance(event, ReplyLogged):
            await self._reply_logged(event.text)
        elif isinstance(event, ToolStarted):
            self._said = True
            await self._end_reply()
            row = ToolRow(event.name, event.input)
            self._tools[event.call_id] = row
            await self._add(row)
        elif isinstance(event, ToolFinished):
            found = self._tools.pop(event.call_id, None)
            if found is None:
                found = ToolRow(event.name, {})
                await self._add(found)
            found.finish(event.output, event.is_error)
        elif isinstance(event, Delivered):
            await self._delivered(event)
        elif isinstance(event, Settling):
            await self._waiting(f"waiting for summaries ({event.unbuilt})")
        elif isinstance(event, CatchingUp):
            await self._waiting(f"{catching_up_text(event)} (Ctrl+C cancels the turn)")
        elif isinstance(event, TurnStarted):
            await self._turn_started(event.message_ids)
        elif isinstance(event, TurnEnded):
            await self._turn_ended(event)
        elif isinstance(event, CallUsage):
            self.refresh_status()
        elif isinstance(event, MemoryWarning):
            await self._add(NoteRow(event.text, classes="memory"))
        elif isinstance(event, ToolsUnused):  # the row says why; the bar keeps a mark of it
            await self._add(NoteRow(event.text, classes="error"))
            self.refresh_status()
        elif isinstance(event, Retrying):  # a model call tried again (`retrying (2/3) after …`)
            await self._add(NoteRow(event.line))

    async def _text(self, text: str) -> None:
        self._thought = None
        if self._reply is None or self._stream is None:
            self._reply = ReplyView("")
            await self._add(self._reply)
            self._stream = Markdown.get_stream(self._reply)
        self._streamed += text
        await self._stream.write(text)

    async def _think(self, text: str) -> None:
        if self._reply is not None:
            await self._end_reply()
        if self._thought is None:
            self._thought = ThoughtRow()
            await self._add(self._thought)
        self._thought.add(text)

    async def _reply_logged(self, text: str) -> None:
        self._said = self._said or bool(text.strip())
        at = self._streamed.find(text)
        if at >= 0:
            self._streamed = self._streamed[at + len(text) :]
        else:  # it did not stream: show it whole
            await self._end_reply()
            await self._add(ReplyView(text))

    async def _end_reply(self) -> None:
        stream, self._stream, self._reply = self._stream, None, None
        self._thought = None
        if stream is not None:
            await stream.stop()

    async def _delivered(self, event: Delivered) -> None:
        if event.kind == "work":
            await self._end_reply()
            await self._add(WorkRow(event.text))
            return
        for row in self._held:
            if row.text == event.text:
                row.delivered()
                self._held.remove(row)
                return

    async def _waiting(self, text: str) -> None:
        """One row while the turn waits for summaries (SPEC §6.1) or for the chat to catch up,
        updated in place; it goes when the turn starts or ends."""
        if self._settling is None:
            self._settling = NoteRow(text)
            await self._add(self._settling)
        else:
            self._settling.set_text(text)

    async def _unsettle(self) -> None:
        if self._settling is not None:
            await self._settling.remove()
            self._settling = None

    async def _turn_started(self, ids: list[int]) -> None:
        await self._unsettle()
        self._streamed = ""
        self._said = False
        for row in self._held:
            row.delivered()
        self._held.clear()
        agent = self.agent
        if agent is None:
            return
        for i in ids:  # a subagent's report that starts a turn: the user has not seen it
            record = agent.chat.store.read_message(i)
            if record.kind == "work":
                await self._add(WorkRow(record.text))

    async def _turn_ended(self, event: TurnEnded) -> None:
        await self._end_reply()
        await self._unsettle()
        self._streamed = ""
        for tool in self._tools.values():
            if not tool.finished:
                tool.finish("cancelled before it finished", True)
        self._tools.clear()
        if event.reason == "error":
            await self._add(NoteRow(f"error: {event.error or 'the turn failed'}", classes="error"))
            if refused_key(event.error, event.error_kind):
                await self._add(NoteRow(KEY_HINT, classes="error"))
        elif event.reason in STOPPED:
            text = STOPPED[event.reason]
            if event.reason != "cancelled" and event.error:
                text = f"the turn stopped: {event.error}"
            classes = "error" if event.reason != "cancelled" else None
            await self._add(NoteRow(text, classes=classes))
        elif not self._said:  # done, and nothing came: say so rather than show nothing
            await self._add(NoteRow(EMPTY_REPLY))
        if self.agent is not None and (hint := commands.retry_hint(self.agent.chat, event)):
            await self._add(NoteRow(hint))
        self._said = True
        agent = self.agent
        if agent is None or not agent.busy:  # a cancel while settling logs what was held
            for row in self._held:
                row.delivered()
            self._held.clear()
        self.refresh_status()

    # -- the agent asks -------------------------------------------------------------------

    async def ask(self, tool: str, tool_input: dict[str, Any]) -> Decision:
        """`Asker.ask`: a dialog over the chat; the turn waits for the user's answer. If the turn
        is cancelled meanwhile, the dialog goes away."""
        answered = anyio.Event()
        answers: list[Decision] = []
        shown: list[PermissionScreen] = []

        def done(decision: Decision | None) -> None:
            if not answers:
                answers.append(decision or "deny")
            answered.set()
            for screen in shown:
                self._hand_back(screen.typed)

        def open_dialog() -> None:
            screen = PermissionScreen(tool, tool_input)
            shown.append(screen)
            self.bell()
            self.push_screen(screen, callback=done)

        def close_dialog() -> None:
            for screen in shown:
                if screen in self.screen_stack:
                    screen.dismiss(None)

        self.call_later(open_dialog)  # in the app's own task, whatever task asks
        try:
            await answered.wait()
        finally:
            if not answers:
                answers.append("deny")
                self.call_later(close_dialog)
        return answers[0]

    def _hand_back(self, keys: list[events.Key]) -> None:
        """The keys the dialog kept, typed again: they reach the input, which has the focus
        again once the dialog is gone (they are posted now and handled after that)."""
        for key in keys:
            self.post_message(events.Key(key.key, key.character))
        keys.clear()

    # -- the input ------------------------------------------------------------------------

    def on_text_area_changed(self, event: TextArea.Changed) -> None:
        if isinstance(event.text_area, PromptInput):
            self.query_one(CommandHint).show_for(event.text_area.text)

    async def on_prompt_input_submitted(self, message: PromptInput.Submitted) -> None:
        self.query_one(CommandHint).show_for("")
        self.chat_log.anchor()
        line = read_line(message.text)
        if isinstance(line, Invocation):
            # the command as typed, dim, so that its output reads as the answer to it
            await self._add(NoteRow(clip(one_line(message.text), 200), classes="command"))
            await self.run_command(line)
        else:
            await self.send(line)

    def on_prompt_input_page(self, message: PromptInput.Page) -> None:
        if message.pages < 0:
            self.chat_log.scroll_page_up()
        else:
            self.chat_log.scroll_page_down()

    async def send(self, text: str) -> None:
        agent = self.agent
        if agent is None:  # between two agents, after /setup
            await self._add(NoteRow(f"not sent: {REOPENING} (Up brings it back)", classes="error"))
            return
        held = agent.busy
        row = UserRow(text, held=held)
        names = self.attachments.names()
        try:
            agent.submit(text, self.attachments.images())
        except (RuntimeError, ValueError) as error:
            await self._add(NoteRow(f"not sent: {error}", classes="error"))
            return
        self.attachments.clear()
        self._show_attachments()
        if held:
            self._held.append(row)
        await self._add(row)
        if names:
            await self._add(NoteRow(f"with {names}"))

    async def run_command(self, line: Invocation) -> None:
        command = line.command
        try:
            if command is None:
                raise CommandError(
                    f"unknown command {line.word}: /help lists the commands "
                    "(// sends a message that starts with /)"
                )
            if command is commands.QUIT:
                await self.action_quit()
            elif self.agent is None:
                raise CommandError(REOPENING)
            else:
                await self._run(line, self.agent)
        except CommandError as error:
            await self._add(OutputRow(str(error), classes="error"))

    async def _run(self, line: Invocation, agent: Agent) -> None:
        command = line.command
        if command is commands.HELP:
            await self._output(commands.help_text())
        elif command is commands.MEMORY:
            status = agent.status()
            view, summary = commands.memory_text(
                agent.chat, status.compactor_running, status.compactor_queued
            )
            await self._add(OutputRow(view, classes="view"), OutputRow(summary))
        elif command is commands.ZOOM:
            await self._output(commands.zoom_text(agent.chat, line.args))
        elif command is commands.MODEL:
            await self._output(commands.model_text(agent.model, agent.use_model, line.args))
        elif command is commands.MEMORY_MODEL:
            settings = agent.compactor.settings
            await self._output(
                commands.memory_model_text(
                    settings.model, settings.effort, agent.use_memory_model, line.args
                )
            )
        elif command is commands.AGENTS:
            await self._output(commands.agents_text(agent.subagents.listing(), line.args))
        elif command is commands.AGENTS_STOP:
            await self._output(commands.stop_text(agent.subagents.stop, line.args))
        elif command is commands.IMAGE:
            try:
                await self._output(self.attachments.command(line.args, agent.workdir))
            finally:
                self._show_attachments()
        elif command is commands.SETUP:
            self.open_setup(agent)
        elif command is commands.USAGE:
            await self._output(commands.usage_text(self.home))
        elif command is commands.INSTRUCTIONS:
            await self._output(self.edit_instructions())
        elif command is commands.RETRY:
            await self._output(commands.retry_text(agent.retry, line.args))

    async def _output(self, text: str) -> None:
        await self._add(OutputRow(text))

    def _show_attachments(self) -> None:
        """The input's title says which images wait for the next message, while any do."""
        count = len(self.attachments.files)
        waiting = f"{count} image{'s' if count != 1 else ''} attached: {self.attachments.names()}"
        # a border's title is markup: a file named `[b]x.png` must show as it is named
        self.prompt.border_title = escape(escape_controls(clip(waiting, 60))) if count else None

    # -- /setup: new settings, a new agent ------------------------------------------------

    def open_setup(self, agent: Agent) -> None:
        """The setup form over the chat, filled in with the settings in use (never the key).
        The agent is closed to apply them: not while it works."""
        if agent.busy:
            raise CommandError("a turn is running: /setup once it ends (Ctrl+C cancels it)")
        if agent.subagents.running:
            raise CommandError("subagents are working: /setup once they have reported")
        try:
            current = load_config(self.home)
        except ConfigError as error:
            raise CommandError(str(error)) from None
        self.push_screen(SetupScreen(self.home, current, change=True), callback=self._set_up)

    async def _set_up(self, saved: bool | None) -> None:
        if not saved:
            await self._add(NoteRow("setup left: nothing changed"))
            return
        agent = self.agent
        if agent is None or agent.busy:  # a subagent's report started a turn meanwhile
            await self._add(NoteRow(SAVED_FOR_LATER))
            return
        self.agent = None  # from now on the old one is closing: nothing may use it
        self._reopen = True
        if self._wake is not None:
            self._wake.set()

    async def _reopened(self, agent: Agent) -> None:
        """`keep_agent` opened a new agent on the new settings: the app goes on with it."""
        await self._end_reply()
        self.attach(agent)
        self._start_pump(agent)
        self.refresh_status()
        await self._add(NoteRow(applied(agent)))

    async def keep_agent(
        self, opener: AgentOpener, *, task_status: TaskStatus[None] = anyio.TASK_STATUS_IGNORED
    ) -> None:
        """Hold the app's agent, in this task from its opening to its closing (its task group
        asks for that): the first before the app runs (so that a chat locked elsewhere is
        reported before any screen is drawn), then a new one at each /setup, until `release`."""
        self._wake = anyio.Event()
        async with opener(self) as agent:
            self.attach(agent)
            task_status.started()
            await self._wait_woken()
        while self._reopen and not self._released:
            self._reopen = False
            try:
                async with opener(self) as agent:
                    self.call_later(self._reopened, agent)
                    await self._wait_woken()
            except (ChatLocked, ConfigError, NotConfigured, StoreError, ProviderError) as error:
                self.failure = f"cannot open the chat with the new settings: {error}"
                self.exit(return_code=1)
                return

    async def _wait_woken(self) -> None:
        assert self._wake is not None
        await self._wake.wait()
        self._wake = anyio.Event()
        self.agent = None  # the agent closes next

    def release(self) -> None:
        """The app has ended: the agent closes."""
        self._released = True
        if self._wake is not None:
            self._wake.set()

    def edit_instructions(self) -> str:
        """Open `<home>/instructions.md` in the editor; what to tell the user after."""
        try:
            path = commands.instructions_file(self.home)
        except OSError as error:
            raise CommandError(f"cannot create the instructions file: {error}") from None
        after = (
            f"{path}: your instructions take effect at the next start (they stay the same "
            "for a whole session, so that the model's prompt cache keeps working)"
        )
        if self.editor is not None:
            self.editor(path)
            return after
        editor = os.environ.get("VISUAL") or os.environ.get("EDITOR") or "vi"
        argv = editor_command(editor)
        failure: str | None = None
        try:
            with self.suspend():
                # nothing may raise in here: the app comes back only when the block ends
                # normally (Textual resumes after the `yield`, not in a `finally`)
                try:
                    subprocess.run([*argv, str(path)], check=False)
                except Exception as error:  # whatever it is, the app must come back first
                    failure = str(error) or type(error).__name__
        except SuspendNotSupported:
            raise CommandError(f"cannot open an editor here: edit {path} yourself") from None
        if failure is not None:
            raise CommandError(cannot_edit(editor, failure))
        return after

    # -- keys -----------------------------------------------------------------------------

    def action_interrupt(self) -> None:
        """Ctrl+C: cancel the running turn; otherwise copy the selection, or say how to quit."""
        agent = self.agent
        if agent is not None and agent.busy:
            agent.cancel()
            return
        prompt = self.prompt
        if prompt.selected_text:
            prompt.action_copy()
            return
        self.notify("No turn is running. Ctrl+D or /quit leaves.", timeout=3)

    async def action_quit(self) -> None:
        await self._end_reply()
        self.exit(0)


REOPENING = "the new settings are being applied: a moment"
SAVED_FOR_LATER = (
    "settings saved; a turn started meanwhile, so this session goes on with the old ones: "
    "/setup again once it ends applies them"
)


def applied(agent: Agent) -> str:
    """What the chat goes on with after /setup (never the key)."""
    config = agent.runtime.config
    line = f"settings applied: {config.provider}, model {agent.model}"
    if config.base_url:
        line += f", at {config.base_url}"
    variable = KEY_VARIABLES.get(config.provider)
    if variable and os.environ.get(variable):
        line += f" ({variable} is set: its key is used, not the one in config.toml)"
    return line


@asynccontextmanager
async def hosting(app: ChatApp, opener: AgentOpener = open_agent) -> AsyncIterator[None]:
    """The app's agent, opened (its errors raised here, before the app runs) and kept in a task
    of its own while the body runs the app; closed after."""
    try:
        async with anyio.create_task_group() as group:
            await group.start(app.keep_agent, opener)
            try:
                yield
            finally:
                app.release()
    except BaseExceptionGroup as errors:
        # one error, the opener's or the body's, comes out as itself, not wrapped by the group
        if len(errors.exceptions) == 1:
            raise errors.exceptions[0] from None
        raise


# --- the command line's entry point -----------------------------------------------------------


def run_terminal(home: Path) -> int:
    """Set up the provider if none is, open the chat, run the app; the exit status."""
    try:
        return anyio.run(_main, home)
    except KeyboardInterrupt:
        return 130


async def _main(home: Path) -> int:
    notices: list[str] = []  # for the app to show: stderr is hidden while it runs
    try:
        config = load_config(home, warn=notices.append)
    except ConfigError as error:
        for notice in notices:  # the file was made private before the error was found
            warn_on_stderr(notice)
        return _fail(str(error))
    if configuration_problem(home, config) is not None:
        from evertalk.tui.setup import SetupApp

        if not await SetupApp(home, config).run_async():
            return _fail("nothing was set up; run evertalk again to set up a provider")
    app = ChatApp(home, notices=notices)
    try:
        async with hosting(app):
            await app.run_async()
    except ChatLocked as error:
        return _fail(
            f"{error}. Only one evertalk at a time can use a chat: close the other one first."
        )
    except (ConfigError, NotConfigured, StoreError, ProviderError) as error:
        return _fail(str(error))
    if app.failure is not None:
        return _fail(app.failure)
    return app.return_code or 0


def _fail(message: str) -> int:
    print(f"evertalk: {escape_controls(' '.join(message.split()))}", file=sys.stderr)
    return 1
