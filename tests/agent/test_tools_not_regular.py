"""The file tools touch regular files only (issue 34): a named pipe in the working folder is
refused at once, not opened until something writes to it, which blocked every client of the
service for as long; a socket likewise. A pipe swapped in between the check and the open is
refused too."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path
from typing import Any

import anyio
import pytest

from evertalk.agent.policy import Policy
from evertalk.agent.tools import Toolbox, ToolContext, ToolOutcome
from evertalk.agent.tools.checkpoints import Checkpoints
from evertalk.config import ToolPolicies

pytestmark = pytest.mark.anyio

PROMPTLY = 5.0  # seconds: a refusal takes milliseconds; a blocked open waits forever
CALLS = 400


def toolbox() -> Toolbox:
    return Toolbox(Policy(ToolPolicies(write="allow", edit="allow")), None)


class Watchdog:
    """Releases a call blocked in opening the pipe: when `progress` stalls for PROMPTLY seconds,
    it opens the pipe both ways, which lets an open for reading or for writing return. The
    event loop blocked in a system call cannot time itself out; this can, and counts it."""

    def __init__(self, fifo: Path) -> None:
        self.fifo = fifo
        self.progress = 0
        self.released = 0
        self.done = threading.Event()

    def watch(self) -> None:
        seen = -1
        while not self.done.wait(PROMPTLY):
            if self.progress == seen:
                self.released += 1
                os.close(os.open(self.fifo, os.O_RDWR | os.O_NONBLOCK))
            seen = self.progress


@contextmanager
def watched(fifo: Path) -> Iterator[Watchdog]:
    dog = Watchdog(fifo)
    thread = threading.Thread(target=dog.watch, daemon=True)
    thread.start()
    try:
        yield dog
    finally:
        dog.done.set()
        thread.join()


async def promptly(ctx: ToolContext, dog: Watchdog, name: str, args: dict[str, Any]) -> ToolOutcome:
    with anyio.fail_after(PROMPTLY):
        outcome = await toolbox().run(name, args, ctx)
    dog.progress += 1
    return outcome


def assert_refused(outcome: ToolOutcome, *words: str) -> None:
    assert outcome.is_error and "\n" not in outcome.text, outcome.text
    for word in words:
        assert word in outcome.text, outcome.text


CALLS_ON_PIPE: list[tuple[str, dict[str, Any]]] = [
    ("read", {"path": "pipe"}),
    ("edit", {"path": "pipe", "old": "a", "new": "b"}),
    ("write", {"path": "pipe", "content": "x"}),
]


@pytest.mark.parametrize("kept", [False, True], ids=["no checkpoint", "checkpoint"])
async def test_a_named_pipe_is_refused_at_once_and_stays(
    ctx: ToolContext, tmp_path: Path, kept: bool
) -> None:
    if kept:
        ctx = replace(ctx, checkpoint=Checkpoints(tmp_path / "checkpoints").turn(1))
    fifo = ctx.workdir / "pipe"
    os.mkfifo(fifo)
    with watched(fifo) as dog:
        for name, args in CALLS_ON_PIPE:
            outcome = await promptly(ctx, dog, name, args)
            assert_refused(outcome, "pipe", "named pipe", "not a regular file")
    assert dog.released == 0
    assert fifo.is_fifo()  # write did not put a file in its place


async def test_a_socket_is_refused(ctx: ToolContext) -> None:
    with socket.socket(socket.AF_UNIX) as listening:
        listening.bind(str(ctx.workdir / "sock"))
        for name, args in CALLS_ON_PIPE:
            outcome = await toolbox().run(name, {**args, "path": "sock"}, ctx)
            assert_refused(outcome, "sock", "a socket", "not a regular file")
        assert (ctx.workdir / "sock").is_socket()


SWAPPER = """
import os, sys
path, fifo, regular = sys.argv[1:4]
print("swapping", flush=True)
while True:
    for source in (fifo, regular):  # `path` is always one or the other, never missing
        try:
            os.link(source, path + ".new")
            os.rename(path + ".new", path)
        except FileExistsError:
            os.unlink(path + ".new")
"""


@pytest.fixture
def swapping(ctx: ToolContext) -> Iterator[Path]:
    """A process that, over and over, makes `target` the named pipe `pipe`, then the regular
    file `regular`; the pipe. Each swap is one rename: `target` never goes missing."""
    fifo, regular = ctx.workdir / "pipe", ctx.workdir / "regular"
    os.mkfifo(fifo)
    regular.write_text("a line\n")
    process = subprocess.Popen(
        [sys.executable, "-c", SWAPPER, str(ctx.workdir / "target"), str(fifo), str(regular)],
        stdout=subprocess.PIPE,
        text=True,
    )
    assert process.stdout is not None and process.stdout.readline() == "swapping\n"
    try:
        yield fifo
    finally:
        process.kill()
        process.wait()


async def test_a_pipe_swapped_in_after_the_check_is_refused_unread(
    ctx: ToolContext, swapping: Path
) -> None:
    outcomes: dict[str, int] = {}
    with watched(swapping) as dog:
        for number in range(CALLS):
            name, args = CALLS_ON_PIPE[number % 2]  # read and edit open the file
            outcome = await promptly(ctx, dog, name, {**args, "path": "target"})
            text = "refused" if "not a regular file" in outcome.text else outcome.text
            outcomes[text] = outcomes.get(text, 0) + 1
    assert dog.released == 0, outcomes
    assert outcomes.get("refused", 0) > 0, outcomes  # the pipe was met
