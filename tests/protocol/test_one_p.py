"""There is one `-p`: the client of the service. No second turn runs in the command's own
process, and nothing in the package or its benchmarks reaches for one."""

from __future__ import annotations

import importlib.util
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_no_in_process_p_module() -> None:
    assert importlib.util.find_spec("evertalk.headless") is None


def test_nothing_imports_an_in_process_p() -> None:
    sources = [*(ROOT / "src").rglob("*.py"), *(ROOT / "bench").rglob("*.py")]
    users = [
        str(path.relative_to(ROOT))
        for path in sources
        if "evertalk.headless import" in path.read_text()
        or "evertalk import headless" in path.read_text()
    ]
    assert users == []
