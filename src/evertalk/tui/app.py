"""The chat screen: the log of the session, the input, the status bar.

The app is a client of the service (`client/remote.py`), which owns the chat and runs the
turns: any number of windows show the same chat. The service is started (when none runs) before
the app (`tui/__init__.py`), and the window opens on the log's last messages read from its files
(`tail`), so that they show while the service is still starting; what is typed meanwhile goes
once it answers. A first connection that fails ends the app, saying why; on a machine with no
provider configured, the setup screen comes first.

One worker (`_keep_connected`) holds the connection, as a follower of the log (`shown.py`): it
says in its hello the position of what the window shows, gets what was logged from there (the
last messages at the first connection, those read from the files staying when they agree),
then the service's frames in order; when the service goes (idle elsewhere, killed), it says so
and connects again, starting the next one, and shows what was logged meanwhile. A service
stopped on purpose (`service stop`, `memory repair`, a signal) is started again only by the
user's next message or command; a service another client starts meanwhile is followed at once,
so that the window's status is always that of the service it shows. A forget replaces every
row that showed what it changed. Each reply streams into a Markdown
row, each tool call is a collapsed row whose title gets ✓ or ✗ when it finished, thoughts are
dimmed. Every message any window sends shows in every window, held while a turn runs, until Ever
takes it.
A tool whose policy is `ask` is asked of the window that sent the message (`ask`): a dialog
(allow once, always, deny), withdrawn when the service says so (`ask_closed`). `/setup` saves new
settings and has the service reopen the chat on them (`reopen`).

The log opens on its last messages; a scroll to its top fetches the page before the oldest shown
(`records`). The turn runs in the service, so leaving the window does not end it: Ctrl+D during a
turn asks to be pressed again. On exit, `summary` is the line `main.py` prints: what this window
sent, and what the ledger counts of the chat's model calls while it was open.
"""

from __future__ import annotations

import contextlib
import difflib
import os
import time
import tomllib
import uuid
from collections.abc import Awaitable, Callable, Sequence
from functools import partial
from pathlib import Path
from typing import ClassVar, Final, Protocol

import anyio
from textual import events
from textual.actions import SkipAction
from textual.app import App, ComposeResult
from textual.binding import Binding, BindingType
from textual.css.query import NoMatches
from textual.markup import escape
from textual.widget import Widget
from textual.widgets import Footer, TextArea

from evertalk import secret_env, slash
from evertalk.budget import Day
from evertalk.client.remote import (
    Message,
    Remote,
    RequestFailed,
    ServiceError,
    ServiceGone,
    open_remote,
)
from evertalk.config import KEY_VARIABLES, ConfigError, config_path, load_config
from evertalk.folder_instructions import in_force
from evertalk.ledger import LedgerTally, ledger_path
from evertalk.protocol.replies import (
    Accepted,
    Ask,
    AskClosed,
    AskedElsewhere,
    Error,
    Ok,
    Output,
    Reopened,
    Status,
    Stopping,
)
from evertalk.protocol.requests import (
    Answer,
    Cancel,
    Command,
    GetStatus,
    Image,
    Reopen,
    Send,
    StartNow,
)
from evertalk.protocol.status import AgentStatus
from evertalk.runtime import INSTRUCTIONS_NAME
from evertalk.slash import MEMORY, SEARCH, ZOOM
from evertalk.terminal_text import escape_controls, one_line
from evertalk.tui import commands
from evertalk.tui import service_messages as sm
from evertalk.tui.budget_screen import BudgetScreen
from evertalk.tui.commands import CommandError, Invocation, read_line
from evertalk.tui.compact import compact_in_app
from evertalk.tui.editor import Editor, edit_instructions
from evertalk.tui.forget import forget_in_app, previews
from evertalk.tui.log_rows import LogRows
from evertalk.tui.service_messages import FrameRouter, shows
from evertalk.tui.status import MemoryWatch, dollars
from evertalk.tui.turn_rows import Sending, TurnRows
from evertalk.tui.undo import undo_in_app
from evertalk.tui.widgets import (
    ChatLog,
    CommandHint,
    NoteRow,
    OutputRow,
    PermissionScreen,
    PromptInput,
    StatusBar,
    clip,
    log_pages,
    size_of,
)

HISTORY = 200  # messages the user sent before, for Up and Down
HISTORY_SCAN = 2_000  # messages read back to find them
STATUS_EVERY = 0.5  # seconds between two looks at the service's status
RECONNECT_EVERY = 1.0  # seconds between two tries to reach a service that went
FIRST_CONNECTION = 10.0  # seconds a message typed before the first connection waits for it
QUIT_AGAIN = 5.0  # seconds in which a second Ctrl+D quits while a turn runs
LAST_STATUS = 1.0  # seconds, at most, to ask the service what was spent when quitting
FOLDER_WIDTH = 50  # characters of the working folder shown under the input


