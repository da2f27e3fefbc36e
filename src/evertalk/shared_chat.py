"""`SharedChat`: the chat kept in PostgreSQL, shared by every machine's service (SPEC §13).

Every change to the shared state (a message logged, a node built or cut) is one transaction in
the database, and gets the chat's next sequence number there. No change reaches this machine's
memory core when it is made: the core takes every change, this machine's too, from the chat's
feed, in sequence order (`follow`). Each machine's core so takes the same events in the same
order, and all hold the same tree and the same views.

What each core derives alike (free nodes) is written by the machine whose change made it, and
left alone by the others. A compaction runs only under a lease (`claim`), so that one machine
calls a model for a node; a second build that gets in anyway is refused by the database and
counted. Failures are counted for the chat, in the database: the third, on any machine, makes
a cut, which is a change like a build.

A turn's appends carry the epoch of the turn lock it took (`TurnFence`, set for the task that
runs the turn by `agent/sharing.py`); the database refuses them once another session has taken
the turn, and the fence is told it was lost.

No database call runs on the service's event loop: the chat's connection has a thread of its
own (`pgstore/worker.py`), and the service awaits the calls that change or read the chat
(`alog_message`, `abuild`, `aclaim`, `afollow`, …); the core is changed on the loop only, with
what the thread read. A turn's messages are queued and logged in order by a writer
(`shared_log.py`), as its stream goes on; what the windows read next (the latest messages,
the lines of the view) is kept or read ahead (`shared_kept.py`, `aread_records`, …). Called and
waited for on an event loop's thread, the plain methods still work, but stop the loop: the
tests look for any such call (`worker.LOOP_CALLS`).

The views are the chat's, not the machine's: their budget is a change in the stream (the first
open of a machine whose turn model asks for another budget makes it, and every machine folds it
where it stands), and the saved views name the change they were folded up to. A machine that
opens takes them with the tree as it stood at that change and folds the changes since, each
with what was built by then (`pgstore/opening.py`): it holds the views the others hold.

`SharedChat` is made of parts, one job each (shared_chat_parts/), over `Chat`'s; this module
is its front door.
"""

from __future__ import annotations

import json
import socket
from pathlib import Path

from evertalk.memory import Budget
from evertalk.pgstore.session import PgSession
from evertalk.pgstore.storage import LEASE_SECONDS, PgStorage
from evertalk.shared_chat_parts.building import SharedBuilding
from evertalk.shared_chat_parts.fence import TURN, TurnFence
from evertalk.shared_chat_parts.leases import SharedLeases
from evertalk.shared_chat_parts.messages import SharedMessages
from evertalk.shared_chat_parts.read_ahead import SharedReadAhead
from evertalk.store.errors import StoreError
from evertalk.store.secure import write_atomic

ASKED_BUDGET = "budget.json"
"""In this machine's folder: the view budget its turn model asked the chat for last."""


def machine_name(home: Path) -> str:
    """How this home on this machine is named to the others: the host, and the home when it is
    not the default one (two homes on one host are two machines of the chat)."""
    host = socket.gethostname() or "a machine"
    default = Path.home() / ".evertalk"
    return host if home.resolve() == default.resolve() else f"{host}:{home}"


class SharedChat(SharedMessages, SharedBuilding, SharedReadAhead, SharedLeases):
    """The chat of a `PgStorage`, folded in from the chat's feed."""

    @classmethod
    def open_shared(
        cls,
        session: PgSession,
        folder: Path,
        *,
        readonly: bool = False,
        budget: Budget | None = None,
        lease_seconds: float = LEASE_SECONDS,
    ) -> SharedChat:
        """The chat of `session`'s database, with `folder` as this machine's place for it. It
        waits for the database: a service opens it in a worker thread."""
        storage = PgStorage.open(session, folder, readonly=readonly, lease_seconds=lease_seconds)
        chat = cls.over(storage, readonly=readonly)  # with the chat's budget, saved with its views
        try:
            chat._fold_opening()
            if budget is not None and not readonly:
                chat._ask_budget(budget)
        except BaseException:
            chat.close()
            raise
        return chat

    def _fold_opening(self) -> None:
        """The changes made since the saved views, folded as every machine folded them. Their
        messages are not news to this machine's windows, which open after."""
        since, self._since_opened = self._since_opened, ()
        self.follower.feed(since, self._take)
        self.others.clear()
        self._save_if_due()

    def _ask_budget(self, budget: Budget) -> None:
        """Make this machine's budget the chat's when its turn model changed since it last
        asked (or it never did): machines whose models differ then do not undo each other's at
        every open. A failure only leaves the chat's budget as it is."""
        asked = budget.sizes()
        place = self.shared.path / ASKED_BUDGET
        before = _sizes_in(place)
        if asked == before:
            return
        try:
            if asked != self.core.budget.sizes():
                seq = self.shared.set_budget(asked)
                self._fold_own(seq, {"budget": list(asked)})
            write_atomic(place, json.dumps(list(asked)).encode("utf-8"), durable=False)
        except (StoreError, OSError) as error:
            self.warnings.append(f"memory: the view's budget was not changed: {error}")


def _sizes_in(place: Path) -> tuple[int, int, int, int] | None:
    """The budget a machine asked for last, as `_ask_budget` keeps it; None if unknown."""
    try:
        sizes = json.loads(place.read_bytes())
    except (OSError, ValueError):
        return None
    if isinstance(sizes, list) and len(sizes) == 4 and all(type(n) is int for n in sizes):
        return (sizes[0], sizes[1], sizes[2], sizes[3])
    return None


__all__ = ["TURN", "SharedChat", "TurnFence", "machine_name"]
