"""`DbThread`: one thread that makes every call on a database connection, so that no database
I/O runs on the service's event loop.

A coroutine awaits a call (`call`) and its event loop runs every other window, stream and turn
meanwhile, however long the database takes to answer (a connect that waits out its timeout, a
network that went silent). Calls run one at a time, in the order they were made, which is the
order a connection takes statements in anyway. A call that nobody waits for (`submit`) keeps
its place in that order.

A program with no event loop (a command, a test) calls and waits (`run`). Made on an event
loop's thread, such a call still runs, and the loop waits for it: that is what this module is
for avoiding, so each one is noted in `LOOP_CALLS` for the tests to find.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable
from concurrent.futures import Future
from queue import SimpleQueue
from typing import TypeVar

T = TypeVar("T")

LOOP_CALLS: list[str] = []
"""What was called and waited for on an event loop's thread (`run`), in order: none should be."""

_Job = tuple[Callable[[], object], "Future[object]"] | None


def on_event_loop() -> bool:
    """Whether this thread runs an event loop: a wait here would stop it."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return False
    return True


class DbThread:
    """The thread of one connection (`name` says whose, in the thread's name). It starts at
    the first call and ends at `close`, once the calls made before it are done."""

    def __init__(self, name: str) -> None:
        self.name = name
        self._jobs: SimpleQueue[_Job] = SimpleQueue()
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()
        self._closed = False

    def submit(self, work: Callable[[], T]) -> Future[T]:
        """Run `work` after the calls made before it; its future."""
        future: Future[T] = Future()
        with self._lock:
            if self._closed:
                raise RuntimeError(f"the database thread of {self.name} is closed")
            if self._thread is None:
                self._thread = threading.Thread(
                    target=self._work, name=f"evertalk-db-{self.name}", daemon=True
                )
                self._thread.start()
            self._jobs.put((work, future))  # type: ignore[arg-type]
        return future

    async def call(self, work: Callable[[], T]) -> T:
        """`work`'s result, awaited without stopping the event loop. A cancelled waiter leaves
        a call that has begun to finish in the thread (its result is dropped); one that has
        not begun is not made."""
        return await asyncio.wrap_future(self.submit(work))

    def run(self, work: Callable[[], T], what: str = "a database call") -> T:
        """`work`'s result, waited for here (see the module's docstring)."""
        if threading.current_thread() is self._thread:
            return work()  # a call made by a call of this thread's
        if on_event_loop():
            LOOP_CALLS.append(what)
        return self.submit(work).result()

    def close(self) -> None:
        """No more calls; the thread ends once those made are done."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            if self._thread is not None:
                self._jobs.put(None)

    def _work(self) -> None:
        while (job := self._jobs.get()) is not None:
            work, future = job
            if not future.set_running_or_notify_cancel():
                continue  # its waiter gave up before it began
            try:
                result = work()
            except BaseException as error:  # the waiter gets it, as raised
                future.set_exception(error)
            else:
                future.set_result(result)
