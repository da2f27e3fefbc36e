"""One run of the benchmark: for each case (the generated chat, or one question of a dataset)
a fresh scratch home, the chat imported and built, the questions asked as turns, then the
baseline; the figures gathered into a report.

The scratch home lives in a temporary folder. Its config.toml carries the user's models, keys
and settings, with the search tool off, no MCP servers and every coding tool denied: the turns
have the view, zoom and date to recall with. The user's own chat, instructions and ledger are
never opened. Ctrl+C stops the phase it falls in: the report then
covers what was done, and the scratch homes' services are stopped either way.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import sys
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path

from evertalk import __version__
from evertalk.client.connection import stop_service
from evertalk.config import Config, ConfigError, ToolPolicies, load_config, save_config
from evertalk.ledger import UsageRecord, ledger_path, read_records
from evertalk.recall import baseline
from evertalk.recall.client import BenchError, Service
from evertalk.recall.generator import Question
from evertalk.recall.report import Answer, Report, Spend
from evertalk.recall.scoring import score
from evertalk.store.secure import make_dir

Say = Callable[[str], None]


@dataclass(frozen=True)
class Case:
    """A chat to import and the questions to ask after it."""

    label: str
    messages: list[dict[str, object]]  # `append` frames: kind, text, date, key
    records: list[tuple[str, str]]  # (kind, text) of each message, for the baseline's log
    questions: list[Question]


@dataclass(frozen=True)
class Options:
    user_home: Path
    model: str | None = None
    memory_model: str | None = None
    baseline_bytes: int | None = None  # None: the view's ceiling
    keep: bool = False
    scratch_root: Path | None = None  # where the scratch folder goes (default: the system's)


@dataclass
class _Phase:
    name: str = "preparing"


def run(cases: list[Case], options: Options, report: Report, say: Say) -> Path:
    """Run every case into `report`; the scratch folder (already removed unless `keep`)."""
    _check_memory_model(options.memory_model)
    root = Path(tempfile.mkdtemp(prefix="evertalk-recall-", dir=options.scratch_root))
    phase = _Phase()
    try:
        for number, case in enumerate(cases):
            home = root / (f"case-{number + 1:04d}" if len(cases) > 1 else "home")
            _run_case(case, home, options, report, say, phase)
    except KeyboardInterrupt:
        report.stopped = f"while {phase.name}"
    finally:
        for home in sorted(root.iterdir()):
            stop_service(home, "bench")
        if not options.keep:
            shutil.rmtree(root, ignore_errors=True)
    return root


def _check_memory_model(memory_model: str | None) -> None:
    told = os.environ.get("EVERTALK_MEMORY_MODEL")
    if memory_model is not None and told and told != memory_model:
        raise BenchError(
            "--memory-model: EVERTALK_MEMORY_MODEL is set to another model and would win; "
            "unset it or use the same name"
        )


def scratch_config(options: Options, home: Path) -> Config:
    """Write the scratch home's config.toml from the user's settings; the settings in force."""
    work = home / "work"
    make_dir(work)  # the home too: 0700, as every folder evertalk makes
    try:
        config = load_config(options.user_home)
        memory = replace(
            config.memory, search=False, model=options.memory_model or config.memory.model
        )
        denied = ToolPolicies(shell="deny", read="deny", write="deny", edit="deny", fetch="deny")
        # the bench's chat is a scratch one, in files: never the user's database
        scratch = replace(config, memory=memory, tools=denied, workdir=str(work), store_url=None)
        save_config(home, scratch)
        return load_config(home)
    except ConfigError as error:
        raise BenchError(str(error)) from None


def _run_case(
    case: Case, home: Path, options: Options, report: Report, say: Say, phase: _Phase
) -> None:
    phase.name = "preparing"
    config = scratch_config(options, home)
    model = options.model or config.model
    report.provider, report.model, report.memory_model = config.provider, model, config.memory.model
    say(f"{case.label}: importing {len(case.messages):,} messages into {home}")
    phase.name = "importing"
    service = Service(home)
    asked_from = 0
    try:
        logged = service.import_messages(case.messages)
        report.messages += logged
        phase.name = "building"
        service.build(say, sys.stderr.isatty())
        ceiling = service.status().view_ceiling
        if options.baseline_bytes is None:
            report.baseline_bytes = ceiling
        asked_from = _ledger_length(home)
        phase.name = "asking"
        for k, question in enumerate(case.questions):
            say(f"{case.label}: question {k + 1}/{len(case.questions)}")
            turn = service.ask(question.text, home / "work", options.model)
            outcome = (
                "failed"
                if turn.error and not turn.answer
                else score(turn.answer, question.expected, question.wrong)
            )
            report.evertalk.answers.append(
                _answer(question, turn.answer, outcome, turn.zooms, turn.error)
            )
    finally:
        service.close()
        stop_service(home, "bench")  # the baseline's calls then land alone in the ledger
        _account(home, asked_from, report)
    phase.name = "asking the baseline"
    tail = baseline.log_tail(case.records, report.baseline_bytes)
    asked: list[baseline.Asked] = []
    try:
        numbered = [(q.number, q.text) for q in case.questions]
        say(f"{case.label}: the baseline, {len(numbered):,} questions")
        asyncio.run(baseline.ask_all(home, config, model, tail, numbered, asked))
    finally:
        for question, got in zip(case.questions, asked, strict=False):
            outcome = (
                "failed" if got.error else score(got.answer, question.expected, question.wrong)
            )
            report.baseline.answers.append(_answer(question, got.answer, outcome, 0, got.error))
        report.baseline_spend += Spend.of(_baseline_records(home))


def _answer(question: Question, answer: str, outcome: str, zooms: int, error: str | None) -> Answer:
    return Answer(
        number=question.number,
        kind=question.kind,
        age=question.age,
        question=question.text,
        expected=question.expected,
        answer=answer,
        outcome=outcome,  # type: ignore[arg-type]
        zooms=zooms,
        error=error,
    )


def _records(home: Path) -> list[UsageRecord]:
    try:
        return read_records(ledger_path(home)).records
    except FileNotFoundError:
        return []


def _ledger_length(home: Path) -> int:
    return len(_records(home))


def _is_baseline(record: UsageRecord) -> bool:
    return isinstance(record.turn, str) and record.turn.startswith(baseline.TAG)


def _baseline_records(home: Path) -> list[UsageRecord]:
    return [r for r in _records(home) if _is_baseline(r)]


def _account(home: Path, asked_from: int, report: Report) -> None:
    """Building: the calls before the first question; asking: the calls after it (the turns,
    and the summaries of what they logged)."""
    records = [r for r in _records(home) if not _is_baseline(r)]
    cut = asked_from or len(records)
    report.building += Spend.of(records[:cut])
    report.asking += Spend.of(records[cut:])


def new_report(options: Options, seed: int | None, dataset: str | None, questions: int) -> Report:
    return Report(
        version=__version__,
        seed=seed,
        messages=0,
        facts=questions,
        provider="",
        model="",
        memory_model="",
        baseline_bytes=options.baseline_bytes or 0,
        dataset=dataset,
    )
