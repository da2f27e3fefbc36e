"""One `-p` turn in this process, with no service: what `evertalk -p` did before the service
took the chat (`client/headless.py` is `-p` now). It stays for programs that embed evertalk
and for the tests and benchmarks that measure a turn in one process.

The turn runs as any other (the settle wait included) and its final reply goes to standard
output, a warning about the summaries (`memory: …`) or about a model that calls no tools
(`tools: …`) to standard error. With `--json`, every event goes to standard output as one JSON
line instead, as it happens. Tools whose policy is `ask` do not run (no one can be asked) unless
`--allow` grants them for this run. If the turn starts subagents, the run goes on until they
have reported and the turns their reports start have ended: a subagent is never left cut off
halfway. Compaction calls still running then are let finish, and no other starts (a line on
standard error says how many; Ctrl+C skips the wait): each is paid for, and its line is kept.

`evertalk -p --retry` runs the turn again for the last message that has no reply (its turn
failed), without logging the message a second time (`Agent.retry`); a stopped turn's line says
so when it applies. A model call tried again after a transient error says so on standard error:
`retrying (2/3) after 1.8 s: server overloaded (529)`.

Exit status: 0 when every turn ended normally; 1 with a one-line error on standard error (no
provider configured, a setting or the instructions file that cannot be used, the chat open in
another process, a failed model call, a turn stopped); 2 when `--retry` finds nothing to retry;
130 when interrupted.
"""

from __future__ import annotations

import signal
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TextIO

import anyio
import anyio.abc

from evertalk.agent.retry import NothingToRetry, has_unanswered
from evertalk.agent.session import Agent, NotConfigured
from evertalk.client.printers import (  # noqa: F401 - re-exported: the tests' and CLI's names
    CATCH_UP_EVERY,
    EXIT_FAILED,
    EXIT_INTERRUPTED,
    EXIT_OK,
    EXIT_USAGE,
    JsonPrinter,
    ReplyPrinter,
    for_stream,
)
from evertalk.compactor.service import Compactor
from evertalk.config import ConfigError
from evertalk.memory_cli import report_warnings
from evertalk.protocol.events import (
    TurnEnded,
)
from evertalk.providers.base import Image, ProviderError
from evertalk.store.errors import StoreError, describe
from evertalk.terminal_text import fail

RETRY_HINT = "; evertalk -p --retry tries it again"
"""Added to a stopped turn's line when its message is left without a reply."""


def run_headless(
    home: Path,
    message: str,
    *,
    as_json: bool = False,
    grants: Sequence[str] = (),
    workdir: Path | None = None,
    images: Sequence[Image] = (),
    retry: bool = False,
) -> int:
    """Run the turn for `message` (with its images), or with `retry` the turn again for the
    last message that has no reply (`message` unused), and print its reply (or its events);
    the exit status."""
    try:
        return anyio.run(_run, home, message, as_json, tuple(grants), workdir, tuple(images), retry)
    except KeyboardInterrupt:
        print("evertalk: interrupted; what was logged stays", file=sys.stderr)
        return EXIT_INTERRUPTED


async def _run(
    home: Path,
    message: str,
    as_json: bool,
    grants: tuple[str, ...],
    workdir: Path | None,
    images: tuple[Image, ...],
    retry: bool,
) -> int:
    if not retry and not message.strip():
        return fail("the message is empty")
    try:
        async with Agent.open(home, asker=None, granted=grants, workdir=workdir) as agent:
            report_warnings(agent.chat)
            try:
                if retry:
                    agent.retry()
                else:
                    agent.submit(message, images)
            except NothingToRetry as error:
                return fail(str(error), EXIT_USAGE)

            def hint() -> str:
                return RETRY_HINT if has_unanswered(agent.chat) else ""

            printer: JsonPrinter | ReplyPrinter
            if as_json:
                printer = JsonPrinter(sys.stdout, sys.stderr, hint=hint)
            else:
                printer = ReplyPrinter(sys.stdout, sys.stderr, hint=hint)
            async for event in agent.events():
                printer.show(event)
                if isinstance(event, TurnEnded) and not (agent.busy or agent.subagents.running):
                    break
            await finish_summaries(agent.compactor, sys.stderr)
            return printer.status
    except (ConfigError, StoreError, NotConfigured, ProviderError) as error:
        return fail(str(error))
    except BrokenPipeError:
        raise  # the reader of the output left: the command line ends quietly
    except OSError as error:  # the home folder itself cannot be used: one line, not a traceback
        return fail(describe(error))


async def finish_summaries(compactor: Compactor, err: TextIO) -> None:
    """Let the compaction calls in flight land before the exit, and start no other. Each is
    paid for; cut off, its line would be lost and its node sent again by the next run. The
    wait ends when they are done, at the call deadline (SPEC §4.2), or at Ctrl+C. The line
    saying so goes to standard error in both modes: standard output stays the reply or the
    JSON events."""
    if not compactor.in_flight:
        return
    with anyio.move_on_after(compactor.settings.deadline):
        async with anyio.create_task_group() as group:
            # Ctrl+C is caught before the line invites it
            await group.start(_skip_on_interrupt, group.cancel_scope)
            count = len(compactor.in_flight)
            what = "summary" if count == 1 else "summaries"
            print(f"waiting for {count} {what} in progress (Ctrl+C skips)", file=err, flush=True)
            # no await since the count: the drain stops new calls before any could start
            await compactor.drain()
            group.cancel_scope.cancel()


async def _skip_on_interrupt(
    scope: anyio.CancelScope, *, task_status: anyio.abc.TaskStatus[None]
) -> None:
    """Ctrl+C ends the wait, not the run: the turn is over, and its exit status stands."""
    with anyio.open_signal_receiver(signal.SIGINT) as signals:
        task_status.started()
        async for _ in signals:
            scope.cancel()
            return