class Connector(Protocol):
    """Makes a connection, for a window that follows the log from `since`; `start`: the
    service is started when none runs (else ServiceError)."""

    def __call__(
        self, *, since: int | None, start: bool, edits: int | None = None
    ) -> Awaitable[Remote]: ...


class Spending:
    """What the chat's model calls cost while the window was open. The service's `status`
    says what it spent since it started (every window's turns, their subagents, the
    summaries): the rise of that figure over each connection, summed over the connections,
    as a service that stops and another that starts each count from zero."""

    def __init__(self) -> None:
        self.before = 0.0  # risen over the connections before this one
        self.first: float | None = None  # this connection's first figure
        self.last = 0.0
        self.seen = False  # a figure came at all

    def connected(self) -> None:
        self.before, self.first = self.total, None

    def sample(self, cost: float) -> None:
        self.seen = True
        if self.first is None:
            self.first = self.last = cost
        elif cost < self.last:  # counted from zero again: a new service under the same name
            self.before, self.first, self.last = self.total, 0.0, cost
        else:
            self.last = cost

    @property
    def total(self) -> float:
        return self.before + (self.last - self.first if self.first is not None else 0.0)


class ChatApp(App[int]):
    """The chat in the terminal, a client of the service. `connector` makes a connection (by
    default to the home's service, started if none runs); one made before the app runs may be
    attached with `attach`."""

    TITLE = "evertalk"
    ENABLE_COMMAND_PALETTE = False
    CSS = """
    Screen { layout: vertical; }
    Footer { height: 1; }
    NoteRow.command { margin-top: 1; }
    OutputRow { margin: 0 0 1 0; }
    UserRow.held { border-left: thick $held; }
    """
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("ctrl+c", "interrupt", "cancel turn", priority=True),
        Binding("escape", "stop_retrying", "stop the turn", show=False),
        Binding("ctrl+d", "leave", "quit"),  # the input's own Ctrl+D defers to it when empty
    ]

    def __init__(
        self,
        home: Path,
        *,
        connector: Connector | None = None,
        editor: Editor | None = None,
        notices: Sequence[str] = (),
        workdir: Path | None = None,
        tail: Sequence[Message] = (),
        first_message: str | None = None,
    ) -> None:
        super().__init__()
        self.home = home
        self.first_message = first_message  # `evertalk "MESSAGE"`: sent once connected
        self.connector: Connector = connector or partial(_open, home)
        self.notices = list(notices)  # what loading the settings corrected, shown as warnings
        self.workdir = workdir or Path.cwd()  # where the tools of this window's messages work
        self._workdir_set = workdir is not None  # by --workdir or config.toml: it goes first
        self.remote: Remote | None = None
        self.status: AgentStatus | None = None
        self.busy = False  # a turn runs (from the events, and each status)
        self.editor = editor  # None: $VISUAL or $EDITOR, the app suspended meanwhile
        self.memory_watch = MemoryWatch()
        self.rows = TurnRows(self)
        # the rows of the log, from its last messages read from its files (`log_tail`),
        # shown before the service answers, on
        self.log_rows = LogRows(self, list(tail))
        self.shown = self.log_rows.shown  # what the window shows of the log
        self._asked: dict[str, PermissionScreen] = {}
        # the settings the chat runs on, and whether this window's /setup saved new ones: a
        # `reopened` is said when they change, or for that save
        self._settings: tuple[str, str, str | None] | None = None
        self._saved_setup = False
        self._waits_elsewhere: dict[str, NoteRow] = {}
        self._frames = FrameRouter(
            self,
            self.rows,
            lambda line: self._add(NoteRow(line, classes="error")),
            self.log_rows,
        )
        self.attachments = commands.Attachments()
        self._polling = False
        self._quitting = False
        self.failure: str | None = None  # why the app stopped on its own
        self.ready = anyio.Event()  # the first connection showed the log's last messages
        self._connected_once = anyio.Event()  # a connection was made
        # stopped on purpose (`service stop`, `memory repair`), the window starts no service
        # until its user acts: `paused` says why, `_resume` is that action
        self.paused: str | None = None
        self._resume = anyio.Event()
        self._tried = anyio.Event()  # a try to connect ended (a new one for each try)
        self._connect_error: str | None = None  # why the last try the user made failed
        self._submitting = anyio.Lock()  # what the input sent goes in order
        self.spending = Spending()
        # the exit line's cost: the ledger's calls from the window's opening on (a service
        # started again meanwhile does not reset it)
        self.spent_meanwhile = LedgerTally.from_now(ledger_path(home))
        self.sent_count = 0  # messages this window sent (and the service took)
        self._quit_asked = -QUIT_AGAIN  # when Ctrl+D last asked to be pressed again

    def attach(self, remote: Remote) -> None:
        self.remote = remote

    def get_css_variables(self) -> dict[str, str]:
        """The theme's, and `held`: a colour of its own for a message that waits for the
        running turn, never the one a sent message has (`$accent`)."""
        variables = super().get_css_variables()
        variables["held"] = held_colour(variables)
        return variables

    # -- layout ---------------------------------------------------------------------------

    def compose(self) -> ComposeResult:
        yield ChatLog(*self.log_rows.tail_rows, id="log")
        yield PromptInput(id="prompt")
        yield CommandHint(id="hint")
        yield StatusBar(id="status")
        yield Footer()
        yield self.rows
        yield self.log_rows

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
        self.chat_log.anchor()
        self.prompt.focus()
        # the folder the tools of this window's messages work in, under the input
        self.prompt.border_subtitle = escape(escape_controls(folder_shown(self.workdir)))
        self.status_bar.set_text("connecting to the service…")
        self.set_interval(STATUS_EVERY, self.refresh_status)
        self.run_worker(self._keep_connected(), name="service", group="service")

    async def _add(self, *rows: Widget, last: bool = False) -> None:
        """Rows at the end of the chat, above the messages held for the running turn, which
        stay the last rows until Ever takes them (`last`: below them, a message held now)."""
        log = self.chat_log
        below = None if last else self.rows.first_held()
        if below is not None and below.parent is log:
            await log.mount_all(rows, before=below)
        else:
            await log.mount_all(rows)

    async def add_rows(self, *rows: Widget, last: bool = False) -> None:
        await self._add(*rows, last=last)

    def client_name(self) -> str | None:
        return self.remote.name if self.remote is not None else None

    async def messages(self, start: int, end: int) -> list[Message]:
        remote = self.remote
        return [] if remote is None else await remote.records(start=start, end=end)

    # -- the connection -------------------------------------------------------------------

    async def _keep_connected(self) -> None:
        """The service's frames, in order, for as long as the app runs: connected again (a
        new service started) each time one goes. A first connection that fails ends the app,
        saying why."""
        remote, first, said = self.remote, True, False
        while not self._quitting:
            if remote is None:
                since = self.log_rows.follow_from()
                try:
                    if self.paused is not None:
                        remote = await self._next_service(since)
                    else:
                        remote = await self.connector(
                            since=since, start=True, edits=self.log_rows.edits
                        )
                except ServiceError as error:
                    if first:
                        self.failure = str(error)
                        self.exit(return_code=1)
                        return
                    if self.paused is not None:  # the user is told; their next action tries
                        self._connect_error = str(error)
                        self._tried_now()
                        continue
                    if not said:  # once; the next tries are quiet until one works
                        said_row = NoteRow(f"cannot reach the service: {error}", classes="error")
                        await self._add(said_row)
                        said = True
                    await anyio.sleep(RECONNECT_EVERY)
                    continue
            self.remote, said = remote, False
            self.paused = self._connect_error = None
            self._connected_once.set()
            self._tried_now()
            try:
                async with anyio.create_task_group() as group:
                    group.start_soon(remote.run)
                    await self._opened(remote, first)
                    first = False
                    await self._pump(remote)
                    group.cancel_scope.cancel()
            finally:
                self.remote = None
                await remote.aclose()
            remote = None
            if not self._quitting:
                await self._lost()

    async def _opened(self, remote: Remote, first: bool) -> None:
        self.spending.connected()
        # the figure as the window connects: only what it rises by from here is this session's
        with contextlib.suppress(ServiceError):
            status = await remote.request(GetStatus(), Status)
            self.spending.sample(status.cost)
            self._settings = self._configured(status.model)
        self.refresh_status()
        if not first:
            await self._add(NoteRow(f"connected to the service (pid {remote.pid})"))
            return
        warnings = [NoteRow(f"warning: {notice}", classes="error") for notice in self.notices]
        if warnings:  # what loading the settings said, at once
            await self._add(*warnings)
        sent = await remote.records(last=HISTORY, kind="user", scan=HISTORY_SCAN)
        self.prompt.sent = [message.text for message in sent]

    async def _next_service(self, since: int) -> Remote:
        """After a stop on purpose: the service another client starts, as soon as one runs,
        or one the user's next message or command starts."""
        while True:
            with anyio.move_on_after(RECONNECT_EVERY):
                await self._resume.wait()
            if self._resume.is_set():
                self._resume = anyio.Event()
                return await self.connector(since=since, start=True, edits=self.log_rows.edits)
            with contextlib.suppress(ServiceError):
                return await self.connector(since=since, start=False, edits=self.log_rows.edits)

    async def log_shown(self) -> None:
        """The log shows, the first time: the message given on the command line goes, as if
        typed (Up brings it back)."""
        self.ready.set()
        if self.first_message is not None:
            text, self.first_message = self.first_message, None
            self.prompt.remember(text)
            self.run_worker(self._submit(text, ()), group="typed")

    def on_chat_log_at_top(self, message: ChatLog.AtTop) -> None:
        self.log_rows.at_top()

    def _tried_now(self) -> None:
        self._tried.set()
        self._tried = anyio.Event()

    async def _lost(self) -> None:
        await self.rows.cut_short("the service stopped before it finished")
        self.busy = False
        if self.paused is not None:
            self.status_bar.set_text(f"service stopped: {RESUMES}")
        else:
            self.status_bar.set_text("connecting to the service…")

    async def _pump(self, remote: Remote) -> None:
        async for frame in remote.frames():  # it ends when the connection does
            try:
                await self._frames.show(frame)
            except NoMatches:  # the app is closing: its widgets are gone
                return

    # -- the status bar -------------------------------------------------------------------

    def refresh_status(self) -> None:
        if self.remote is None or self._polling:
            return
        self._polling = True
        self.run_worker(self._poll_status(self.remote), group="status")

    async def _poll_status(self, remote: Remote) -> None:
        try:
            reply = await remote.request(GetStatus(), Status)
        except ServiceError:
            return
        finally:
            self._polling = False
        status = self.status = reply.agent
        self.busy = status.busy
        try:
            bar, log = self.status_bar, self.chat_log
        except NoMatches:  # the app is closing
            return
        bar.show(status)
        row = self.memory_watch.sample(status)
        if row is not None and log.is_attached:  # not once the app is closing
            log.mount(NoteRow(row, classes="memory"))

    # -- the service asks -----------------------------------------------------------------

    @shows(Ask)
    async def _on_ask(self, message: sm.Arrived[Ask]) -> None:
        """A tool waits for the user's yes: a dialog over the chat; the answer goes back."""
        ask_id = message.frame.id
        screen = PermissionScreen(message.frame)
        self._asked[ask_id] = screen

        def done(decision: str | None) -> None:
            self._asked.pop(ask_id, None)
            self._hand_back(screen.typed)
            remote = self.remote
            if remote is not None:
                answer = Answer(id=ask_id, decision=decision or "deny")
                self.run_worker(_quietly(remote.post(answer)), group="answers")

        self.bell()
        self.push_screen(screen, callback=done)

    @shows(AskClosed)
    async def _on_ask_closed(self, message: sm.Arrived[AskClosed]) -> None:
        """The question is no longer asked (answered, or its turn was cancelled)."""
        screen = self._asked.pop(message.frame.id, None)
        if screen is not None and screen in self.screen_stack:
            screen.dismiss(None)
        row = self._waits_elsewhere.pop(message.frame.id, None)
        if row is not None:
            row.remove()

    @shows(AskedElsewhere)
    async def _on_asked_elsewhere(self, message: sm.Arrived[AskedElsewhere]) -> None:
        """The turn waits for a yes in another window: say so here, until it is answered, so
        that this window does not look stuck."""
        asked = message.frame
        where = (asked.client or "another window").split(" ")[0]
        row = NoteRow(f"Ever waits for an answer in another window ({where}): {asked.tool}")
        self._waits_elsewhere[asked.id] = row
        await self._add(row)

    @shows(Stopping)
    async def _on_stopping(self, message: sm.Arrived[Stopping]) -> None:
        why = escape_controls(message.frame.reason)
        if message.frame.on_purpose:  # someone meant it: no other until the user acts
            self.paused = why
            await self._add(NoteRow(f"the service was stopped ({why}); {RESUMES}"))
        else:
            await self._add(NoteRow(f"the service is stopping ({why}); connecting to the next"))

    @shows(Reopened)
    async def _on_reopened(self, message: sm.Arrived[Reopened]) -> None:
        """Said once per real change of the settings (a forget, a repair reopen the chat on
        the same ones), and once for this window's own /setup."""
        frame = message.frame
        settings = (frame.provider, frame.model, frame.base_url)
        changed, self._settings = settings != self._settings, settings
        if changed or self._saved_setup:
            self._saved_setup = False
            await self._add(NoteRow(applied(frame, file_key=file_has_key(self.home))))

    def _configured(self, model: str) -> tuple[str, str, str | None] | None:
        """The settings the chat runs on, as `reopened` says them: the provider and the address
        config.toml names, the model the service says (None when the file cannot be read)."""
        try:
            config = load_config(self.home)
        except ConfigError:
            return None
        return (config.provider, model, config.base_url)

    @shows(Error)
    async def _on_error(self, message: sm.Arrived[Error]) -> None:
        await self._add(NoteRow(f"service: {message.frame.message}", classes="error"))

    def _hand_back(self, keys: list[events.Key]) -> None:
        """The keys the dialog kept, typed again: they reach the input, which has the focus
        again once the dialog is gone (they are posted now and handled after that)."""
        for key in keys:
            if key.key != "escape":  # meant for the dialog: in the input it would clear it
                self.post_message(events.Key(key.key, key.character))
        keys.clear()

    # -- the input ------------------------------------------------------------------------

    def on_key(self, event: events.Key) -> None:
        """A character typed while a row of the chat has the focus (Shift+Tab took it there)
        is meant for the message: the input takes the focus back, and the character. Only on
        the chat's screen, and never a key something there is bound to."""
        found = self.screen.query(PromptInput)
        if not found or not event.is_printable or event.character is None:
            return
        prompt = found.first()
        if self.focused is prompt or event.key in self.screen.active_bindings:
            return
        event.stop()
        event.prevent_default()
        prompt.focus()
        if not prompt.read_only:
            prompt.insert(event.character)

    def on_text_area_changed(self, event: TextArea.Changed) -> None:
        if isinstance(event.text_area, PromptInput):
            self.query_one(CommandHint).show_for(event.text_area.text)
            self._show_title()

    async def on_prompt_input_submitted(self, message: PromptInput.Submitted) -> None:
        self.query_one(CommandHint).show_for("")
        self.chat_log.anchor()
        if self._first_connecting():
            # typed over the log shown before the service answered: it goes once connected,
            # in order, and the app is not held up meanwhile
            self.run_worker(self._submit(message.text, message.pasted), group="typed")
        else:
            await self._submit(message.text, message.pasted)

    async def _submit(self, text: str, pasted: Sequence[str]) -> None:
        async with self._submitting:
            line = read_line(text)
            if isinstance(line, Invocation):
                # the command as typed, dim, so that its output reads as the answer to it
                await self._add(NoteRow(clip(one_line(text), 200), classes="command"))
                await self.run_command(line)
            else:
                # `//text` sends `/text`: the pastes are in it all the same
                await self.send(line, pasted)

    def on_prompt_input_empty(self, message: PromptInput.Empty) -> None:
        """Enter on an empty input while the turn waits for the chat to catch up: it starts
        now, with the summaries built so far (the service says so in a row)."""
        remote = self.remote
        if remote is not None and self.rows.catching_up:
            self.run_worker(_quietly(remote.request(StartNow(), Ok)), group="start-now")

    def on_prompt_input_page(self, message: PromptInput.Page) -> None:
        if message.pages < 0:
            self.chat_log.page_up()
        else:
            self.chat_log.scroll_page_down()

    def _first_connecting(self) -> bool:
        """The window has never been connected: the log's last lines, read from its files,
        show before the service answers."""
        return self.remote is None and not self._connected_once.is_set()

    async def _remote_soon(self) -> Remote | None:
        """The connection; before the first one, that one, awaited a while; after a stop on
        purpose, a new one, the service started again by this action of the user's."""
        if self._first_connecting():
            with anyio.move_on_after(FIRST_CONNECTION):
                await self._connected_once.wait()
        elif self.remote is None and self.paused is not None:
            tried = self._tried
            self._resume.set()
            with anyio.move_on_after(FIRST_CONNECTION):
                await tried.wait()
        return self.remote

    def _not_connected(self) -> str:
        """Why a message or a command could not go: the last try's error, if the user's."""
        return self._connect_error or NOT_CONNECTED

    async def send(self, text: str, pasted: Sequence[str] = (), *, asked: bool = False) -> None:
        """Send a message; with today's spending past the daily budget, once the user says so
        (`asked`: they did)."""
        remote = await self._remote_soon()
        if remote is None:
            await self._add(
                NoteRow(f"not sent: {self._not_connected()} (Up brings it back)", classes="error")
            )
            return
        if not asked:
            go = partial(self.send, text, pasted, asked=True)
            if await self._asks_over_budget(remote, go, "not sent", "Up brings it back"):
                return
        key = uuid.uuid4().hex  # the service logs it once, however often it is sent
        frame = Send(
            text=text,
            key=key,
            cwd=os.getcwd(),
            workdir=str(self.workdir) if self._workdir_set else None,
            images=[Image(media_type, data) for media_type, data in self.attachments.images()],
        )
        sending = Sending(text, self.attachments.names(), tuple(pasted), key)
        self.rows.sending.append(sending)
        try:
            await remote.request(frame, Accepted)
        except ServiceError as error:
            self.rows.sending = [item for item in self.rows.sending if item is not sending]
            await self._add(
                NoteRow(f"not sent: {error} ({self._typed_again(text)})", classes="error")
            )
            return
        self.sent_count += 1
        self.busy = True  # a turn runs or waits for it, before the events from it say so
        self.attachments.clear()
        self._show_title()

    def _typed_again(self, text: str) -> str:
        """A message the service refused goes back into the input, unless the user typed
        something else meanwhile; where it is, as said after the refusal."""
        prompt = self.prompt
        if prompt.text:
            return "Up brings it back"
        prompt.load_text(text)
        prompt.move_cursor(prompt.document.end)
        return "it is back in the input"

    async def _asks_over_budget(
        self, remote: Remote, go: Callable[[], Awaitable[None]], kept: str, hint: str
    ) -> bool:
        """Whether today's spending is past the daily budget, so that a dialog asks whether to
        start a turn all the same: `go` if so; else a row says `kept` (and `hint`)."""
        try:
            status = (await remote.request(GetStatus(), Status)).agent
        except ServiceError:
            return False  # what follows says why
        day = Day(status.cost, status.budget)
        if not day.over:
            return False

        async def answered(anyway: bool | None) -> None:
            if anyway:
                await go()
            else:
                await self._add(NoteRow(f"{kept}: {day.over_line()} ({hint})"))

        self.bell()
        question = "Send this message" if kept == "not sent" else "Run the turn"
        self.push_screen(BudgetScreen(day.over_line(), question), callback=answered)
        return True

    async def _retry_anyway(self, line: Invocation) -> None:
        """`/retry` once the budget's question is answered yes."""
        await self.run_command(line, asked=True)

    async def run_command(self, line: Invocation, *, asked: bool = False) -> None:
        """Run a slash command; `/retry`, which starts a turn, asks first while today's
        spending is past the daily budget (`asked`: it did)."""
        command = line.command
        try:
            if command is None:
                raise CommandError(unknown_command(line.word))
            if command is slash.RETRY and not asked:
                remote = await self._remote_soon()
                go = partial(self._retry_anyway, line)
                if remote is not None and await self._asks_over_budget(
                    remote, go, "not retried", "/retry asks again"
                ):
                    return
            await self._run(line)
        except CommandError as error:
            await self._add(OutputRow(str(error), classes="error"))

    async def _run(self, line: Invocation) -> None:
        command = line.command
        if command is slash.QUIT:
            await self.action_quit()
        elif command is slash.HELP:  # read from its top, though the log follows its end
            row = OutputRow(commands.help_text())
            log = self.chat_log
            # unanchored, not just released: a released anchor comes back whenever the log
            # sits at its end, which it does until the row is laid out; the next line sent
            # anchors it again
            log.anchor(False)
            await self._add(row)
            log.call_after_refresh(log.scroll_to_widget, row, animate=False, top=True)
        elif command is slash.IMAGE:
            try:
                await self._output(self.attachments.command(line.args, self.workdir))
            finally:
                self._show_title()
        elif command is slash.SETUP:
            await self.open_setup()
        elif command is slash.INSTRUCTIONS:
            await self._output(in_force(self.workdir, self.home / INSTRUCTIONS_NAME))
        elif command is slash.INSTRUCTIONS_EDIT:
            await self._output(edit_instructions(self, self.home, self.editor))
        elif command is slash.EDIT:
            self.prompt.edit_again()
        elif command is slash.CLEAR:
            await self._clear()
        elif command is slash.COMPACT:
            await self._compact()
        elif command is slash.UNDO:
            remote = await self._remote_soon()
            if remote is None:
                raise CommandError(self._not_connected())
            await undo_in_app(self, remote, line.args, self._output)
        elif command is slash.FORGET:
            remote = await self._remote_soon()
            if remote is None:
                raise CommandError(self._not_connected())
            texts = await forget_in_app(remote, line.args)
            quoted = "recalls" if previews(line.args) else None  # a forget withdraws them
            await self._add(*[OutputRow(text, classes=quoted) for text in texts])
        elif command is not None:
            await self._served(command, line.args)

    async def _clear(self) -> None:
        """`/clear`: a fresh screen, not a fresh chat: its rows come back on a scroll up."""
        if self.busy or self.rows.under_way():
            raise CommandError("a turn is running: /clear once it ends (Ctrl+C cancels it)")
        await self.log_rows.clear_screen()
        self.chat_log.anchor()
        await self._add(OutputRow(CLEARED))

    async def _compact(self) -> None:
        """`/compact`: the summaries built now, on a connection of its own, one row saying
        how far it got; the chat goes on meanwhile."""
        if await self._remote_soon() is None:
            raise CommandError(self._not_connected())
        row = OutputRow("summaries: asking the service how many are left…")
        await self._add(row)
        self.run_worker(self._compacting(row), group="compact")

    async def _compacting(self, row: OutputRow) -> None:
        try:
            await compact_in_app(self.home, row.set_text)
        except ServiceError as error:
            row.set_text(f"summaries: {error}; those built are kept")
            row.add_class("error")

    async def _served(self, command: slash.Command, args: tuple[str, ...]) -> None:
        """A command the service runs: its texts as rows (`/memory`'s view dimmed)."""
        remote = await self._remote_soon()
        if remote is None:
            raise CommandError(self._not_connected())
        try:
            reply = await remote.request(Command(name=command.name, args=list(args)), Output)
        except ServiceError as error:
            raise CommandError(str(error)) from None
        rows = [OutputRow(text) for text in reply.texts]
        if command in (MEMORY, ZOOM, SEARCH):  # they quote the memory: a forget withdraws them
            for row in rows:
                row.add_class("recalls")
        if command is MEMORY and len(rows) > 1:
            rows[0].add_class("view")
        await self._add(*rows)

    async def _output(self, text: str) -> OutputRow:
        row = OutputRow(text)
        await self._add(row)
        return row

    def _show_title(self) -> None:
        """The input's title says what goes with the message typed, while anything does: a
        big paste (which shows folded in the chat once sent), the several messages a long one
        is logged as, the images waiting for it."""
        prompt = self.prompt
        parts = []
        pastes = prompt.pastes()
        if len(pastes) == 1:
            parts.append(f"pasted {size_of(pastes[0])}")
        elif pastes:
            parts.append(f"{len(pastes)} pastes")
        pages = log_pages(prompt.text)
        if pages > 1:
            parts.append(f"logged as {pages} messages")
        count = len(self.attachments.files)
        if count:
            names = self.attachments.names()
            parts.append(clip(f"{count} image{'s' if count != 1 else ''} attached: {names}", 60))
        # a border's title is markup: a file named `[b]x.png` must show as it is named
        prompt.border_title = escape(escape_controls(" · ".join(parts))) if parts else None

    # -- /setup: new settings, the service reopens the chat on them ------------------------

    async def open_setup(self) -> None:
        """The setup form over the chat, filled in with the settings in use (never the key).
        The service reopens the chat to apply them: not while it works."""
        remote = self.remote
        if remote is not None:
            try:
                status = (await remote.request(GetStatus(), Status)).agent
            except ServiceError as error:
                raise CommandError(str(error)) from None
            if status.busy:
                raise CommandError("a turn is running: /setup once it ends (Ctrl+C cancels it)")
            if status.subagents:
                raise CommandError("subagents are working: /setup once they have reported")
        try:
            current = load_config(self.home)
        except ConfigError as error:
            raise CommandError(str(error)) from None
        from evertalk.tui.setup import SetupScreen  # the form's imports wait for its first use

        self.push_screen(SetupScreen(self.home, current, change=True), callback=self._set_up)

    async def _set_up(self, saved: bool | None) -> None:
        if not saved:
            await self._add(NoteRow("setup left: nothing changed"))
            return
        remote = self.remote
        if remote is None:  # no service now: the next one reads the new settings
            await self._add(NoteRow("settings saved: the service starts on them"))
            return
        self._saved_setup = True  # the `reopened` that follows is said, changed or not
        try:
            await remote.request(Reopen(), Ok)
        except RequestFailed as error:
            if error.kind == "busy":  # a subagent's report started a turn meanwhile
                await self._add(NoteRow(SAVED_FOR_LATER))
                return
            self._saved_setup = False
            await self._add(NoteRow(f"settings saved, not applied: {error}", classes="error"))
        except ServiceGone:
            pass  # the next service reads them

    # -- keys -----------------------------------------------------------------------------

    def action_stop_retrying(self) -> None:
        """Esc (the input passes it on when empty): while a model call waits to be tried
        again, the turn stops, as Ctrl+C stops it."""
        countdown = self.rows.countdown
        remote = self.remote
        if remote is None or countdown is None or not countdown.running or not self.busy:
            raise SkipAction()
        self.run_worker(_quietly(remote.request(Cancel(), Ok)), group="cancel")

    def action_interrupt(self) -> None:
        """Ctrl+C: cancel the running turn; otherwise copy the selection, else clear the input
        (Ctrl+Z brings it back), or say how to quit."""
        remote = self.remote
        if remote is not None and self.busy:
            # asked, not posted: its `ok` is the answer to it, not a frame for the chat
            self.run_worker(_quietly(remote.request(Cancel(), Ok)), group="cancel")
            return
        prompt = self.prompt
        if prompt.selected_text:
            prompt.action_copy()
            return
        if prompt.text:
            prompt.clear_input()
            return
        self.notify("No turn is running. Ctrl+D or /quit leaves.", timeout=3)

    async def action_leave(self) -> None:
        """Ctrl+D (on an empty input): quit; while a turn runs, only when pressed again. The
        turn runs in the service, so the window quitting does not end it."""
        now = time.monotonic()
        if self.busy and now - self._quit_asked > QUIT_AGAIN:
            self._quit_asked = now
            self.notify(QUIT_WHILE_BUSY, timeout=QUIT_AGAIN)
            return
        await self.action_quit()

    async def action_quit(self) -> None:
        self._quitting = True
        await self.rows.end_reply()
        await self._last_status()
        self.exit(0)

    async def _last_status(self) -> None:
        """What was spent up to now, and whether a turn still runs, for the line said on exit;
        not waited for long: a service that does not answer leaves the last figures seen."""
        remote = self.remote
        if remote is None:
            return
        with anyio.move_on_after(LAST_STATUS), contextlib.suppress(ServiceError):
            status = (await remote.request(GetStatus(), Status)).agent
            self.spending.sample(status.cost)
            self.busy = status.busy

    def summary(self) -> str | None:
        """The line said on exit: what this window sent, and what the chat's model calls cost
        while it was open; None when it never reached the service."""
        if not self.spending.seen:
            return None
        count = self.sent_count
        sent = f"{count} message{'s' if count != 1 else ''} sent" if count else "nothing sent"
        spent = dollars(self.spent_meanwhile.read())
        line = f"this session: {sent}; the chat spent {spent} meanwhile ({SPENT_ON})"
        if self.busy:
            line += "; a turn goes on in the service"
        return line


