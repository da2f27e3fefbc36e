"""`evertalk usage`, end to end, as a user runs it: reading the ledger itself, or asking the
home's service when one runs."""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest

from agent.test_turn_support import write_config
from evertalk import usage_cli
from evertalk.ledger import Ledger, ledger_path
from evertalk.protocol.paths import log_path, socket_path
from evertalk.providers.base import Usage

PLUS1 = timezone(timedelta(hours=1))


def run(
    *args: str, home: Path | None = None, cwd: Path | None = None
) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "EVERTALK_HOME"}
    if home is not None:
        env["EVERTALK_HOME"] = str(home)
    return subprocess.run(
        [sys.executable, "-m", "evertalk", *args],
        capture_output=True,
        text=True,
        env=env,
        cwd=cwd,
    )


def make_ledger(home: Path) -> None:
    with Ledger(ledger_path(home)) as ledger:
        for k, (role, model, usage, cost, node) in enumerate(
            [
                ("turn", "claude-sonnet-5-5", Usage(1_000, 200, 150_000, 4_000), 0.125, None),
                ("compaction", "claude-haiku-5-5", Usage(100, 50, 9_000, 900), 0.25, "0+2"),
                ("compaction", "claude-haiku-5-5", Usage(100, 40, 9_900, 0), None, "0+2"),
                ("compaction", "claude-haiku-5-5", Usage(100, 30, 9_900, 0), 0.5, "2+2"),
            ]
        ):
            ledger.record(
                role=role,
                provider="anthropic",
                model=model,
                usage=usage,
                cost=cost,
                duration_ms=1_000,
                node=node,
                turn=7 if role == "turn" else None,
                date=datetime(2026, 10, 20 + k // 2, 12, 0, tzinfo=PLUS1),
            )


def test_no_ledger_yet_is_one_friendly_line(tmp_path: Path) -> None:
    result = run("usage", "--home", str(tmp_path))
    assert result.returncode == 0, result.stderr
    assert result.stdout.count("\n") == 1 and "No model calls yet" in result.stdout
    assert result.stderr == ""
    as_json = json.loads(run("usage", "--json", "--home", str(tmp_path)).stdout)
    assert as_json["total"]["calls"] == 0 and as_json["cache_read_share"] is None


def test_the_table(tmp_path: Path) -> None:
    make_ledger(tmp_path)
    result = run("usage", "--home", str(tmp_path))
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[0].split() == [
        "by",
        "day",
        "calls",
        "input",
        "output",
        "cache",
        "read",
        "cache",
        "write",
        "read",
        "share",
        "cost",
    ]
    rows = {line.split()[0]: line.split()[1:] for line in lines if line.startswith("  ")}
    assert rows["2026-10-20"] == ["2", "1.1k", "250", "159.0k", "4.9k", "96.4%", "$0.38"]
    assert rows["2026-10-21"] == ["2", "200", "70", "19.8k", "0", "99.0%", "$0.50*"]
    assert rows["turn"] == ["1", "1.0k", "200", "150.0k", "4.0k", "96.8%", "$0.12"]
    assert rows["compaction"] == ["3", "300", "120", "28.8k", "900", "96.0%", "$0.75*"]
    assert rows["anthropic/claude-haiku-5-5"] == rows["compaction"]
    total = next(line for line in lines if line.startswith("total")).split()
    assert total == ["total", "4", "1.3k", "320", "178.8k", "4.9k", "96.6%", "$0.88*"]
    assert "compaction calls per built node  1.50 (3 calls, 2 nodes)" in lines
    assert any(line.startswith("cache read share") and "96.6%" in line for line in lines)
    assert lines[-1] == "* leaves out 1 call with no known price"


def test_json(tmp_path: Path) -> None:
    make_ledger(tmp_path)
    result = run("usage", "--json", home=tmp_path)
    assert result.returncode == 0, result.stderr
    data = json.loads(result.stdout)
    assert data["ledger"] == str(tmp_path / "usage.jsonl") and data["skipped"] == 0
    assert data["total"]["calls"] == 4 and data["total"]["cost"] == 0.875
    assert data["total"]["cache_read"] == 178_800
    assert data["cache_read_share"] == 178_800 / (1_300 + 178_800 + 4_900)
    assert list(data["by_day"]) == ["2026-10-20", "2026-10-21"]
    assert list(data["by_role"]) == ["turn", "compaction"]
    assert data["by_model"]["anthropic/claude-sonnet-5-5"]["calls"] == 1
    assert (data["compaction_calls"], data["built_nodes"], data["calls_per_node"]) == (3, 2, 1.5)


def test_home_from_every_place(tmp_path: Path) -> None:
    make_ledger(tmp_path)
    for args, home in (
        (("--home", str(tmp_path), "usage", "--json"), None),
        (("usage", "--json", "--home", str(tmp_path)), None),
        (("usage", "--json"), tmp_path),
    ):
        result = run(*args, home=home)
        assert json.loads(result.stdout)["total"]["calls"] == 4, args


def test_a_torn_line_is_a_warning_not_a_failure(tmp_path: Path) -> None:
    make_ledger(tmp_path)
    with open(ledger_path(tmp_path), "ab") as file:
        file.write(b'{"date":"2026-10-2')
    result = run("usage", "--home", str(tmp_path))
    assert result.returncode == 0
    assert result.stderr.strip().endswith("skipped 1 unreadable line")
    assert len(result.stderr.strip().splitlines()) == 1
    assert json.loads(run("usage", "--json", home=tmp_path).stdout)["skipped"] == 1


def test_an_unreadable_ledger_is_one_line_and_status_1(tmp_path: Path) -> None:
    ledger_path(tmp_path).mkdir()  # a folder where the file should be
    result = run("usage", home=tmp_path)
    assert result.returncode == 1
    assert "Traceback" not in result.stderr and len(result.stderr.strip().splitlines()) == 1


def test_bad_arguments_are_one_line(tmp_path: Path) -> None:
    result = run("usage", "--frobnicate", home=tmp_path)
    assert result.returncode == 2
    assert len(result.stderr.strip().splitlines()) == 1


def test_usage_imports_no_model_sdk(tmp_path: Path) -> None:
    make_ledger(tmp_path)
    script = (
        "import sys\n"
        "from evertalk.cli import main\n"
        "assert main(['usage', '--home', sys.argv[1]]) == 0\n"
        "loaded = sorted(m for m in sys.modules if m.split('.')[0] in ('anthropic', 'openai', "
        "'httpx'))\n"
        "assert not loaded, loaded\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", script, str(tmp_path)], capture_output=True, text=True
    )
    assert result.returncode == 0, result.stderr


