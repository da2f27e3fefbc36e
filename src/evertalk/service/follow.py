"""The clients that follow the log (the follower rule, SPEC §13): a window says in its hello the
position of what it has shown (`since`), gets what was logged from there (`missed`) before any
event, then, as messages are logged, each new stretch of the log (`logged`), and the messages a
forget, a redaction or a repair changed (`changed`). Those changes have positions of their own,
the lines of `store/edits.py`'s journal: a window says in its hello how many it has applied
(`edits`), and gets the messages changed after them, as they are now.

The service's position (`covered`) moves only once every event the agent sent has gone out:
a message logged by a turn whose event still waits in the agent's queue is sent with that event
first, and in a `logged` frame after it. So a window whose connection ends at any moment holds
every message before its position, and the next service sends it the rest.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, Final

from evertalk.agent.retry import has_unanswered
from evertalk.protocol import replies
from evertalk.service.requests import RECORDS_BYTES, RECORDS_MOST, record_item
from evertalk.store.edits import edits_since
from evertalk.store.errors import StoreError

if TYPE_CHECKING:
    from evertalk.agent.session import Agent
    from evertalk.service.session import Session

MISSED_MOST: Final = 200
"""Messages `missed` carries at most: a window that missed more shows the last ones."""


class Unread(Exception):
    """Messages a frame must carry cannot be read now (a shared chat's database does not
    answer): nothing is sent, and no position moves past them, until they can be."""


class Followers:
    """The service's position in the log, and what goes to the sessions that follow it."""

    def __init__(self) -> None:
        self.covered: int | None = None  # every message before it went out (None: no agent)
        self.edits: int | None = None  # the in-place changes told to the windows so far
        self.stalled = False  # the last stretch could not be read: to send once it can

    def opened(self, agent: Agent) -> None:
        """A first agent: nothing was sent from it yet, and no window follows it yet."""
        if self.covered is None:
            self.covered = agent.chat.t
        if self.edits is None:
            self.edits = edits_since(agent.chat.folder, 0)[0]

    def missed_span(self, since: int, agent: Agent) -> tuple[int, int]:
        """The messages a `missed` from `since` carries: to read ahead, in a shared chat."""
        end = agent.chat.t if self.covered is None else self.covered
        return max(since, end - MISSED_MOST), end

    def join(
        self, session: Session, since: int, edits: int | None, agent: Agent, busy: bool
    ) -> None:
        """A session that follows from `since` (and has applied `edits` in-place changes):
        what it missed, before any event. Unread, and nothing sent, when some of it cannot
        be read now."""
        end = agent.chat.t if self.covered is None else self.covered
        first, records = _span(agent, since, end, MISSED_MOST)
        session.follows = True
        unanswered = not busy and _unanswered(agent)
        now, changed = edits_since(agent.chat.folder, edits or 0)
        if edits is None:
            changed = []  # a new window reads the messages as they are now
        missed = replies.Missed(
            t=end,
            first=first,
            records=records,
            unanswered=unanswered,
            turning=agent.turning,
            edits=edits if changed and edits is not None else now,
        )
        session.post(missed)
        if changed:
            session.post(replies.Changed(records=_records(agent, changed), edits=now))

    def advance(self, sessions: Iterable[Session], agent: Agent) -> None:
        """Once the agent's events have all gone out: the messages logged since, to each
        session that follows."""
        if agent.events_waiting():
            return
        t, covered = agent.chat.t, self.covered
        followers = [session for session in sessions if session.follows]
        if covered is None or t <= covered or not followers:
            self.covered = t
            return
        try:
            first, records = _span(agent, covered, t, RECORDS_MOST)
        except Unread:
            self.stalled = True  # the service reads them ahead and tries again
            return
        self.covered, self.stalled = t, False
        frame = replies.Logged(t=t, first=first, records=records)
        for session in followers:
            session.post(frame)

    def tell_changes(self, sessions: Iterable[Session], agent: Agent) -> None:
        """The messages changed in place since the windows were last told (a forget, a
        redaction, a repair), as the reopened chat has them, to each follower."""
        told, ids = edits_since(agent.chat.folder, self.edits or 0)
        self.edits = told
        followers = [session for session in sessions if session.follows]
        if not ids or not followers:
            return
        frame = replies.Changed(records=_records(agent, ids), edits=told)
        for session in followers:
            session.post(frame)


def _records(agent: Agent, ids: Iterable[int]) -> list[replies.RecordItem]:
    """The records of `ids` as the log has them now (one it cannot read is left out: a window
    keeps its row then, and the log is the truth)."""
    found = []
    for i in ids:
        if i >= agent.chat.t:
            continue  # a journal kept from a longer log than this one
        try:
            found.append(record_item(agent.chat.record(i)))
        except StoreError:
            continue
    return found


def _span(agent: Agent, start: int, end: int, most: int) -> tuple[int, list[replies.RecordItem]]:
    """The messages from `start` to `end`, or the last of them that fit one frame: the id of
    the first one sent, and the records. A message of the files that cannot be read is left
    out (the log is the truth: a repair puts a note there, which windows are told of); one of
    a shared chat's database that does not answer now is Unread."""
    found: list[replies.RecordItem] = []
    size, first = 0, end
    for i in range(end - 1, max(start, end - most) - 1, -1):
        try:
            record = agent.chat.record(i)
        except StoreError:
            if agent.sharing is not None:
                raise Unread from None
            first = i
            continue
        size += len(record.text.encode("utf-8", "surrogatepass"))
        if size > RECORDS_BYTES and found:
            break
        found.append(record_item(record))
        first = i
    found.reverse()
    return first, found


def _unanswered(agent: Agent) -> bool:
    """Whether the last message has no reply because a service went during its turn (a
    crash, a stop): not a turn the user cancelled or one that failed, which the windows were
    told of as it ended."""
    chat = agent.chat
    try:
        if not has_unanswered(chat):
            return False
        for i in range(chat.t - 1, max(-1, chat.t - 1 - SCANNED), -1):
            record = chat.record(i)
            if record.kind in ("user", "work"):
                return True  # a crash: the turn never ended
            if record.kind == "echo" and record.text.startswith(STOPPED):
                return record.text.startswith(STOPPED_BY_SERVICE)
    except StoreError:
        return False
    return True


STOPPED: Final = "turn stopped: "
STOPPED_BY_SERVICE: Final = STOPPED + "the service stopped"
"""How the log says a turn ended without a reply, and that the service's stop ended it."""
SCANNED: Final = 1_000
"""Messages read back from the end for that, at most: a turn's tool calls and results."""
