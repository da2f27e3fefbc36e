"""`evertalk memory compact`: build every node that needs a model call, with a progress line.

A chat that is behind (an import, a long time offline, a lost tree) is said to be catching up
first, with the summaries to go and about how long they take. On a terminal the progress line is
redrawn in place, with the time left once a rate is measured; a warning (a node's first failure)
gets a line of its own above it. Once everything is built, a batch that waited for the summaries
goes on at once rather than at the next message, so the command ends with the view at or under
its ceiling. The last line, terminal or not, is the progress at the end.
"""

from __future__ import annotations

import sys
from pathlib import Path

import anyio

from evertalk.chat import Chat
from evertalk.compactor.service import Compactor
from evertalk.compactor.status import catch_up_seconds
from evertalk.config import ConfigError, secret_values
from evertalk.ledger import Ledger, ledger_path
from evertalk.memory.budget import Budget
from evertalk.memory_cli import report_warnings
from evertalk.protocol.events import CatchingUp, about, catching_up_text
from evertalk.providers.base import ProviderError
from evertalk.runtime import Runtime
from evertalk.store.errors import StoreError


def run_compact(home: Path) -> int:
    chat_dir = home / "chat"
    if not (chat_dir / "main").is_dir():  # Chat.open would make an empty chat
        return _fail(f"no chat in {chat_dir} (set --home or EVERTALK_HOME)")
    try:
        runtime = Runtime.load(home)
        chat = Chat.open(chat_dir, budget=Budget.for_window(runtime.config.turn.context_window))
    except (ConfigError, StoreError) as error:
        return _fail(str(error))
    report_warnings(chat)
    if not chat.core.tree.unbuilt_count():  # nothing to build: no need to load a model SDK
        try:
            _resume_batch(chat)  # one an earlier run left waiting
        except StoreError as error:
            return _fail(str(error))
        finally:
            chat.close()
        print(_progress(0, 0, 0, 0.0, None), file=sys.stderr)
        return 0
    ledger = Ledger(ledger_path(home))
    compactor: Compactor | None = None
    try:
        provider = runtime.memory_provider()
        compactor = Compactor(
            chat,
            provider,
            runtime.compactor_settings(),
            system=runtime.system,
            tools=runtime.tools,  # the turns' list: one cached prefix for both
            ledger=ledger,
            on_warning=_warn,
            secrets=secret_values(runtime.config),
        )
        compactor.waiting = True  # nobody will send a message: retry failed nodes on a timer
        total = compactor.unbuilt()
        _say_catching_up(chat, compactor.settings.concurrency)
        anyio.run(_compact, compactor, total)
        _resume_batch(chat)
    except ProviderError as error:
        return _fail(f"the compactor's model cannot be used: {error}")
    except StoreError as error:  # a line could not be saved: the chat must be reopened
        return _fail(str(error))
    except KeyboardInterrupt:
        built = compactor.built if compactor else 0
        print(f"\nstopped; the {built} lines built so far are kept", file=sys.stderr)
        return 130
    finally:
        ledger.close()
        chat.close()
    print(_line(compactor, total), file=sys.stderr)
    return 0


def _say_catching_up(chat: Chat, concurrency: int) -> None:
    """`catching up: 4,812 summaries to go, about 2 h`, when the chat is behind: before any
    call, so at the default pace."""
    catch_up = chat.core.catch_up()
    if catch_up.behind:
        eta = catch_up_seconds(catch_up.to_go, None, concurrency)
        print(catching_up_text(CatchingUp(catch_up.to_go, eta)), file=sys.stderr)


def _resume_batch(chat: Chat) -> None:
    """Everything is built: the batch that waited for it goes on now, not at the next message."""
    before = chat.core.view.size
    if chat.resume_batch() and chat.core.view.size != before:
        _warn(f"the view merged down from {before:,} to {chat.core.view.size:,} bytes")


async def _compact(compactor: Compactor, total: int) -> None:
    error: ProviderError | StoreError | None = None
    async with anyio.create_task_group() as group:
        group.start_soon(_show_progress, compactor, total)
        try:
            await compactor.run(until_built=True)
        except (ProviderError, StoreError) as caught:  # out of the group it would be a group
            error = caught
        group.cancel_scope.cancel()
    if error is not None:
        raise error


async def _show_progress(compactor: Compactor, total: int) -> None:
    while True:
        if sys.stderr.isatty():
            print("\r" + _line(compactor, total), end="", file=sys.stderr, flush=True)
        await anyio.sleep(0.5)


def _warn(line: str) -> None:
    if sys.stderr.isatty():  # over the progress line, which the next tick draws again below
        print("\r\x1b[K" + line, file=sys.stderr, flush=True)
    else:
        print(line, file=sys.stderr, flush=True)


def _line(compactor: Compactor, total: int) -> str:
    error = compactor.last_error if compactor.failed_at else None
    left = compactor.unbuilt()
    rate = compactor.rate()
    eta = f"{about(left / rate)} left" if rate and left else None
    return _progress(total - left, total, compactor.calls, compactor.cost, error, eta)


def _progress(
    done: int, total: int, calls: int, cost: float, error: str | None, eta: str | None = None
) -> str:
    width = 24
    filled = width * done // total if total else width
    bar = "#" * filled + "-" * (width - filled)
    tail = f" · {eta}" if eta else ""
    tail += f" · last error: {error}" if error else ""
    return f"[{bar}] built {done:,}/{total:,} · calls {calls:,} · ${cost:.4f}{tail}"


def _fail(message: str) -> int:
    print(f"evertalk: {message}", file=sys.stderr)
    return 1