def test_calls_with_no_known_price_at_all(tmp_path: Path) -> None:
    with Ledger(ledger_path(tmp_path)) as ledger:
        ledger.record(
            role="turn",
            provider="openrouter",
            model="some/model",
            usage=Usage(100, 10),
            cost=None,
            duration_ms=10,
        )
    lines = run("usage", "--home", str(tmp_path)).stdout.splitlines()
    total = next(line for line in lines if line.startswith("total")).split()
    assert total[-1] == "?"
    assert lines[-1] == "? no known price for these models: what they cost is not counted"
    assert not any("*" in line for line in lines)


def make_local_ledger(home: Path) -> None:
    """A local model whose server reports no usage, and its compactions, one of them rejected;
    a remote compactor beside it."""
    calls: list[tuple[str, str, str, Usage, str | None, str | None]] = [
        ("turn", "llamacpp", "smollm2", Usage(reported=False), None, None),
        ("compaction", "llamacpp", "smollm2", Usage(reported=False), "0+1", None),
        ("compaction", "llamacpp", "smollm2", Usage(reported=False), "1+1", "no 4412 in input"),
        ("compaction", "llamacpp", "smollm2", Usage(reported=False), "1+1", None),
        ("compaction", "anthropic", "claude-haiku-5-5", Usage(100, 40, 900, 0), "2+1", None),
    ]
    with Ledger(ledger_path(home)) as ledger:
        for role, provider, model, usage, node, rejected in calls:
            ledger.record(
                role=role,
                provider=provider,
                model=model,
                usage=usage,
                cost=None,
                duration_ms=2_000,
                node=node,
                date=datetime(2026, 10, 20, 12, 0, tzinfo=PLUS1),
                rejected=rejected,
            )


