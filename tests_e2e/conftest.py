"""Fixtures of the end-to-end tests: the server the runner started, and the figures the tests
record, printed at the end of the run and saved to tests_e2e/out/figures.json.

These tests need a real llama-cpp-python server: run them with `make e2e-local`, which starts
one and sets E2E_BASE_URL. Without it they are skipped.
"""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from e2e_support import Server, evertalk_command

FIGURES: dict[str, Any] = {}
OUT = Path(__file__).resolve().parent / "out"


@pytest.fixture(scope="session")
def server() -> Server:
    base_url = os.environ.get("E2E_BASE_URL")
    if not base_url:
        pytest.skip("no local server: run `make e2e-local` (it starts one and sets E2E_BASE_URL)")
    log = os.environ.get("E2E_SERVER_LOG")
    return Server(
        base_url=base_url,
        model=os.environ.get("E2E_MODEL", "SmolLM2-135M-Instruct"),
        log=Path(log) if log else None,
    )


@pytest.fixture(scope="session")
def figures() -> dict[str, Any]:
    """Where a test puts what it measured, under its own key."""
    return FIGURES


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    if not FIGURES:
        return
    OUT.mkdir(exist_ok=True)
    report = {"server_options": os.environ.get("E2E_SERVER_OPTIONS"), **FIGURES}
    (OUT / "figures.json").write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")


def pytest_terminal_summary(terminalreporter: Any, exitstatus: int, config: pytest.Config) -> None:
    if not FIGURES:
        return
    terminalreporter.section("e2e figures (also in tests_e2e/out/figures.json)")
    for name, values in FIGURES.items():
        terminalreporter.write_line(f"{name}: {json.dumps(values)}")


@pytest.fixture(autouse=True)
def _stop_services(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """A `-p` run starts its home's service, which goes on summarizing after it: each is
    stopped when its test ends, so that it does not call the one server during the next test
    (the next `-p` on that home starts it again)."""
    yield
    for socket in tmp_path_factory.getbasetemp().rglob("service.sock"):
        env = {**os.environ, "EVERTALK_HOME": str(socket.parent)}
        subprocess.run(
            [evertalk_command(), "service", "stop"], env=env, capture_output=True, timeout=900
        )
