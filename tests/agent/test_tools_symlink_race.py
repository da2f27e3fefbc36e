"""`write` and `edit` never land outside the working directory, even when another process swaps
a folder of the path for a link to outside between the check and the write (issue 23: 1 write
in 150 did, and left its temporary file there)."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from evertalk.agent.policy import Policy
from evertalk.agent.tools import Toolbox, ToolContext
from evertalk.config import ToolPolicies

pytestmark = pytest.mark.anyio

WRITES = 1000

SWAPPER = """
import os, sys, time
sub, parked, outside = sys.argv[1:4]
print("swapping", flush=True)
turn = 0
while True:
    turn += 1
    aside = f"{parked}-{turn}"  # a write may make `sub` anew meanwhile: each turn parks its own
    for step in (
        lambda: os.rename(sub, aside),
        lambda: os.symlink(outside, sub),
        lambda: os.unlink(sub),
        lambda: os.rename(aside, sub),
    ):
        try:
            step()
        except OSError:
            pass
    time.sleep(0.001)  # `sub` in its place for a moment: some writes get through
"""


@pytest.fixture
def swapping(ctx: ToolContext, outside: Path) -> Iterator[subprocess.Popen[str]]:
    """A process that, over and over, parks `sub` aside, puts a link to outside in its place,
    and puts it back."""
    sub = ctx.workdir / "sub"
    sub.mkdir()
    (sub / "edited.txt").write_text("count: 0\n")
    process = subprocess.Popen(
        [sys.executable, "-c", SWAPPER, str(sub), str(ctx.workdir / "parked"), str(outside)],
        stdout=subprocess.PIPE,
        text=True,
    )
    assert process.stdout is not None and process.stdout.readline() == "swapping\n"
    try:
        yield process
    finally:
        process.kill()
        process.wait()


def everything_in(folder: Path) -> list[str]:
    return sorted(str(path.relative_to(folder)) for path in folder.rglob("*"))


async def test_a_folder_swapped_for_a_link_never_takes_a_write_outside(
    ctx: ToolContext, outside: Path, swapping: subprocess.Popen[str]
) -> None:
    toolbox = Toolbox(Policy(ToolPolicies(write="allow", edit="allow")), None)
    written = refused = 0
    for number in range(WRITES):
        if number % 4 == 3:
            outcome = await toolbox.run(
                "edit", {"path": "sub/edited.txt", "old": "count: ", "new": "count: 1"}, ctx
            )
        else:
            outcome = await toolbox.run(
                "write", {"path": f"sub/deeper/w{number}.txt", "content": "x\n"}, ctx
            )
        if outcome.is_error:
            refused += 1
            assert "\n" not in outcome.text, outcome.text
        else:
            written += 1
    swapping.kill()
    swapping.wait()
    assert everything_in(outside) == ["victim.txt"]  # no file, no folder, no temporary file
    assert (outside / "victim.txt").read_text() == "precious\n"
    leftovers = [name for name in everything_in(ctx.workdir) if name.endswith(".tmp")]
    assert leftovers == []  # a write that gave up took its temporary file with it
    assert written > 0, "the race left no write through: the test proves nothing"
    assert refused > 0, "no write met the link: the swapping did not happen"
