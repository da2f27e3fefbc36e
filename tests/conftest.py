"""Fixtures shared by every test folder."""

from __future__ import annotations

import pytest


@pytest.fixture
def anyio_backend() -> str:
    """The anyio tests run on asyncio, the loop the app itself uses."""
    return "asyncio"
