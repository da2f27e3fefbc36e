"""Fixtures and settings shared by every test folder."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import settings

from fakes import LoopbackServer, SwitchApp
from pg_server import PgServer, missing, start_server

# `make test` (and CI) run the property tests derandomized, on a fixed budget, with no example
# database: the same examples on every machine, so a run never fails by chance. `make explore`
# (HYPOTHESIS_PROFILE=explore) draws fresh examples, many more of them, to find new failures.
settings.register_profile("ci", derandomize=True, database=None, deadline=None, print_blob=True)
settings.register_profile("explore", deadline=None, print_blob=True, max_examples=2000)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))


@pytest.fixture
def anyio_backend() -> str:
    """The anyio tests run on asyncio, the loop the app itself uses."""
    return "asyncio"


@pytest.fixture(scope="session")
def loopback() -> Iterator[tuple[SwitchApp, str]]:
    """One uvicorn server on 127.0.0.1 for the session, serving the fake of the current test."""
    switch = SwitchApp()
    server = LoopbackServer(switch)
    url = server.start()
    yield switch, url
    server.stop()


@pytest.fixture(scope="session")
def pg_server() -> Iterator[PgServer]:
    """One throwaway PostgreSQL server for the session (see pg_server.py); the tests that need
    it skip, saying why, where PostgreSQL is not installed."""
    why = missing()
    if why is not None:
        pytest.skip(why)
    server = start_server()
    yield server
    server.stop()


# A `-p` run starts its home's service, which would outlive the test: each is stopped when its
# test ends, and any left over goes by itself after 30 idle seconds.
os.environ.setdefault("EVERTALK_SERVICE_IDLE", "30")


@pytest.fixture(autouse=True)
def _stop_services(tmp_path: Path) -> Iterator[None]:
    yield
    for found in tmp_path.rglob("service.sock"):
        stop_service(found.parent)


def stop_service(home: Path) -> None:
    """Stop the service of `home`, if one runs."""
    from evertalk.client.connection import stop_service as stop

    stop(home, "test")
