"""The checkpoints' settings in config.toml: `[undo] keep_days` and `max_mb` (issue 25 §3)."""

from __future__ import annotations

from pathlib import Path

import pytest

from evertalk.agent.tools.checkpoints import Limits, limits_of
from evertalk.config import load_config, save_config
from test_config import error_of, write


def test_two_weeks_and_200_mb_by_default(tmp_path: Path) -> None:
    config = load_config(tmp_path, {})
    assert limits_of(config) == Limits(keep_days=14, max_bytes=200 * 1024 * 1024)


def test_the_file_sets_them_and_saving_keeps_them(tmp_path: Path) -> None:
    write(tmp_path, "[undo]\nkeep_days = 3\nmax_mb = 0.5\n")
    config = load_config(tmp_path, {})
    assert limits_of(config) == Limits(keep_days=3, max_bytes=512 * 1024)
    save_config(tmp_path, config)
    assert limits_of(load_config(tmp_path, {})) == limits_of(config)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ('[undo]\nkeep_days = "long"', "`undo.keep_days` must be a number >= 0, not 'long'"),
        ("[undo]\nmax_mb = -1", "`undo.max_mb` must be a number >= 0, not -1"),
        ("[undo]\nmax_mb = true", "`undo.max_mb` must be a number >= 0, not True"),
        ("[undo]\nkeep = 3", "unknown setting `undo.keep`"),
    ],
)
def test_bad_values_are_one_line(tmp_path: Path, text: str, expected: str) -> None:
    path = write(tmp_path, text + "\n")
    assert error_of(tmp_path).startswith(f"{path}: {expected}")
