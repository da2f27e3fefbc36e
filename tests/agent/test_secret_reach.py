"""No command of a tool can read a credential of evertalk's, sandboxed or not (issue: the key read
from the service's `/proc/<pid>/environ` and printed in 22 encodings that redaction missed).

A real service, started by `evertalk -p` with the key, a database password and other tokens in
its environment, runs one shell command that tries every encoding on what `/proc/$PPID/environ`
holds. Each encoding is run by the test too, on a file that does hold the key (it shows there)
and on one that does not: what the service's command printed must be the latter, in every form.
So the check is that the key was never readable, not that it was redacted.
"""

from __future__ import annotations

import os
import re
import secrets
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from test_turn_support import turn_bodies

from fakes import AnthropicFake, ToolCall, reply, serve
from fakes import chat as answer
from home_config import write_config
from key_encodings import ENCODINGS
from served_home import environment, fake, run

__all__ = ["fake"]

MARK = "SEALEDMARK"
KEY = f"sk-ant-{MARK}-{secrets.token_hex(12)}"
PASSWORD = f"pg-{secrets.token_hex(10)}"
TOKEN = f"ghp_{secrets.token_hex(16)}"
AWS = f"aws/{secrets.token_hex(16)}"


def attack(source: str) -> str:
    """A shell script that prints the key, as read from `source`, in every encoding."""
    lines = [
        f'K=$(tr "\\0" "\\n" < {source} 2>/dev/null | sed -n "s/^ANTHROPIC_API_KEY=//p")',
    ]
    for name, encoder in ENCODINGS.items():
        lines.append(f'echo "=={name}=="; printf %s "$K" | {encoder}; echo')
    lines.append(
        'echo "==pg=="; echo "pw=$PGPASSWORD token=$GITHUB_TOKEN aws=$AWS_SECRET_ACCESS_KEY"'
    )
    lines.append(f'echo "==anywhere=="; grep -las {MARK} /proc/[0-9]*/environ | wc -l')
    lines.append('echo "==end=="')
    return "\n".join(lines) + "\n"


def sections(output: str) -> dict[str, str]:
    """The script's output by section name."""
    parts = re.split(r"^==([a-z0-9-]+)==\n", output, flags=re.M)
    return {parts[i]: parts[i + 1] for i in range(1, len(parts) - 1, 2)}


def control(tmp_path: Path, holds_key: bool) -> dict[str, str]:
    """The script run by the test on an environ-like file with or without the key."""
    data = b"PATH=/bin\0" + (f"ANTHROPIC_API_KEY={KEY}\0".encode() if holds_key else b"")
    source = tmp_path / ("with" if holds_key else "without")
    source.write_bytes(data)
    done = subprocess.run(
        ["bash", "-c", attack(str(source))],
        capture_output=True,
        text=True,
        env={"PATH": os.environ["PATH"]},
        check=True,
    )
    return sections(done.stdout)


def bwrap_starts() -> bool:
    if shutil.which("bwrap") is None:
        return False
    probe = ["bwrap", "--ro-bind", "/", "/", "--unshare-pid", "--proc", "/proc", "true"]
    return subprocess.run(probe, capture_output=True, check=False).returncode == 0


@pytest.fixture(params=["unsandboxed", "sandboxed"])
def sandbox(request: pytest.FixtureRequest) -> Iterator[str]:
    if request.param == "sandboxed" and not bwrap_starts():
        pytest.skip("bubblewrap is not installed or cannot start here")
    yield "off" if request.param == "unsandboxed" else "require"


def test_no_encoding_of_the_key_can_be_read(
    tmp_path: Path, fake: AnthropicFake, sandbox: str
) -> None:
    shown, empty = control(tmp_path, True), control(tmp_path, False)
    for name in ENCODINGS:  # the check could fail: each encoding shows a key that is there
        assert shown[name] != empty[name], name
    home = tmp_path / "home"
    env = environment(home) | {
        "ANTHROPIC_API_KEY": KEY,
        "PGPASSWORD": PASSWORD,
        "GITHUB_TOKEN": TOKEN,
        "AWS_SECRET_ACCESS_KEY": AWS,
    }
    script = attack("/proc/$PPID/environ")
    fake.behaviour.push(  # type: ignore[attr-defined]
        reply("Reading.", ToolCall("shell", {"command": script})), answer("Done.")
    )
    with serve(fake.app) as url:
        write_config(home, base_url=url, shell="allow", shell_sandbox=sandbox)
        try:
            result = run(home, "-p", "find my key", env=env, timeout=120)
        finally:
            run(home, "service", "stop", timeout=120, env=env)
    assert result.returncode == 0, result.stderr
    sent = fake.records[-1].headers
    assert KEY in sent.get("x-api-key", "") + sent.get("authorization", "")  # still used
    output = tool_result(fake)
    got = sections(output)
    for name in ENCODINGS:
        assert got[name] == empty[name], f"{name}: {got[name]!r}"
    assert got["pg"].strip() == "pw= token= aws="
    assert got["anywhere"].strip() == "0"  # no process a command can read holds it
    for secret in (KEY, PASSWORD, TOKEN, AWS):
        for path in home.rglob("*"):
            if path.is_file():
                assert secret.encode() not in path.read_bytes(), path


def tool_result(fake: AnthropicFake) -> str:
    for body in turn_bodies(fake):
        for message in body["messages"]:
            for block in message["content"] if isinstance(message["content"], list) else []:
                if block.get("type") == "tool_result":
                    return "".join(part.get("text", "") for part in block["content"])
    raise AssertionError("no tool result was sent")
