"""`PgSession`: the chat in PostgreSQL for a program that goes on while the database comes and
goes (SPEC §13).

It holds one `PgChat` and replaces it when its connection is lost: the server stopped,
restarted, crashed, or the connection ended by the network or an administrator. A call made
then raises one line saying where the database is, why it cannot be reached and when evertalk
tries again, never the password; the next tries come after growing delays (backoff.py), and
the first that reaches the server applies the schema again (`connect`) and opens the chat
anew. Nothing is kept aside meanwhile, in memory or in a local file: the caller keeps what it
could not write and sends it again once the session is up.

What may be sent again is the caller's to say (`run`'s `idempotent`): an append given an
idempotency key may, since the server returns the ids logged under the key the first time
(the lost connection may have taken the answer of a commit that was made); an append without
a key may not, as it would be logged twice.
"""

from __future__ import annotations

import math
import random
import threading
import time
from collections.abc import Callable
from typing import TypeVar

import psycopg

from evertalk.pgstore.backoff import Backoff
from evertalk.pgstore.connect import Connection, connect, one_line
from evertalk.pgstore.errors import PgStoreError, Refused
from evertalk.pgstore.pgchat import PgChat
from evertalk.pgstore.url import parse_url

T = TypeVar("T")


class DatabaseDown(PgStoreError):
    """The session is down: the call was not made, or was cut off (whether the server did it
    is unknown, but it is idempotent); either way it may be made again once the session is up,
    `retry_in` seconds from the error at the soonest."""

    def __init__(self, line: str, retry_in: float) -> None:
        super().__init__(line)
        self.retry_in = retry_in


class OutcomeUnknown(PgStoreError):
    """The connection was lost during a call that may not be made twice: the server may have
    done it or not, and it is not made again."""


