"""`evertalk memory compact`: build every node that needs a model call, with a progress line."""

from __future__ import annotations

import sys
from pathlib import Path

import anyio

from evertalk.chat import Chat
from evertalk.compactor.service import Compactor
from evertalk.config import ConfigError
from evertalk.ledger import Ledger, ledger_path
from evertalk.prompts import TOOLS
from evertalk.providers.base import ProviderError
from evertalk.runtime import Runtime
from evertalk.store.errors import StoreError


def run_compact(home: Path) -> int:
    try:
        runtime = Runtime.load(home)
        chat = Chat.open(home / "chat")
    except (ConfigError, StoreError) as error:
        return _fail(str(error))
    ledger = Ledger(ledger_path(home))
    try:
        provider = runtime.provider()
        compactor = Compactor(
            chat,
            provider,
            runtime.compactor_settings(),
            system=runtime.system,
            tools=TOOLS,
            ledger=ledger,
        )
        compactor.waiting = True  # nobody will send a message: retry failed nodes on a timer
        total = compactor.unbuilt()
        anyio.run(_compact, compactor, total)
    except ProviderError as error:
        return _fail(f"the compactor's model cannot be used: {error}")
    except KeyboardInterrupt:
        print(f"\nstopped; the {compactor.built} lines built so far are kept", file=sys.stderr)
        return 130
    finally:
        ledger.close()
        chat.close()
    print(_progress(compactor, total), file=sys.stderr)
    return 0


async def _compact(compactor: Compactor, total: int) -> None:
    async with anyio.create_task_group() as group:
        group.start_soon(_show_progress, compactor, total)
        await compactor.run(until_built=True)
        group.cancel_scope.cancel()


async def _show_progress(compactor: Compactor, total: int) -> None:
    while True:
        if sys.stderr.isatty():
            print("\r" + _progress(compactor, total), end="", file=sys.stderr, flush=True)
        await anyio.sleep(0.5)


def _progress(compactor: Compactor, total: int) -> str:
    done = total - compactor.unbuilt()
    width = 24
    filled = width * done // total if total else width
    bar = "#" * filled + "-" * (width - filled)
    error = f" · last error: {compactor.last_error}" if compactor.failed_at else ""
    return (
        f"[{bar}] built {done:,}/{total:,} · calls {compactor.calls:,} · "
        f"${compactor.cost:.4f}{error}"
    )


def _fail(message: str) -> int:
    print(f"evertalk: {message}", file=sys.stderr)
    return 1
