"""The shell's sandbox (issue "Trust: nothing leaked"): a command cannot see evertalk's process
and environment, nor its home; it writes only in the working directory; the network can be
denied; where bwrap cannot start, the shell says so once and runs as before (or refuses, as
configured). The tests with a real sandbox are skipped, with the reason, where bwrap cannot
start."""

from __future__ import annotations

import base64
import os
import subprocess
import uuid
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import anyio
import pytest

from evertalk.agent.policy import Policy
from evertalk.agent.tools import Toolbox, ToolContext, ToolOutcome
from evertalk.agent.tools.sandbox import BUSES, Sandbox, bwrap_argv, probe
from evertalk.config import REDACTED, ConfigError, ToolPolicies, load_config

pytestmark = pytest.mark.anyio

WHY_NOT = anyio.run(probe)
needs_bwrap = pytest.mark.skipif(WHY_NOT is not None, reason=f"bwrap cannot start: {WHY_NOT}")
MISSING = "/nonexistent/evertalk-test/bwrap"


@pytest.fixture
def home(tmp_path: Path, ctx: ToolContext) -> Path:
    folder = tmp_path / "evhome"
    (folder / "chat").mkdir(parents=True)
    (folder / "config.toml").write_text('api_key = "sk-ant-in-the-config-file"\n')
    ctx.home = folder
    return folder


async def shell(ctx: ToolContext, command: str, sandbox: Sandbox | None = None) -> ToolOutcome:
    """Run `command` with `ctx`, in `sandbox` for this call if one is given."""
    if sandbox is not None:
        ctx = replace(ctx, sandbox=sandbox)
    toolbox = Toolbox(Policy(ToolPolicies(shell="allow")), None)
    return await toolbox.run("shell", {"command": command}, ctx)


def output(outcome: ToolOutcome) -> list[str]:
    """The result's lines, without the last one, `[exit status N]`."""
    return outcome.text.splitlines()[:-1]


# -- the command line ---------------------------------------------------------------------------


def test_the_command_line() -> None:
    work, home = Path("/w/project"), Path("/h/.evertalk")
    argv = bwrap_argv(["bash", "-c", "ls"], workdir=work, hidden=[home], network=True)
    assert argv[0] == "bwrap"
    assert argv[-4:] == ["--", "bash", "-c", "ls"]
    for flags in (
        ["--unshare-pid"],
        ["--proc", "/proc"],
        ["--dev", "/dev"],
        ["--ro-bind", "/", "/"],
        ["--tmpfs", "/tmp"],
        ["--cap-drop", "ALL"],
        ["--new-session"],
        ["--die-with-parent"],
        ["--chdir", str(work)],
    ):
        assert any(argv[i : i + len(flags)] == flags for i in range(len(argv))), flags
    assert "--unshare-net" not in argv
    # mounts go in order: the root read-only first, the workdir writable over it, then the home
    # hidden over both (it may be inside the workdir)
    root, bind, hidden = argv.index("--ro-bind"), argv.index("--bind"), argv.index(str(home))
    assert argv[bind : bind + 3] == ["--bind", str(work), str(work)]
    assert root < bind < hidden and argv[hidden - 1] == "--tmpfs"
    denied = bwrap_argv(["true"], workdir=work, network=False, bwrap="/opt/bwrap")
    assert denied[0] == "/opt/bwrap" and "--unshare-net" in denied


def test_the_settings(tmp_path: Path) -> None:
    assert load_config(tmp_path, env={}).tools.shell_sandbox == "auto"
    assert load_config(tmp_path, env={}).tools.shell_network == "allow"
    (tmp_path / "config.toml").write_text(
        '[tools]\nshell_sandbox = "require"\nshell_network = "deny"\n'
    )
    tools = load_config(tmp_path, env={}).tools
    assert (tools.shell_sandbox, tools.shell_network) == ("require", "deny")
    assert Sandbox.configured(tools) == Sandbox(mode="require", network="deny")
    for line, words in (
        ('shell_sandbox = "on"', ("tools.shell_sandbox", "auto, require, off")),
        ('shell_network = "ask"', ("tools.shell_network", "allow, deny")),
    ):
        (tmp_path / "config.toml").write_text(f"[tools]\n{line}\n")
        with pytest.raises(ConfigError) as raised:
            load_config(tmp_path, env={})
        for word in words:
            assert word in str(raised.value)


# -- with bwrap ---------------------------------------------------------------------------------


@pytest.fixture
def keyed_process() -> Iterator[str]:
    """A process started with a key in its environment, as evertalk may be: its
    /proc/PID/environ holds the key for as long as it runs."""
    marker = f"sk-ant-marker-{uuid.uuid4().hex}"
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "ANTHROPIC_API_KEY": marker}
    process = subprocess.Popen(["sleep", "60"], env=env)
    try:
        yield marker
    finally:
        process.kill()
        process.wait()


FIND_KEY = "grep -l -a {} /proc/[0-9]*/environ 2>/dev/null | wc -l"


@needs_bwrap
async def test_no_process_outside_is_seen(ctx: ToolContext, keyed_process: str) -> None:
    me = os.getpid()
    look = f"test -e /proc/{me} && echo visible || echo hidden; " + FIND_KEY.format(keyed_process)
    assert output(await shell(ctx, look, Sandbox(mode="off"))) == ["visible", "1"]
    assert output(await shell(ctx, look, Sandbox())) == ["hidden", "0"]
    denied = await shell(ctx, f"cat /proc/{me}/environ")
    assert "No such file" in denied.text and denied.text.endswith("[exit status 1]")
    # its parent is the sandbox's own first process, not evertalk
    assert output(await shell(ctx, "echo $PPID; cat /proc/1/comm")) == ["1", "bwrap"]


