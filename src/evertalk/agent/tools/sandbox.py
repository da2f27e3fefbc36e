"""The shell tool's sandbox: every command runs inside bubblewrap (`bwrap`), where it sees

- the file system read-only (`--ro-bind / /`), except the working directory (`--bind`) and a
  private, empty `/tmp`;
- evertalk's home as an empty folder (`--tmpfs`): not config.toml, which may hold the key, not
  the chat; and the same for the D-Bus folders (`/run/user`, `/run/dbus`), whose buses would
  let a command start a process outside the sandbox (`systemd-run --user`);
- its own processes only (`--unshare-pid` with a fresh `/proc`): evertalk, and the environment it
  was started with (`/proc/PID/environ` holds the key variables), do not exist there. The
  namespace ends with the command: processes it leaves in the background end with it;
- no capabilities (`--cap-drop ALL`): run as root, a command could otherwise unmount the folder
  that hides the home, or remount `/` writable;
- a session of its own (`--new-session`), so no controlling terminal it could push keystrokes
  into (TIOCSTI), and it dies with evertalk (`--die-with-parent`);
- the network, or none but loopback (`--unshare-net`) when `tools.shell_network = "deny"`.

Where bwrap cannot start (not installed, macOS, a container that forbids namespaces), setting
`tools.shell_sandbox` decides: `auto` (the default) runs commands as before and says so once,
in the first result; `require` refuses to run them; `off` never uses bwrap. A network `deny`
cannot be kept without the sandbox, so it refuses too rather than run with the network.

`bwrap_argv` builds the command line (pure, for tests); `probe` tries bwrap once per process.
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Final

import anyio

from evertalk import secret_env
from evertalk.config import NetworkRule, SandboxMode, ToolPolicies

BWRAP: Final = "bwrap"
BUSES: Final = (Path("/run/user"), Path("/run/dbus"))
"""Hidden with the home: the session and system buses, ways out of the sandbox."""
PROBE_TIMEOUT: Final = 10.0
"""Seconds the probe may take: bwrap starts in milliseconds, but a machine may be busy."""


class SandboxRefused(Exception):
    """The command must not run: the sandbox is required (or the network denied) and cannot
    start, or the working directory is inside a folder the sandbox hides. One line."""


def bwrap_argv(
    command: Sequence[str],
    *,
    workdir: Path,
    hidden: Sequence[Path] = (),
    network: bool = True,
    bwrap: str = BWRAP,
) -> list[str]:
    """The command line that runs `command` in the sandbox, in `workdir` (writable), with each
    folder of `hidden` replaced by an empty one. The paths should be resolved (no links), and
    `workdir` must not be inside a hidden folder: mounts go in order, so it would be hidden too."""
    argv = [bwrap, *isolation(network), "--bind", str(workdir), str(workdir)]
    for folder in hidden:
        argv += ["--tmpfs", str(folder)]  # after the workdir: a home inside it is hidden too
    return [*argv, "--chdir", str(workdir), "--", *command]


def isolation(network: bool) -> list[str]:
    """Everything but the folders of one run; the probe starts bwrap with just these."""
    flags = [
        "--die-with-parent",
        "--new-session",
        "--unshare-pid",
        "--unshare-ipc",
        "--cap-drop",
        "ALL",
        "--ro-bind",
        "/",
        "/",
        "--dev",
        "/dev",
        "--proc",
        "/proc",
        "--tmpfs",
        "/tmp",
    ]
    if not network:
        flags.append("--unshare-net")
    return flags


_probed: dict[tuple[str, bool], str | None] = {}


async def probe(bwrap: str = BWRAP, network: bool = True) -> str | None:
    """None when `bwrap` can start a sandbox here, else why not (one line). Tried once per
    process for each binary and network setting: the answer does not change while we run."""
    key = (bwrap, network)
    if key not in _probed:
        _probed[key] = await _try_bwrap(bwrap, network)
    return _probed[key]


async def _try_bwrap(bwrap: str, network: bool) -> str | None:
    argv = [bwrap, *isolation(network), "--", "true"]
    try:
        with anyio.move_on_after(PROBE_TIMEOUT):
            done = await anyio.run_process(argv, stdin=subprocess.DEVNULL, check=False)
            if done.returncode == 0:
                return None
            said = done.stderr.decode("utf-8", "replace").strip().splitlines()
            return said[0] if said else f"{bwrap} failed with exit status {done.returncode}"
        return f"{bwrap} did not start within {PROBE_TIMEOUT:g} s"
    except FileNotFoundError:
        return f"{bwrap} is not installed"
    except OSError as error:
        return f"{bwrap} cannot run: {error.strerror or error}"


@dataclass(frozen=True)
class Wrapped:
    """What to run, and a note to put first in the result (once per session), or None."""

    argv: list[str]
    note: str | None = None


@dataclass
class Sandbox:
    """The sandbox settings of one session, and whether it already said it has none."""

    mode: SandboxMode = "auto"
    network: NetworkRule = "allow"
    bwrap: str = BWRAP  # the binary: tests point it at one that does not exist
    fetch_private: bool = False  # `fetch` may reach private addresses (tools.fetch_private)
    passed: tuple[str, ...] = ()  # variables commands see beyond the allow-list (tools.shell_env)
    _told: bool = field(default=False, init=False, repr=False)

    @classmethod
    def configured(cls, tools: ToolPolicies) -> Sandbox:
        return cls(
            mode=tools.shell_sandbox,
            network=tools.shell_network,
            fetch_private=tools.fetch_private,
            passed=tools.shell_env,
        )

    async def wrap(
        self, command: Sequence[str], workdir: Path, hidden: Sequence[Path] = ()
    ) -> Wrapped:
        """How to run `command` in `workdir`: in the sandbox with `hidden` (evertalk's home)
        and the buses hidden, or, where it cannot be and the settings allow, as it is (with a
        note the first time)."""
        if self.mode == "off":
            if self.network == "deny":
                raise SandboxRefused(
                    'tools.shell_network is "deny", which only the sandbox can keep, and '
                    'tools.shell_sandbox is "off" in config.toml'
                )
            return Wrapped(list(command))
        why = await probe(self.bwrap, self.network == "allow")
        if why is not None:
            return self._unsandboxed(command, why)
        return Wrapped(self._sandboxed(command, workdir, hidden))

    def _sandboxed(
        self, command: Sequence[str], workdir: Path, hidden: Sequence[Path]
    ) -> list[str]:
        real_workdir = Path(os.path.realpath(workdir))
        folders = _existing(hidden)
        for folder in folders:  # (the buses' folders, hidden too, hold no one's work)
            if real_workdir.is_relative_to(folder):
                raise SandboxRefused(
                    f"the working directory {workdir} is inside evertalk's home ({folder}), "
                    "which commands may not see: start evertalk in another folder"
                )
        return bwrap_argv(
            command,
            workdir=real_workdir,
            hidden=[*folders, *_existing(BUSES)],
            network=self.network == "allow",
            bwrap=self.bwrap,
        )

    def _unsandboxed(self, command: Sequence[str], why: str) -> Wrapped:
        if self.mode == "require":
            raise SandboxRefused(
                f'the sandbox cannot start here ({why}), and tools.shell_sandbox is "require" '
                "in config.toml"
            )
        if self.network == "deny":
            raise SandboxRefused(
                f"the sandbox cannot start here ({why}), and only the sandbox can keep "
                'tools.shell_network = "deny"'
            )
        if self._told:
            return Wrapped(list(command))
        self._told = True
        return Wrapped(list(command), unsandboxed_note(why))


def unsandboxed_note(why: str) -> str:
    """What a command without the sandbox can and cannot reach, said in its first result."""
    processes = (
        "evertalk's processes are closed to other programs"
        if secret_env.closed()
        else "this system cannot close evertalk's processes to other programs of yours"
    )
    return (
        f"[evertalk: commands run without a sandbox here ({why}). They cannot see evertalk's "
        "keys and passwords, nor any variable that looks like a credential (tools.shell_env "
        f"names those you let through), and {processes}. They run as you: they can read and "
        "change your files, evertalk's home among them; said once per session]"
    )


def _existing(folders: Sequence[Path]) -> list[Path]:
    """The folders, links resolved, that exist: a folder that is not there hides nothing, and
    bwrap could not make a mount point for it under the read-only root."""
    found: list[Path] = []
    for folder in folders:
        real = Path(os.path.realpath(folder))
        if real.is_dir():
            found.append(real)
    return found
