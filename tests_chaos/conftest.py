"""The checker's fixtures (a PostgreSQL server of its own, which its schedules kill) and its
table, printed at the end of the run."""

from __future__ import annotations

import pytest
from harness import table
from test_chaos import REPORTS

from pgstore.conftest import own_server

__all__ = ["own_server"]


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    if REPORTS:
        terminalreporter.write_line("\n" + table(REPORTS))