@needs_bwrap
async def test_the_home_is_empty(ctx: ToolContext, home: Path) -> None:
    listed = await shell(ctx, f"ls -A {home}; cat {home}/config.toml")
    assert "sk-ant" not in listed.text
    assert output(listed) == [f"cat: {home}/config.toml: No such file or directory"]
    # the same through a link to it, and with the workdir around it
    (ctx.workdir / "h").symlink_to(home, target_is_directory=True)
    assert "sk-ant" not in (await shell(ctx, "cat h/config.toml")).text
    ctx.workdir = home.parent
    assert "sk-ant" not in (await shell(ctx, "cat evhome/config.toml")).text
    assert ctx.home is not None and (ctx.home / "config.toml").exists()


@needs_bwrap
async def test_the_buses_are_hidden(ctx: ToolContext) -> None:
    """No D-Bus socket: through one, `systemd-run --user` would start a process outside."""
    full = [bus for bus in BUSES if bus.is_dir() and any(bus.iterdir())]
    if not full:
        pytest.skip("no D-Bus folder here holds anything")
    count = "; ".join(f"find {bus} -mindepth 1 | wc -l" for bus in full)
    assert output(await shell(ctx, count, Sandbox(mode="off"))) != ["0"] * len(full)
    assert output(await shell(ctx, count)) == ["0"] * len(full)


@needs_bwrap
async def test_a_workdir_inside_the_home_is_refused(ctx: ToolContext, home: Path) -> None:
    ctx.workdir = home / "chat"
    outcome = await shell(ctx, "cat ../config.toml")
    assert outcome.is_error and "evertalk's home" in outcome.text and "sk-ant" not in outcome.text


@needs_bwrap
async def test_only_the_workdir_is_writable(ctx: ToolContext, tmp_path: Path) -> None:
    name = f"evertalk-sandbox-{uuid.uuid4().hex}"
    outside = Path("/var/tmp") / name
    written = await shell(
        ctx, f"echo in > inside.txt && echo ok; touch {outside}; touch /tmp/{name} && echo tmp"
    )
    assert (ctx.workdir / "inside.txt").read_text() == "in\n"
    assert output(written) == [
        "ok",
        f"touch: cannot touch '{outside}': Read-only file system",
        "tmp",
    ]
    assert not outside.exists()
    assert not (Path("/tmp") / name).exists()  # its /tmp is its own


@needs_bwrap
async def test_the_network_can_be_denied(ctx: ToolContext) -> None:
    show = "tail -n +3 /proc/net/dev | cut -d: -f1 | tr -d ' '"
    host = sorted(Path("/proc/net/dev").read_text().splitlines()[2:])
    denied = output(await shell(ctx, show, Sandbox(network="deny")))
    assert denied == ["lo"]
    allowed = output(await shell(ctx, show, Sandbox(network="allow")))
    assert len(allowed) == len(host)  # the host's interfaces, whatever they are


@needs_bwrap
async def test_background_processes_end_with_the_command(ctx: ToolContext) -> None:
    outcome = await shell(ctx, "sleep 30 & echo started")
    assert outcome.text == "started\n[exit status 0]"  # nothing left running to mention


@needs_bwrap
async def test_an_encoded_key_is_redacted_from_the_result(ctx: ToolContext) -> None:
    key = "sk-ant-api03-" + uuid.uuid4().hex + "Zz_-" + uuid.uuid4().hex
    (ctx.workdir / "key.txt").write_text(key)  # its environment has none: it reads a file
    ctx.secrets = [key]
    outcome = await shell(
        ctx,
        'K=$(cat key.txt); printf %s "$K" | base64; printf %s "xy$K" | base64 -w0; echo; '
        'printf %s "$K" | rev; echo; printf %s "$K" | xxd -p; printf %s "$K" | od -An -tx1 -v '
        "| tr -d ' \\n'; echo",
    )
    text = outcome.text.replace("\n", "")
    for leaked in (key, key[::-1], key.encode().hex(), base64.b64encode(key.encode()).decode()):
        assert leaked[4:-4] not in text
    assert outcome.text.count(REDACTED) == 5


# -- without bwrap ------------------------------------------------------------------------------


async def test_without_bwrap_it_says_so_once_and_runs(ctx: ToolContext) -> None:
    sandbox = Sandbox(bwrap=MISSING)
    first = await shell(ctx, "echo one", sandbox)
    second = await shell(ctx, "echo two", sandbox)
    note, *rest = first.text.splitlines()
    assert "without a sandbox" in note and "not installed" in note and MISSING in note
    # what stays out of reach, and what does not
    assert "cannot see evertalk's keys and passwords" in note and "tools.shell_env" in note
    assert "can read and change your files, evertalk's home among them" in note
    assert rest == ["one", "[exit status 0]"]
    assert second.text == "two\n[exit status 0]"
    assert not first.is_error


async def test_without_bwrap_require_refuses(ctx: ToolContext) -> None:
    for sandbox in (Sandbox(bwrap=MISSING, mode="require"), Sandbox(bwrap=MISSING, network="deny")):
        outcome = await shell(ctx, "touch ran", sandbox)
        assert outcome.is_error and "sandbox cannot start" in outcome.text
        assert "\n" not in outcome.text
    assert not (ctx.workdir / "ran").exists()


async def test_off_runs_as_before_but_not_with_the_network_denied(ctx: ToolContext) -> None:
    assert (await shell(ctx, "echo plain", Sandbox(mode="off"))).text == "plain\n[exit status 0]"
    refused = await shell(ctx, "touch ran", Sandbox(mode="off", network="deny"))
    assert refused.is_error and "shell_network" in refused.text
    assert not (ctx.workdir / "ran").exists()
