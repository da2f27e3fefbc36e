"""The web tool's settings in config.toml: `tools.fetch` and `tools.fetch_private` (issue 25 §2)."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from evertalk.agent.tools.sandbox import Sandbox
from evertalk.config import load_config, save_config
from test_config import error_of, write


def test_fetch_asks_and_stays_public_by_default(tmp_path: Path) -> None:
    tools = load_config(tmp_path, {}).tools
    assert tools.fetch == "ask" and tools.fetch_private is False
    assert Sandbox.configured(tools).fetch_private is False


def test_the_file_sets_them(tmp_path: Path) -> None:
    write(tmp_path, '[tools]\nfetch = "allow"\nfetch_private = true\n')
    tools = load_config(tmp_path, {}).tools
    assert tools.fetch == "allow" and tools.fetch_private is True
    assert Sandbox.configured(tools).fetch_private is True


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ('[tools]\nfetch = "yes"', "`tools.fetch` must be allow, ask or deny, not 'yes'"),
        ('[tools]\nfetch_private = "allow"', "`tools.fetch_private` must be true or false"),
        ("[tools]\nfetch_private = 1", "`tools.fetch_private` must be true or false"),
    ],
)
def test_bad_values_are_one_line(tmp_path: Path, text: str, expected: str) -> None:
    path = write(tmp_path, text + "\n")
    assert error_of(tmp_path).startswith(f"{path}: {expected}")


def test_saving_keeps_them(tmp_path: Path) -> None:
    write(tmp_path, "[tools]\nfetch_private = true\n")
    config = load_config(tmp_path, {})
    save_config(tmp_path, replace(config, model="claude-other"))
    text = (tmp_path / "config.toml").read_text()
    assert "fetch_private = true" in text and 'fetch = "ask"' not in text
    assert load_config(tmp_path, {}).tools.fetch_private is True