async def _quietly(sent: Awaitable[object]) -> None:
    """A frame sent whose outcome nothing waits for: a service gone meanwhile (or refusing it)
    is said elsewhere."""
    with contextlib.suppress(ServiceError):
        await sent


NOT_CONNECTED = "the service is not connected yet: a moment"
CLEARED = (
    "screen cleared; the chat and Ever's memory of it are kept: Page Up, or scrolling up, "
    "brings it back"
)
RESUMES = "it starts again with your next message or command"
SPENT_ON = "any window's turns, subagents, summaries"
ELSEWHERE: Final = {"/exit": ("/quit",), "/?": ("/help",)}  # as other chat programs spell them
QUIT_WHILE_BUSY = (
    "A turn is running: Ctrl+D again quits. The turn goes on in the service (Ctrl+C cancels it)."
)
SAVED_FOR_LATER = (
    "settings saved; a turn started meanwhile, so it ends on the old ones: the service applies "
    "them once it ends"
)


async def _open(home: Path, *, since: int | None, start: bool, edits: int | None = None) -> Remote:
    """The home's service, as the app connects to it by default."""
    return await open_remote(home, "app", since=since, start=start, edits=edits)


HELD_CHOICES: Final = ("warning", "primary", "secondary", "success", "error")


def held_colour(variables: dict[str, str]) -> str:
    """The colour of a held message in a theme: its warning colour, or the first of the others
    that is not its accent (a sent message's colour)."""
    accent = variables.get("accent")
    found = [variables[name] for name in HELD_CHOICES if name in variables]
    return next((colour for colour in found if colour != accent), found[0] if found else "red")