class PgSession:
    """The chat `name` of the database at `url`, written as `machine`, across lost
    connections.

    `connect`, `sleep` and `clock` (monotonic seconds) are the I/O it does, given so that a
    test may stand in for each; `backoff` spaces the tries (by default from half a second to
    thirty, with a jitter). No I/O happens before the first `run`, `reconnect` or `wait_up`.
    Calls from several threads take turns: a transaction of one thread's never takes in a
    statement of another's.
    """

    def __init__(
        self,
        url: str,
        machine: str,
        *,
        name: str = "main",
        connect: Callable[[str], Connection] = connect,
        sleep: Callable[[float], object] = time.sleep,
        clock: Callable[[], float] = time.monotonic,
        backoff: Backoff | None = None,
    ) -> None:
        self.url = url
        self.where = parse_url(url).where  # ValueError, without the password, if malformed
        self.machine = machine
        self.name = name
        self._connect = connect
        self._sleep = sleep
        self._clock = clock
        self._backoff = backoff if backoff is not None else Backoff(jitter=random.Random().random)
        self._chat: PgChat | None = None
        self._reason: str | None = None  # why the last try failed; None before any
        self._cannot = "cannot be reached"  # what the last failure says of the database
        self._retry_at = -float("inf")  # when the next try is due, while down
        self._turns = threading.RLock()  # one call at a time on the connection

    @property
    def up(self) -> bool:
        """Whether the session holds a connection (the last call or try went through)."""
        return self._chat is not None

    @property
    def status(self) -> str:
        """One line: connected, not yet tried, or why the database cannot be reached and when
        evertalk tries again."""
        if self._chat is not None:
            return f"connected to the database at {self.where}"
        if self._reason is None:
            return f"not connected to the database at {self.where} yet"
        return str(self._down(self._clock()))

    @property
    def down_line(self) -> str | None:
        """Why the last try failed, in one line without when the next comes (for a program
        that stops rather than tries again), or None."""
        if self._reason is None:
            return None
        return f"the database at {self.where} {self._cannot}: {self._reason}"

    def run(self, operation: Callable[[PgChat], T], *, idempotent: bool) -> T:
        """`operation(chat)`, once the session is up (a try is made first if one is due).

        When the connection is lost meanwhile, the session tries at once to connect again (a
        restarted server, or a connection ended by an administrator, is back already). Then
        an `idempotent` operation is run again, once, on the new connection, and its result
        returned; one that is not raises `OutcomeUnknown` whether the session is up again or
        not, since the server may have done it. An append with an idempotency key is
        idempotent; an append without one is not, and is never sent again by the session
        (whether it was logged can only be seen in the log).

        Raises `DatabaseDown` (one line) when the database cannot be reached; the errors of the
        operation that are not a lost connection go through as they are. The operation is
        given the chat of the current connection: it keeps nothing of it past its call.
        """
        with self._turns:
            return self._run(operation, idempotent)

    def _run(self, operation: Callable[[PgChat], T], idempotent: bool) -> T:
        chat = self._ready()
        try:
            return operation(chat)
        except (psycopg.Error, PgStoreError) as error:
            if not chat.conn.closed:
                raise
            lost = one_line(error, self.url)
        self._drop()
        again = self._try()
        if not idempotent:
            after = "evertalk is connected again" if self.up else self._tail(self._clock())
            raise OutcomeUnknown(
                f"the connection to the database at {self.where} was lost before the change"
                f" was confirmed ({lost}): it may have been made, and is not made again;"
                f" {after}"
            )
        if isinstance(again, DatabaseDown):
            raise again
        try:
            return operation(again)
        except (psycopg.Error, PgStoreError) as error:
            if not again.conn.closed:
                raise
            lost = one_line(error, self.url)
        self._drop()
        raise self._failed(lost)

    def reconnect(self) -> bool:
        """Try once to connect, now, whatever the backoff says (nothing to do when up);
        whether the session is up."""
        with self._turns:
            return self._chat is not None or isinstance(self._try(), PgChat)

    def wait_up(self, deadline: float) -> bool:
        """Try to connect whenever a try is due, sleeping in between, until the session is up
        or the clock reaches `deadline` (on the `clock` given); whether it is up. A try that is
        due is made even when the deadline has passed."""
        while self._chat is None:
            now = self._clock()
            if now >= self._retry_at:
                with self._turns:
                    self._try()
                continue
            if now >= deadline:
                return False
            self._sleep(min(self._retry_at, deadline) - now)
        return True

    def close(self) -> None:
        """Close the connection (a later call opens one again)."""
        self._drop()

    def __enter__(self) -> PgSession:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # The connection

    def _ready(self) -> PgChat:
        if self._chat is not None:
            return self._chat
        now = self._clock()
        if now < self._retry_at:
            raise self._down(now)
        chat = self._try()
        if isinstance(chat, DatabaseDown):
            raise chat
        return chat

    def _try(self) -> PgChat | DatabaseDown:
        """One try to connect and open the chat: the chat, or the error saying why not and
        when the next try is due (put off by the backoff)."""
        try:
            conn = self._connect(self.url)
        except (psycopg.Error, PgStoreError) as error:
            return self._failed(_reason(one_line(error, self.url), self.where))
        try:
            chat = PgChat.open(conn, self.name, machine=self.machine)
        except (psycopg.Error, PgStoreError) as error:
            conn.close()
            return self._failed(one_line(error, self.url), refused=isinstance(error, Refused))
        except BaseException:
            conn.close()
            raise
        self._chat = chat
        self._reason = None
        self._backoff.reset()
        return chat

    def _drop(self) -> None:
        if self._chat is not None:
            self._chat.conn.close()
            self._chat = None

    def _failed(self, reason: str, *, refused: bool = False) -> DatabaseDown:
        """Count a failure: the next try waits for the backoff's next delay. The error saying
        so, for the caller to raise. `refused`: the database was reached, and evertalk will not
        use it as it is."""
        now = self._clock()
        self._reason = reason
        self._cannot = "cannot be used" if refused else "cannot be reached"
        self._retry_at = now + self._backoff.next_delay()
        return self._down(now)

    def _down(self, now: float) -> DatabaseDown:
        line = f"the database at {self.where} {self._cannot}: {self._reason}; {self._tail(now)}"
        return DatabaseDown(line, max(0.0, self._retry_at - now))

    def _tail(self, now: float) -> str:
        seconds = self._retry_at - now
        if seconds <= 0:
            return "evertalk tries again now"
        # rounded up (to a tenth below ten seconds), so that "now" means due
        tenths = seconds < 10
        steps = max(1, math.ceil(seconds * (10 if tenths else 1) - 1e-6))
        shown = f"{steps / 10:g}" if tenths else str(steps)
        return f"evertalk tries again in {shown} s"


def _reason(line: str, where: str) -> str:
    """The reason in `connect`'s line, which says where already."""
    return line.removeprefix(f"cannot reach the database at {where}: ")
