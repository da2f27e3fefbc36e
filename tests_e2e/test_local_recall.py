"""`evertalk bench recall` on SmolLM2 through llama-cpp-python's server (issue 26): a
200-message chat with 8 facts, built and asked on the real local model. A floor, not a goal:
the model is tiny, and what is checked is that the harness runs end to end and reports; the
figures (recall of evertalk and of the baseline, calls, seconds) are recorded.

At E2E_RECALL_TIMEOUT seconds (default 3,600) the run gets Ctrl+C, which stops it cleanly with
a report of what it had: that report is checked and recorded the same way.
"""

from __future__ import annotations

import json
import os
from typing import Any

import pytest
from e2e_support import Server, run_evertalk, write_config

RECALL_TIMEOUT = float(os.environ.get("E2E_RECALL_TIMEOUT", "3600"))


def test_bench_recall_runs_and_reports(
    server: Server, tmp_path_factory: pytest.TempPathFactory, figures: dict[str, Any]
) -> None:
    folder = tmp_path_factory.mktemp("recall")
    home, out = folder / "home", folder / "out"
    write_config(home, server.base_url, server.model, concurrency=1)
    run = run_evertalk(
        home,
        "bench",
        "recall",
        "--messages",
        "200",
        "--facts",
        "8",
        "--json",
        "--out",
        str(out),
        timeout=RECALL_TIMEOUT,
        interrupt_grace=900,
    )
    assert run.returncode in (0, 130), run.describe()
    report = json.loads(run.stdout)
    assert (out / "chat.jsonl").exists() and (out / "questions.jsonl").exists()
    assert (out / "report.json").exists() and (out / "recall-by-age.svg").exists()
    assert not (home / "chat").exists()  # the user's home got no chat of the benchmark's
    figures["bench_recall"] = {
        "seconds": round(run.seconds, 1),
        "stopped": report["stopped"],
        "evertalk": [report["evertalk"]["right"], report["evertalk"]["asked"]],
        "baseline": [report["baseline"]["right"], report["baseline"]["asked"]],
        "zooms_per_question": report["evertalk"]["zooms_per_question"],
        "building_calls": report["cost"]["building"]["calls"],
        "asking_calls": report["cost"]["asking"]["calls"],
        "baseline_bytes": report["baseline_bytes"],
    }
    if report["stopped"] is None:
        assert report["evertalk"]["asked"] == 8 and report["baseline"]["asked"] == 8
