"""`evertalk --version`, as a user runs it."""

from __future__ import annotations

import subprocess
import sys

from evertalk import __version__


def test_version_prints_the_name_and_the_version() -> None:
    result = subprocess.run(
        [sys.executable, "-m", "evertalk", "--version"], capture_output=True, text=True
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout == f"evertalk {__version__}\n" and result.stderr == ""
