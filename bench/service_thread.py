"""A home's service run in a thread of the benchmark's own process, for the benchmarks that
count what the service does (its fsyncs) while `-p` clients talk to it over its socket."""

from __future__ import annotations

import contextlib
import io
from collections.abc import Iterator
from functools import partial
from pathlib import Path

from anyio.from_thread import start_blocking_portal

from evertalk.service.server import Service, open_agent, serve

IDLE_SECONDS = 3600.0
"""Long enough that the service never leaves for idleness during a benchmark."""


@contextlib.contextmanager
def service_in_thread(home: Path) -> Iterator[Service]:
    """The service of `home`, listening while the block runs; on the way out it is stopped
    and waited for, its compaction calls in flight landed. Its log lines, which a started
    service writes to its log file, are dropped: the benchmark's output stays its figures."""
    with contextlib.redirect_stderr(io.StringIO()), start_blocking_portal() as portal:
        run = partial(serve, home, IDLE_SECONDS, open_agent, signals=False)
        ended, service = portal.start_task(run)
        try:
            yield service
        finally:
            portal.call(partial(service.stop, "the benchmark is over", on_purpose=True))
            ended.result()
