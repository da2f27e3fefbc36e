"""`evertalk bench recall`: the command line's entry (SPEC §14).

Progress goes to standard error; the report (a table, or `--json`) to standard output. With
`--out DIR` the folder gets the chat and the questions as JSON Lines (written first, so that
they are there to inspect even when the run is stopped), `report.json` and
`recall-by-age.svg`.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from evertalk.client.connection import ServiceError
from evertalk.recall import dataset
from evertalk.recall.chart import recall_by_age_svg
from evertalk.recall.client import BenchError
from evertalk.recall.generator import Chat, generate, question_record
from evertalk.recall.report import JUDGE_NOTE, Report
from evertalk.recall.runner import Case, Options, new_report, run
from evertalk.store.secure import make_dir
from evertalk.terminal_text import escape_controls, fail


def run_recall(args: argparse.Namespace, home: Path) -> int:
    options = Options(
        user_home=home,
        model=args.bench_model,
        memory_model=args.bench_memory_model,
        baseline_bytes=args.baseline_bytes,
        keep=args.keep,
    )
    try:
        cases, chat = _cases(args)
        if args.out is not None:
            _write_inputs(args.out, cases, chat)
        seed = None if chat is None else chat.seed
        source = None if args.dataset is None else str(args.dataset)
        report = new_report(options, seed, source, _count(cases))
        if args.dataset is not None:
            report.notes.append(JUDGE_NOTE)
        root = run(cases, options, report, _say)
    except (BenchError, ServiceError) as error:
        return fail(str(error))
    except OSError as error:
        return fail(f"cannot write to {args.out}: {error.strerror or error}")
    if args.keep:
        _say(f"the scratch home is kept at {root}")
    if args.json:
        print(json.dumps(report.to_json(), indent=2, ensure_ascii=False))
    else:
        for line in report.table():
            print(escape_controls(line))
    if args.out is not None:
        _write_report(args.out, report)
    return 130 if report.stopped else 0


def _cases(args: argparse.Namespace) -> tuple[list[Case], Chat | None]:
    if args.baseline_bytes is not None and args.baseline_bytes < 1:
        raise BenchError("--baseline-bytes must be at least 1")
    if args.dataset is not None:
        return dataset.load(args.dataset), None
    try:
        chat = generate(args.messages, args.facts, args.seed)
    except ValueError as error:
        raise BenchError(str(error)) from None
    return [generated_case(chat)], chat


def generated_case(chat: Chat) -> Case:
    return Case(
        label=f"seed {chat.seed}",
        messages=[
            {"kind": m.kind, "text": m.text, "date": m.date, "key": f"recall-{chat.seed}-{m.id}"}
            for m in chat.messages
        ],
        records=[(m.kind, m.text) for m in chat.messages],
        questions=list(chat.questions),
    )


def _count(cases: list[Case]) -> int:
    return sum(len(case.questions) for case in cases)


def _write_inputs(out: Path, cases: list[Case], chat: Chat | None) -> None:
    make_dir(out)
    if chat is not None:
        (out / "chat.jsonl").write_text(chat.chat_jsonl(), encoding="utf-8")
    questions = [question_record(q) for case in cases for q in case.questions]
    text = "".join(json.dumps(q, ensure_ascii=False) + "\n" for q in questions)
    (out / "questions.jsonl").write_text(text, encoding="utf-8")


def _write_report(out: Path, report: Report) -> None:
    data = json.dumps(report.to_json(), indent=2, ensure_ascii=False) + "\n"
    (out / "report.json").write_text(data, encoding="utf-8")
    (out / "recall-by-age.svg").write_text(recall_by_age_svg(report), encoding="utf-8")
    _say(f"wrote {out / 'report.json'} and {out / 'recall-by-age.svg'}")


def _say(line: str) -> None:
    print(escape_controls(f"evertalk: {line}"), file=sys.stderr, flush=True)
