"""Subagents (SPEC §6.7): background loops with their own logs, reporting to the main chat.

`agent(name, task)` starts one without waiting for it. Each is a call of its own,
`[tools] [system] [view] [task]`, sent once a turn's settle wait would be over, with its own tool
loop and a log of its own, one file a day under `chat/agents/<Name>/` (§1.2 records, ids from 0).
What it replies last reaches the main chat as a single `work` message `[Name] reply`: between the
tool calls of a running turn, or opening a new turn. Nothing in the main chat waits for it;
at most 8 run at once, and a subagent cannot start another (depth 1). One still working when
evertalk quits is cancelled, and the main chat says so at once, so that later turns do not take
it for running. The user can list the running ones and stop one by name (`listing`, `stop`): its
report then says that the user stopped it, and goes through `stopped`, which the session makes
reach a running turn without ever starting one of its own.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path

import anyio
from anyio.abc import TaskGroup

from evertalk.agent.tools.agent import NAME_RULE, valid_name
from evertalk.agent.tools.base import ToolError
from evertalk.agent.turn import Ending, Held, explain
from evertalk.memory.text import split_text, valid_unicode
from evertalk.store.days import day_file_name, iso, local_now
from evertalk.store.jsonl import Appender
from evertalk.store.message_log import MessageLog, NewMessage
from evertalk.store.records import encode_message
from evertalk.store.secure import make_dir

MAX_RUNNING = 8


class SubagentError(ToolError):
    """A subagent cannot start: the message is one line, for the model to read (the Toolbox
    makes it the `agent` call's error result)."""


class AgentLog(MessageLog):
    """A subagent's own log: the message records of SPEC §1.2, appended and fsynced one by one,
    with ids from 0. Only a new subagent writes one, so it never needs to be read back here."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.count = 0
        self._appender = Appender(max_open=1)

    @classmethod
    def create(cls, agents_dir: Path, name: str) -> AgentLog:
        """A new log for `name`; a name used before in this chat is refused."""
        folder = agents_dir / name
        if not make_dir(folder):  # made (0700, fsynced) only if it did not exist
            raise SubagentError(
                f"a subagent named {name} already exists in this chat: choose another name"
            )
        return cls(folder)

    def log_message(self, message: NewMessage) -> list[int]:
        """Log a message, split into pages when long; returns the ids. Keys are not kept: a
        subagent's log is never appended to again after a restart."""
        ids = []
        for number, piece in enumerate(split_text(valid_unicode(message.text))):
            when = message.date or local_now()
            first = message.images if number == 0 else None
            data = encode_message(
                self.count,
                message.kind,
                piece,
                iso(when),
                None,
                first,
                message.agent,
                failed=message.failed,
            )
            self._appender.append(self.folder / day_file_name(when), data)
            ids.append(self.count)
            self.count += 1
        return ids

    def close(self) -> None:
        self._appender.close()


Runner = Callable[[str, str, AgentLog], Awaitable[Ending]]
"""Runs a subagent's loop: (name, task, log) → how it ended (the session provides it)."""


def quit_report(name: str) -> str:
    """The main chat's `work` message for a subagent cut off by the end of the process."""
    return (
        f'[{name}] stopped unfinished: evertalk quit while it was working. zoom("{name}") '
        "shows how far it got."
    )


def stop_report(name: str) -> str:
    """The main chat's `work` message for a subagent the user stopped."""
    return f'[{name}] stopped by the user before it finished. zoom("{name}") shows what it did.'


@dataclass(frozen=True)
class RunningAgent:
    """A running subagent as the user sees it (`Subagents.listing`)."""

    name: str
    task: str  # its first line
    seconds: float  # since it started
    messages: int  # in its own log so far


@dataclass
class _Run:
    """What is kept of a running subagent: its own cancel scope lets the user stop it alone."""

    name: str
    task: str
    log: AgentLog
    started: float = field(default_factory=time.monotonic)
    scope: anyio.CancelScope = field(default_factory=anyio.CancelScope)
    stopped: bool = False  # by the user: its report is said already

    def seen(self, now: float) -> RunningAgent:
        first = self.task.strip().splitlines()[0]
        return RunningAgent(self.name, first, now - self.started, self.log.count)


class Subagents:
    """The subagents of one session: started in the session's task group, cancelled with it."""

    def __init__(
        self,
        agents_dir: Path,
        group: TaskGroup,
        run: Runner,
        deliver: Callable[[Held], None],
        changed: Callable[[], None] = lambda: None,
        limit: int = MAX_RUNNING,
        *,
        record: Callable[[Held], None] | None = None,
        stopped: Callable[[Held], None] | None = None,
    ) -> None:
        """`deliver` holds a report for a turn; `record` logs a message in the main chat at
        once, synchronously (used at quit, when no turn will come; None: nothing is logged);
        `stopped` passes on the report of a subagent the user stopped (None: as `deliver`)."""
        self.agents_dir = agents_dir
        self.group = group
        self._run = run
        self._deliver = deliver
        self._record = record
        self._stopped = stopped or deliver
        self._changed = changed
        self.limit = limit
        self.running: dict[str, _Run] = {}

    async def start(self, name: str, task: str) -> str:
        """The `start_agent` given to the tools: start `name` on `task`, return at once."""
        if not valid_name(name):
            raise SubagentError(f"a subagent's name is {NAME_RULE}")
        if not task.strip():
            raise SubagentError("the task is empty: say what the subagent should do")
        if len(self.running) >= self.limit:
            raise SubagentError(
                f"{self.limit} subagents are running already; start this one after one of "
                "them reports"
            )
        if name in self.running:
            raise SubagentError(f"a subagent named {name} is running already")
        run = _Run(name, task, AgentLog.create(self.agents_dir, name))
        self.running[name] = run
        self._changed()
        self.group.start_soon(self._work, run)
        return (
            f"Subagent {name} started in the background. Its report will arrive as a message "
            f"that starts with [{name}]."
        )

    def listing(self) -> list[RunningAgent]:
        """The running subagents, the oldest first."""
        now = time.monotonic()
        return [run.seen(now) for run in self.running.values()]

    def stop(self, name: str) -> str:
        """Stop the running subagent `name` at the user's word; returns its report. The report
        goes out now, not when the task has unwound: from here on the subagent counts as gone,
        and whatever it might still produce is dropped. An unknown or finished name is a
        SubagentError (one line)."""
        run = self.running.pop(name, None)
        if run is None:
            raise SubagentError(self._not_running(name))
        run.stopped = True
        run.scope.cancel()
        report = stop_report(name)
        self._stopped(Held("work", report, agent=name))
        self._changed()
        return report

    def _not_running(self, name: str) -> str:
        if valid_name(name) and (self.agents_dir / name).is_dir():
            return f'{name} is not running: it has ended (zoom("{name}") shows what it did)'
        return f"no subagent named {name} is running"

    async def _work(self, run: _Run) -> None:
        report: str | None = None
        try:
            with run.scope:  # cancelled by `stop` alone; the scope ends the stopped one quietly
                report = _report(await self._run(run.name, run.task, run.log))
        except anyio.get_cancelled_exc_class():
            # the session's closing: no turn will take a held report (a stopped one has its own)
            if not run.stopped:
                self._quit(run.name)
            raise
        except Exception as error:  # a bug in one subagent must not end the session
            report = f"stopped before finishing: {explain(error)}"
        finally:
            run.log.close()
            if self.running.get(run.name) is run:
                del self.running[run.name]
            if report is not None and not run.stopped:
                self._deliver(Held("work", f"[{run.name}] {report}", agent=run.name))
            self._changed()

    def _quit(self, name: str) -> None:
        """Say in the main chat that `name` was cut off. The append is synchronous, so the
        cancellation cannot interrupt it, and a failing disk must not turn the quit into an
        error: the subagent's own log still shows what it did."""
        if self._record is None:
            return
        with contextlib.suppress(Exception):
            self._record(Held("work", quit_report(name), agent=name))


def _report(ending: Ending) -> str:
    """A finished subagent's report: its final reply, or why it ended early."""
    event = ending.event
    if event.reason == "done":
        return ending.final or "(finished without a reply)"
    report = f"stopped before finishing: {event.error or event.reason}"
    if ending.final:
        report += "\n\n" + ending.final
    return report
