"""The shared pieces made from the home folder: the prompt cache keys (SPEC §7)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from evertalk.config import Config
from evertalk.runtime import Runtime, cache_key

ROLES = ("turn", "subagent", "compaction")


def test_a_cache_key_names_its_role_but_never_the_home(tmp_path: Path) -> None:
    home = tmp_path / "alice-private-notes"
    for role in ROLES:
        key = cache_key(home, role)
        assert key.startswith(f"evertalk-{role}-") and len(key) <= 64
        assert "alice" not in key and "/" not in key and str(tmp_path.name) not in key


def test_keys_differ_by_role_and_by_home(tmp_path: Path) -> None:
    # two homes with a long common prefix: the old key (path cut to 64) made them collide
    stem = tmp_path / ("x" * 60)
    homes = [Path(f"{stem}-one"), Path(f"{stem}-two")]
    keys = {cache_key(home, role) for home in homes for role in ROLES}
    assert len(keys) == len(homes) * len(ROLES)


def test_a_key_is_stable_for_one_chat(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.chdir(tmp_path)
    # the same folder by any name: relative, or through a symlink
    os.symlink(home, tmp_path / "link")
    assert cache_key(Path("home"), "turn") == cache_key(home, "turn")
    assert cache_key(tmp_path / "link", "turn") == cache_key(home, "turn")


def test_compactions_use_the_compaction_key(tmp_path: Path) -> None:
    runtime = Runtime(tmp_path, Config(), "system")
    assert runtime.compactor_settings().cache_key == cache_key(tmp_path, "compaction")