def unknown_command(word: str) -> str:
    """`unknown command /agent: did you mean /agents?`, naming the commands close to it."""
    names = list(dict.fromkeys(command.name.split()[0] for command in commands.COMMANDS))
    begun = [name for name in names if name.startswith(word)]
    # a letter or two amiss, not a word that merely shares some (`/agent` is not `/usage`)
    close = difflib.get_close_matches(word, names, n=3, cutoff=0.75)
    if word in ELSEWHERE:  # another program's name for one of ours: that one alone
        begun, close = [], []
    found = list(dict.fromkeys([*begun, *close, *ELSEWHERE.get(word, ())]))[:3]
    line = f"unknown command {word}: "
    if found:
        choices = ", ".join(found[:-1]) + " or " + found[-1] if len(found) > 1 else found[0]
        line += f"did you mean {choices}? "
    return line + "/help lists the commands (// sends a message that starts with /)"


def file_has_key(home: Path) -> bool:
    """Whether config.toml names a key (its value is not read out of the parse)."""
    with contextlib.suppress(OSError, tomllib.TOMLDecodeError):
        return "api_key" in tomllib.loads(config_path(home).read_text())
    return False


def folder_shown(path: Path) -> str:
    """A folder as the input's border shows it: `~` for the home folder, its end when long."""
    home = Path.home()
    shown = str(path)
    if path == home or home in path.parents:
        shown = "~" + shown[len(str(home)) :]
    return shown if len(shown) <= FOLDER_WIDTH else "…" + shown[-(FOLDER_WIDTH - 1) :]


def applied(frame: Reopened, *, file_key: bool) -> str:
    """What the chat goes on with after /setup (never the key), from `reopened`; `file_key`:
    config.toml holds a key, which the provider's key variable, when set, is used instead of."""
    line = f"settings applied: {frame.provider}, model {frame.model}"
    if frame.base_url:
        line += f", at {frame.base_url}"
    variable = KEY_VARIABLES.get(frame.provider)
    if variable and secret_env.kept(variable) and file_key:
        line += f" ({variable} is set: its key is used, not the one in config.toml)"
    return escape_controls(line)
