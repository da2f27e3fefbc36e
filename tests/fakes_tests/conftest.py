"""Fixtures: the anyio backend, and `expose`, which serves a fake in-process or over loopback."""

from __future__ import annotations

from collections.abc import Callable, Iterator

import pytest
from starlette.types import ASGIApp

Expose = Callable[[ASGIApp], ASGIApp | str]


@pytest.fixture(params=["in-process", "loopback"])
def expose(request: pytest.FixtureRequest) -> Iterator[Expose]:
    """Turns a fake into a target for `anthropic_async` / `openai_async`: the app itself
    (in-process transport) or the URL of the loopback server, now serving it."""
    if request.param == "in-process":
        yield lambda app: app
        return
    switch, url = request.getfixturevalue("loopback")

    def target(app: ASGIApp) -> str:
        switch.current = app
        return url

    yield target
    switch.current = None
