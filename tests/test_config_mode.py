"""A config.toml that holds `api_key` is for its owner alone: one that other users may read (or
write) is made private when it is loaded, and the user is told once, in one line that never
holds the key."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from evertalk.config import config_path, load_config
from fakes import AnthropicFake, Call, Script, serve, summarizer
from fakes import chat as answer

API_KEY = "sk-ant-test-MODE-0123456789"
CLEAN = ("EVERTALK_", "ANTHROPIC_", "OPENAI_", "OPENROUTER_")


def config_of_mode(home: Path, mode: int, *lines: str, key: bool = True) -> Path:
    home.mkdir(parents=True, exist_ok=True)
    path = config_path(home)
    head = ['provider = "anthropic"', 'model = "claude-sonnet-5-5"']
    path.write_text("\n".join([*head, *([f'api_key = "{API_KEY}"'] if key else []), *lines]))
    path.chmod(mode)
    return path


def mode_of(path: Path) -> int:
    return path.stat().st_mode & 0o777


@pytest.mark.parametrize(
    ("before", "after"),
    [
        (0o644, 0o600),
        (0o640, 0o600),
        (0o666, 0o600),
        (0o604, 0o600),
        (0o620, 0o600),
        (0o755, 0o700),
    ],
    ids=oct,
)
def test_a_key_others_may_read_is_made_private_once(
    tmp_path: Path, before: int, after: int
) -> None:
    path = config_of_mode(tmp_path, before)
    said: list[str] = []
    assert load_config(tmp_path, {}, warn=said.append).api_key is not None
    assert mode_of(path) == after
    (line,) = said
    assert str(path) in line and f"{before:04o}" in line and f"{after:04o}" in line
    assert API_KEY not in line and "\n" not in line
    load_config(tmp_path, {}, warn=said.append)  # private now: nothing more to say
    assert said == [line]


@pytest.mark.parametrize("mode", [0o600, 0o400], ids=oct)
def test_a_private_file_is_left_alone(tmp_path: Path, mode: int) -> None:
    path = config_of_mode(tmp_path, mode)
    said: list[str] = []
    load_config(tmp_path, {}, warn=said.append)
    assert said == [] and mode_of(path) == mode


def test_a_file_without_a_key_keeps_its_mode(tmp_path: Path) -> None:
    # nothing secret in it: the user's choice of mode stands (evertalk's own saves are 0600)
    path = config_of_mode(tmp_path, 0o644, key=False)
    said: list[str] = []
    load_config(tmp_path, {}, warn=said.append)
    assert said == [] and mode_of(path) == 0o644


# --- through the command line ---------------------------------------------------------------


def is_compaction(call: Call) -> bool:
    return call.body.get("tool_choice") in ({"type": "none"}, "none")


@pytest.fixture
def served() -> Iterator[str]:
    turns = Script().route(is_compaction, summarizer(100))
    fake = AnthropicFake(turns.push(answer("Hi."), answer("Hi again.")))
    with serve(fake.app) as url:
        yield url


def evertalk_p(home: Path, message: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(CLEAN)}
    env["EVERTALK_HOME"] = str(home)
    return subprocess.run(
        [sys.executable, "-m", "evertalk", "-p", message],
        capture_output=True,
        text=True,
        env=env,
        cwd=home.parent,  # the tools' folder: outside evertalk's home
        timeout=60,
    )


def test_evertalk_p_warns_once_on_stderr_and_tightens_the_file(tmp_path: Path, served: str) -> None:
    home = tmp_path / "home"
    path = config_of_mode(home, 0o644, f'base_url = "{served}"')
    first = evertalk_p(home, "hello")
    assert first.returncode == 0, first.stderr
    assert first.stdout == "Hi.\n"
    (line,) = first.stderr.splitlines()
    assert line.startswith("evertalk: warning: ") and str(path) in line and "0644" in line
    assert API_KEY not in first.stderr
    assert mode_of(path) == 0o600
    second = evertalk_p(home, "hello again")
    assert second.returncode == 0 and second.stdout == "Hi again.\n"
    assert second.stderr == ""


@pytest.mark.parametrize(
    ("lines", "what"),
    [
        (['[store]', 'url = "postgresql://ever:Pg-SECRET-pass@db.example/chat"'], "a password"),
        (['[mcp.servers.gh]', 'command = "gh-mcp"', 'env = { GITHUB_TOKEN = "ghp_x1234567" }'],
         "a password"),
    ],
    ids=["database password", "mcp server's token"],
)  # fmt: skip
def test_a_password_others_may_read_is_made_private_too(
    tmp_path: Path, lines: list[str], what: str
) -> None:
    path = config_of_mode(tmp_path, 0o644, *lines, key=False)
    said: list[str] = []
    load_config(tmp_path, {}, warn=said.append)
    assert mode_of(path) == 0o600
    (line,) = said
    assert str(path) in line and "0644" in line and "0600" in line
    assert "SECRET" not in line and "ghp_" not in line


def test_a_url_without_a_password_leaves_the_mode_alone(tmp_path: Path) -> None:
    path = config_of_mode(
        tmp_path, 0o644, "[store]", 'url = "postgresql://ever@db/chat"', key=False
    )
    said: list[str] = []
    load_config(tmp_path, {}, warn=said.append)
    assert mode_of(path) == 0o644 and said == []
