"""The `shell` tool: `bash -c command` in the working directory, with a timeout (SPEC §6.6).

The command runs in the session's sandbox (`sandbox.py`: it sees neither evertalk's process nor
its home, and writes only in the working directory), in a session (and process group) of its
own, with stdin from /dev/null, stdout and stderr merged into one pipe, and an environment built
from an allow-list (`tool_env.py`). On timeout, or when the turn is cancelled, the whole group is
killed. The result is the output, then `[exit status N]` (or `[timed out after N s]`), clipped by
SPEC §1.5 as it is read, so that a command that prints gigabytes costs no more memory than one
that prints a page. A status other than 0, a kill or a timeout marks the call failed (the log's
`echo` says so, and the app shows ✗).
"""

from __future__ import annotations

import codecs
import contextlib
import os
import signal
import subprocess
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import anyio
import anyio.abc

from evertalk.agent.tools.base import Args, RunState, ToolContext, ToolError, ToolOutcome
from evertalk.agent.tools.output import ClipBuffer
from evertalk.agent.tools.sandbox import SandboxRefused
from evertalk.agent.tools.tool_env import tool_environment
from evertalk.providers.base import Text

DEFAULT_TIMEOUT = 120
MAX_TIMEOUT = 600
LINGER = 0.5
"""Seconds to wait, once bash has exited, for processes it left in the background to close the
output pipe; after that their output is no longer collected (they keep running)."""


def parse_shell(tool_input: object) -> ShellCall:
    args = Args("shell", tool_input, ("command", "timeout"))
    command = args.string("command", nonempty=True)
    if "\0" in command:
        raise ToolError("`command` must not contain a NUL character")
    timeout = args.optional_integer("timeout", DEFAULT_TIMEOUT)
    if not 1 <= timeout <= MAX_TIMEOUT:
        raise ToolError(f"`timeout` must be 1 to {MAX_TIMEOUT} seconds, not {timeout}")
    return ShellCall(command, timeout)


@dataclass(frozen=True)
class ShellCall:
    command: str
    timeout: int = DEFAULT_TIMEOUT

    async def run(self, ctx: ToolContext, limit: int, state: RunState) -> ToolOutcome:
        if not ctx.workdir.is_dir():
            raise ToolError(f"the working directory {ctx.workdir} does not exist")
        hidden = [] if ctx.home is None else [ctx.home]
        try:
            wrapped = await ctx.sandbox.wrap(["bash", "-c", self.command], ctx.workdir, hidden)
        except SandboxRefused as refused:
            raise ToolError(str(refused)) from None
        buffer = ClipBuffer(limit)
        if wrapped.note is not None:
            buffer.feed(wrapped.note + "\n")
        status, lingering = await run_command(
            wrapped.argv, self.timeout, ctx, buffer, tool_environment(ctx.sandbox.passed)
        )
        if buffer.total and not buffer.ends_with_newline():
            buffer.feed("\n")
        if lingering:
            buffer.feed("[processes left in the background still run; their output is not shown]\n")
        if status is None:
            buffer.feed(f"[timed out after {self.timeout} s]")
        elif status < 0:
            buffer.feed(f"[killed by signal {-status}]")
        else:
            buffer.feed(f"[exit status {status}]")
        # a timeout is an error the model is told of; a status other than 0 it reads itself
        return ToolOutcome([Text(buffer.text())], is_error=status is None, failed=status != 0)


async def run_command(
    argv: Sequence[str],
    timeout: float,
    ctx: ToolContext,
    buffer: ClipBuffer,
    env: Mapping[str, str],
) -> tuple[int | None, bool]:
    """Run `argv`, feeding its output to `buffer`; (exit status or None on timeout, whether
    background processes still held the output when it exited)."""
    decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
    # Shielded: a cancel that came while the command started would leave it running with no
    # handle to kill it by (a loaded machine showed it); the cancel is taken at the next await.
    with anyio.CancelScope(shield=True):
        process = await anyio.open_process(
            list(argv),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            cwd=ctx.workdir,
            env=env,
            start_new_session=True,
        )
    finished = anyio.Event()
    lingering = False

    async def pump(stream: anyio.abc.ByteReceiveStream) -> None:
        try:
            async for chunk in stream:
                buffer.feed(decoder.decode(chunk))
        except (anyio.ClosedResourceError, anyio.BrokenResourceError):
            pass
        buffer.feed(decoder.decode(b"", final=True))
        finished.set()

    timed_out = False
    try:
        assert process.stdout is not None
        async with anyio.create_task_group() as group:
            group.start_soon(pump, process.stdout)
            with anyio.move_on_after(timeout):
                await process.wait()
            if process.returncode is None:
                timed_out = True
                kill_group(process.pid)
            with anyio.move_on_after(LINGER):
                await finished.wait()
            lingering = not finished.is_set()
            group.cancel_scope.cancel()
        await process.wait()
        return (None if timed_out else process.returncode), lingering and not timed_out
    finally:
        with anyio.CancelScope(shield=True):
            if process.returncode is None:  # cancelled: the turn stopped while it ran
                kill_group(process.pid)
            await process.aclose()


def kill_group(pid: int) -> None:
    """SIGKILL the process group that `pid` leads (the command's session)."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, signal.SIGKILL)
