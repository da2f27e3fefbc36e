"""Shared pieces of the tests that run evertalk as a user does (no tests of its own).

A home whose config points at a fake served on loopback, and `python -m evertalk` run against
it as a subprocess, in the working folder beside the home, with none of the caller's evertalk or
provider variables. The fixtures `fake` and `home` are the usual pair: a test module imports
them by name.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from agent.test_turn_support import script, workdir_beside, write_config
from fakes import AnthropicFake, serve

CLEAN = ("EVERTALK_", "ANTHROPIC_", "OPENAI_", "OPENROUTER_")


def environment(home: Path) -> dict[str, str]:
    """The environment of a user of `home`: the test's own, less what would point elsewhere."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(CLEAN)}
    env["EVERTALK_HOME"] = str(home)
    return env


def evertalk(*args: str) -> list[str]:
    """The command line of `evertalk ARGS` on this interpreter."""
    return [sys.executable, "-m", "evertalk", *args]


def run(
    home: Path,
    *args: str,
    stdin: str | None = None,
    timeout: float = 60,
    env: dict[str, str] | None = None,
) -> subprocess.CompletedProcess[str]:
    """`evertalk ARGS` for `home`, to its end; `stdin` is what it reads (nothing by default)."""
    feed: dict[str, Any] = {"stdin": subprocess.DEVNULL} if stdin is None else {"input": stdin}
    return subprocess.run(
        evertalk(*args),
        **feed,
        capture_output=True,
        text=True,
        env=env if env is not None else environment(home),
        cwd=workdir_beside(home),
        timeout=timeout,
    )


def start(home: Path, *args: str) -> subprocess.Popen[str]:
    """`evertalk ARGS` for `home` started, reading nothing, its output piped as text."""
    return subprocess.Popen(
        evertalk(*args),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=environment(home),
        cwd=workdir_beside(home),
    )


@contextmanager
def served_home(
    tmp_path: Path, fake: AnthropicFake, *, settle: float = 20, stop: bool = False
) -> Iterator[Path]:
    """A home in `tmp_path` whose config points at `fake`, served while the block runs; with
    `stop`, the home's service is stopped before the fake goes."""
    home = tmp_path / "home"
    with serve(fake.app) as url:
        write_config(home, settle=settle, base_url=url)
        try:
            yield home
        finally:
            if stop:
                run(home, "service", "stop", timeout=120)


@pytest.fixture
def fake() -> AnthropicFake:
    """The Anthropic fake: compactions answered, turns scripted by the test with `push`."""
    return AnthropicFake(script())


@pytest.fixture
def home(tmp_path: Path, fake: AnthropicFake) -> Iterator[Path]:
    """A home whose config points at `fake`, served while the test runs."""
    with served_home(tmp_path, fake) as home:
        yield home