def test_usage_not_reported_is_shown_as_unknown(tmp_path: Path) -> None:
    make_local_ledger(tmp_path)
    result = run("usage", home=tmp_path)
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    rows = {line.split()[0]: line.split()[1:] for line in lines if line.startswith("  ")}
    assert rows["llamacpp/smollm2"] == ["4", "?", "?", "?", "?", "-", "?"]
    assert rows["anthropic/claude-haiku-5-5"][:5] == ["1", "100", "40", "900", "0"]
    total = next(line for line in lines if line.startswith("total")).split()
    assert total[:6] == ["total", "5", "100+", "40+", "900+", "0+"]
    assert "cache read share                 90.0% of 1.0k+ prompt tokens" in lines
    assert (
        "usage not reported               4 of 5 calls (their tokens are unknown, not 0)" in lines
    )
    assert "+ token sums leave out calls whose usage was not reported; ? none was" in lines


def test_only_unreported_usage_never_reads_as_zero_tokens(tmp_path: Path) -> None:
    with Ledger(ledger_path(tmp_path)) as ledger:
        ledger.record(
            role="turn",
            provider="llamacpp",
            model="smollm2",
            usage=Usage(reported=False),
            cost=None,
            duration_ms=10,
        )
    out = run("usage", home=tmp_path).stdout
    assert "0 prompt tokens" not in out
    assert "cache read share                 - (no call had its usage reported)" in out
    assert "usage not reported               1 of 1 calls" in out


def test_the_rejection_rate_per_compactor_model(tmp_path: Path) -> None:
    make_local_ledger(tmp_path)
    lines = run("usage", home=tmp_path).stdout.splitlines()
    assert "rejected compaction replies      33.3% (1 of 3 calls) llamacpp/smollm2" in lines
    assert (
        "rejected compaction replies      0.0% (0 of 1 calls) anthropic/claude-haiku-5-5" in lines
    )
    data = json.loads(run("usage", "--json", home=tmp_path).stdout)
    assert data["rejections"]["llamacpp/smollm2"] == {
        "calls": 3,
        "rejected": 1,
        "rate": 1 / 3,
    }
    assert data["total"]["unreported"] == 4
    assert data["by_model"]["llamacpp/smollm2"]["unreported"] == 4
    # nodes 0+1 and 1+1 (its second, kept reply) and 2+1: the rejected reply built none
    assert (data["compaction_calls"], data["built_nodes"]) == (4, 3)


def test_lines_written_before_these_fields_read_as_before(tmp_path: Path) -> None:
    """An older ledger line has neither `reported` nor `rejected`: reported, not rejected."""
    line = {
        "date": "2026-10-20T12:00:00.000+01:00",
        "role": "compaction",
        "provider": "anthropic",
        "model": "claude-haiku-5-5",
        "input": 10,
        "output": 5,
        "cache_read": 0,
        "cache_write": 0,
        "cost": 0.01,
        "duration_ms": 100,
        "node": "0+1",
    }
    ledger_path(tmp_path).write_text(json.dumps(line) + "\n")
    result = run("usage", home=tmp_path)
    assert result.returncode == 0 and result.stderr == ""
    assert "usage not reported" not in result.stdout and "+" not in result.stdout
    data = json.loads(run("usage", "--json", home=tmp_path).stdout)
    assert data["total"]["unreported"] == 0
    assert data["rejections"]["anthropic/claude-haiku-5-5"]["rejected"] == 0


TOKEN_CELL = re.compile(r"(\d{1,3}|\d{1,3}(,\d{3})*\.\d[kMB])[+]?")


