"""`evertalk bench recall` against the fakes (SPEC §14): the chat imported into a scratch home,
built by a scripted compactor, each question asked as a real turn through the service, and
the baseline asked over the newest bytes of the log.

The reader model answers only from what its request holds, so these runs bound what the
harness can measure and prove its scoring: with summaries that keep every codename's sentence,
recall is whole and the baseline's falls with age; with summaries that drop numbers, the number
facts fall and the rest stays.
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from recall_fakes import script

from evertalk.ledger import ledger_path, read_records
from evertalk.recall.client import BenchError
from evertalk.recall.command import generated_case
from evertalk.recall.generator import Chat, generate
from evertalk.recall.report import Report
from evertalk.recall.runner import Options, new_report, run
from fakes import AnthropicFake, serve
from home_config import write_config as shared_config

API_KEY = "sk-ant-recall-tests-SECRET-4c1d"
OWN = ("EVERTALK_", "ANTHROPIC_", "OPENAI_", "OPENROUTER_")
MESSAGES, FACTS, SEED = 240, 16, 4
WINDOW = 24_000  # tokens: a view of 28,800 bytes, which a chat of 240 messages passes


def configure(home: Path, url: str) -> None:
    """A home on the fake at `url`, its view sized by a small context window."""
    shared_config(
        home, base_url=url, api_key=API_KEY, more=("[turn]", f"context_window = {WINDOW}")
    )


@pytest.fixture(autouse=True)
def _clean_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    """The scratch home's service inherits this process's variables: none of the user's."""
    import os

    for name in list(os.environ):
        if name.startswith(OWN) and name != "EVERTALK_SERVICE_IDLE":
            monkeypatch.delenv(name)


@pytest.fixture(scope="module")
def chat() -> Chat:
    return generate(MESSAGES, FACTS, SEED)


def bench(
    tmp_path: Path, chat: Chat, *, drop_numbers: bool = False, baseline_bytes: int = 40_000
) -> tuple[Report, AnthropicFake]:
    names = [q.topic for q in chat.questions]
    fake = AnthropicFake(script(names, chat.size, drop_numbers=drop_numbers))
    user = tmp_path / "user-home"
    with serve(fake.app) as url:
        configure(user, url)
        options = Options(
            user_home=user, baseline_bytes=baseline_bytes, keep=True, scratch_root=tmp_path
        )
        report = new_report(options, chat.seed, None, len(chat.questions))
        run([generated_case(chat)], options, report, lambda line: None)
    return report, fake


@pytest.fixture(scope="module")
def kept(tmp_path_factory: pytest.TempPathFactory, chat: Chat) -> Iterator[tuple[Report, Path]]:
    tmp = tmp_path_factory.mktemp("kept")
    report, _ = bench(tmp, chat)
    yield report, tmp


def test_summaries_that_keep_identifiers_recall_everything(
    kept: tuple[Report, Path], chat: Chat
) -> None:
    report, _ = kept
    assert report.evertalk.recall() == (FACTS, FACTS), [
        (a.kind, a.answer) for a in report.evertalk.answers if a.outcome != "right"
    ]
    assert [a.number for a in report.evertalk.answers] == [q.number for q in chat.questions]
    assert report.messages == MESSAGES


def test_old_facts_are_found_by_zooming(kept: tuple[Report, Path]) -> None:
    report, _ = kept
    oldest = max(report.evertalk.answers, key=lambda a: a.age or 0)
    assert oldest.zooms >= 2
    assert oldest.outcome == "right"  # found, not only looked for


def test_the_baseline_falls_with_age(kept: tuple[Report, Path]) -> None:
    report, _ = kept
    by_age = report.baseline.by("bucket")
    youngest, oldest = by_age[min(by_age, key=_order)], by_age[max(by_age, key=_order)]
    assert youngest[0] / youngest[1] >= 0.75
    assert oldest[0] == 0
    assert report.baseline.recall()[0] < FACTS


def test_costs_come_from_the_scratch_ledger(kept: tuple[Report, Path]) -> None:
    report, tmp = kept
    homes = list(tmp.glob("evertalk-recall-*/home"))
    assert len(homes) == 1  # kept
    records = read_records(ledger_path(homes[0])).records
    assert report.building.calls + report.asking.calls + report.baseline_spend.calls == len(records)
    assert report.baseline_spend.calls == FACTS
    assert report.building.calls > 0 and report.asking.calls >= FACTS
    assert all(r.role == "compaction" for r in records[: report.building.calls])
    assert (homes[0].stat().st_mode & 0o777) == 0o700
    assert (homes[0] / "work").stat().st_mode & 0o777 == 0o700
    config = (homes[0] / "config.toml").read_text()
    assert "search" not in config or "search = false" in config
    assert 'shell = "deny"' in config


def test_summaries_that_drop_numbers_lose_the_number_facts_only(tmp_path: Path, chat: Chat) -> None:
    report, _ = bench(tmp_path, chat, drop_numbers=True)
    by_kind = report.evertalk.by("kind")
    assert by_kind["number"][0] == 0 and by_kind["number"][1] >= 1
    for kind, (right, asked) in by_kind.items():
        if kind != "number":
            assert right == asked, kind


def test_the_scratch_home_goes_unless_kept(tmp_path: Path) -> None:
    chat = generate(60, 4, seed=9)
    names = [q.topic for q in chat.questions]
    fake = AnthropicFake(script(names, chat.size))
    user = tmp_path / "user-home"
    with serve(fake.app) as url:
        configure(user, url)
        options = Options(user_home=user, baseline_bytes=10_000, scratch_root=tmp_path)
        report = new_report(options, chat.seed, None, len(chat.questions))
        root = run([generated_case(chat)], options, report, lambda line: None)
    assert not root.exists()
    assert report.evertalk.recall()[1] == 4
    assert not (user / "chat").exists()  # the user's own chat was never opened


def test_a_memory_model_the_environment_overrides_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("EVERTALK_MEMORY_MODEL", "claude-haiku-5-5")
    options = Options(user_home=tmp_path, memory_model="other-model", scratch_root=tmp_path)
    with pytest.raises(BenchError, match="EVERTALK_MEMORY_MODEL"):
        run([], options, new_report(options, 1, None, 0), lambda line: None)


def test_the_command_line_prints_the_table_and_writes_out(tmp_path: Path) -> None:
    chat = generate(60, 4, seed=11)
    names = [q.topic for q in chat.questions]
    fake = AnthropicFake(script(names, chat.size))
    user, out = tmp_path / "user-home", tmp_path / "out"
    with serve(fake.app) as url:
        configure(user, url)
        done = subprocess.run(
            _bench_command(user, 11, "--out", str(out), "--json"),
            capture_output=True,
            text=True,
            timeout=120,
            env=_env(tmp_path),
        )
    assert done.returncode == 0, done.stderr
    printed = json.loads(done.stdout)
    assert printed["evertalk"]["asked"] == 4 and printed["baseline"]["asked"] == 4
    assert "built " in done.stderr and "$" in done.stderr  # the build's progress, with its cost
    assert API_KEY not in done.stdout + done.stderr
    assert (out / "chat.jsonl").read_text() == chat.chat_jsonl()
    assert (out / "questions.jsonl").read_text() == chat.questions_jsonl()
    report = json.loads((out / "report.json").read_text())
    assert report["seed"] == 11 and report["evertalk"]["asked"] == 4
    assert report["baseline_bytes"] == 28_800  # the view's ceiling for the window
    assert (out / "recall-by-age.svg").read_text().startswith("<svg")


def _bench_command(user: Path, seed: int, *more: str) -> list[str]:
    """`evertalk bench recall` on a 60-message chat with 4 facts."""
    home = ["--home", str(user)]
    sizes = ["--messages", "60", "--facts", "4", "--seed", str(seed)]
    return [sys.executable, "-m", "evertalk", *home, "bench", "recall", *sizes, *more]


def _env(tmp_path: Path) -> dict[str, str]:
    import os

    env = {k: v for k, v in os.environ.items() if not k.startswith(OWN)}
    env["TMPDIR"] = str(tmp_path)  # the scratch folder, where the suite stops any service left
    env["EVERTALK_SERVICE_IDLE"] = "30"
    return env


def _order(label: str) -> int:
    from evertalk.recall.scoring import bucket_order

    return bucket_order(label)


def test_ctrl_c_while_building_stops_cleanly_and_reports_what_it_had(tmp_path: Path) -> None:
    chat = generate(60, 4, seed=13)
    names = [q.topic for q in chat.questions]
    fake = AnthropicFake(script(names, chat.size, compaction_delay=1.0))
    user = tmp_path / "user-home"
    with serve(fake.app) as url:
        configure(user, url)
        bench = subprocess.Popen(
            _bench_command(user, 13),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=_env(tmp_path),
        )
        assert bench.stderr is not None
        for line in bench.stderr:
            if " built " in line:  # the first progress line: the build has begun
                break
        bench.send_signal(signal.SIGINT)
        out, _ = bench.communicate(timeout=60)
    assert bench.returncode == 130
    assert "stopped by Ctrl+C while building" in out
    assert "recall" in out
    assert not list(tmp_path.glob("evertalk-recall-*"))  # the scratch home went