def test_one_number_format_per_column_and_no_trailing_spaces(tmp_path: Path) -> None:
    """Token sums all take one form (as they are below 1,000, else 55.4k, 183.7k, 1.3M), never
    183.7k beside 55,382; calls are counted in full, shares in percent, costs in dollars; and
    no line ends in a space (the marks' room after an unmarked cost was one)."""
    with Ledger(ledger_path(tmp_path)) as ledger:
        for day, (cache_read, cost) in enumerate(((55_382, 0.5), (183_700, None))):
            ledger.record(
                role="turn",
                provider="anthropic",
                model="claude-sonnet-5-5",
                usage=Usage(950, 1_260_000 * day, cache_read, 12_345),
                cost=cost,
                duration_ms=10,
                date=datetime(2026, 10, 20 + day, 12, 0, tzinfo=PLUS1),
            )
    out = run("usage", home=tmp_path).stdout
    lines = out.splitlines()
    assert [line for line in lines if line != line.rstrip()] == []
    rows = {line.split()[0]: line.split()[1:] for line in lines if line.startswith("  ")}
    rows["total"] = next(line for line in lines if line.startswith("total")).split()[1:]
    assert rows["2026-10-20"] == ["1", "950", "0", "55.4k", "12.3k", "80.6%", "$0.50"]
    assert rows["2026-10-21"] == ["1", "950", "1.3M", "183.7k", "12.3k", "93.3%", "?"]
    assert rows["total"] == ["2", "1.9k", "1.3M", "239.1k", "24.7k", "90.0%", "$0.50*"]
    for label, cells in rows.items():
        assert all(TOKEN_CELL.fullmatch(cell) for cell in cells[1:5]), (label, cells)
    assert "cache read share                 90.0% of 265.7k prompt tokens" in lines


# -- through the service ------------------------------------------------------------------------


def outputs(home: Path, cwd: Path) -> list[tuple[int, str, str]]:
    """What `evertalk usage` says, plain and as JSON, for a home named relative to `cwd`."""
    found = []
    for extra in ((), ("--json",)):
        result = run("--home", os.path.relpath(home, cwd), "usage", *extra, cwd=cwd)
        found.append((result.returncode, result.stdout, result.stderr))
    return found


def test_a_running_service_is_asked_and_says_the_same(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    home = tmp_path / "home"
    write_config(home, base_url="http://127.0.0.1:9")  # no call is made
    empty = outputs(home, tmp_path)
    make_ledger(home)
    with open(ledger_path(home), "ab") as file:
        file.write(b'{"date":"2026-10-2')  # a torn line: its warning too must read the same
    direct = outputs(home, tmp_path)
    assert not socket_path(home).exists() and not log_path(home).exists()  # none was started
    ledger_path(home).rename(tmp_path / "kept.jsonl")

    started = run("serve", home=home)
    assert started.returncode == 0, started.stderr
    assert outputs(home, tmp_path) == empty
    (tmp_path / "kept.jsonl").rename(ledger_path(home))
    assert outputs(home, tmp_path) == direct
    assert direct[0][0] == 0 and "skipped 1 unreadable line" in direct[0][2]
    assert json.loads(direct[1][1])["ledger"] == "home/usage.jsonl"  # as the command named it

    # the service read it: in this process, reading the file fails
    def unread(path: Path) -> usage_cli.UsageReport:
        raise AssertionError(f"{path} was read by the command")

    monkeypatch.setattr(usage_cli, "read_usage", unread)
    assert usage_cli.run_usage_command(argparse.Namespace(json=True), home) == 0
    said = json.loads(capsys.readouterr().out)
    assert said == {**json.loads(direct[1][1]), "ledger": str(ledger_path(home))}


def test_an_unreadable_ledger_reads_the_same_through_the_service(tmp_path: Path) -> None:
    home = tmp_path / "home"
    write_config(home, base_url="http://127.0.0.1:9")
    ledger_path(home).mkdir()
    direct = outputs(home, tmp_path)
    assert run("serve", home=home).returncode == 0
    assert outputs(home, tmp_path) == direct
    assert direct[0][0] == 1 and "cannot read home/usage.jsonl" in direct[0][2]
