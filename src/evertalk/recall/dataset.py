"""`--dataset FILE`: a LongMemEval data file (the user downloads it; nothing is bundled).

The file is a JSON list of items, each with `question`, `answer`, `question_type`,
`question_id`, `question_date`, and the dated history: `haystack_sessions` (each a list of
turns `{"role": "user" | "assistant", "content": …, "has_answer": true?}`) with
`haystack_dates` (`2023/05/20 (Sat) 02:21`) one per session. Each item becomes a case of its
own: a fresh chat with its sessions imported at their dates (the turns of a session a second
apart), then its question. The age of a question is counted from the last turn marked
`has_answer`, when one is.
"""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from evertalk.memory.text import split_text
from evertalk.recall.client import BenchError
from evertalk.recall.generator import START, Question
from evertalk.recall.runner import Case

_WEEKDAY = re.compile(r"\s*\([A-Za-z]+\)\s*")


def load(path: Path) -> list[Case]:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except OSError as error:
        raise BenchError(f"--dataset: cannot read {path}: {error.strerror or error}") from None
    except (UnicodeDecodeError, json.JSONDecodeError) as error:
        raise BenchError(f"--dataset: {path} is not a JSON file: {error}") from None
    if not isinstance(data, list) or not data:
        raise BenchError(f"--dataset: {path} must hold a JSON list of questions")
    return [_case(number + 1, item, path) for number, item in enumerate(data)]


def _case(number: int, item: object, path: Path) -> Case:
    where = f"--dataset: {path.name}, item {number}"
    if not isinstance(item, dict):
        raise BenchError(f"{where}: not an object")
    question, sessions = item.get("question"), item.get("haystack_sessions")
    if not isinstance(question, str) or not isinstance(sessions, list) or "answer" not in item:
        raise BenchError(f"{where}: needs question, answer and haystack_sessions")
    dates = item.get("haystack_dates")
    dates = dates if isinstance(dates, list) else []
    label = str(item.get("question_id", number))
    messages: list[dict[str, object]] = []
    records: list[tuple[str, str]] = []
    size, evidence = 0, None
    for s, session in enumerate(sessions):
        start = _date(dates[s], where) if s < len(dates) else START
        for t, turn in enumerate(session if isinstance(session, list) else []):
            content = turn.get("content") if isinstance(turn, dict) else None
            if not isinstance(content, str) or not content.strip():
                continue
            kind = "user" if turn.get("role") == "user" else "ever"
            when = start + timedelta(seconds=t)
            key = f"lme-{label}-{s}-{t}"
            messages.append({"kind": kind, "text": content, "date": when.isoformat(), "key": key})
            records.append((kind, content))
            size += len(split_text(content))
            if turn.get("has_answer"):
                evidence = size - 1
    asked_on = item.get("question_date")
    text = question + (f"\n(Asked on {asked_on}.)" if isinstance(asked_on, str) else "")
    return Case(
        label=f"item {number} ({label})",
        messages=messages,
        records=records,
        questions=[
            Question(
                number=number,
                kind=str(item.get("question_type") or "unknown"),
                topic="",
                text=text,
                expected=_answer(item["answer"]),
                wrong=(),
                message=evidence,
                age=None if evidence is None else size - evidence,
            )
        ],
    )


def _answer(value: Any) -> str:
    if isinstance(value, list):
        return ", ".join(str(part) for part in value)
    return str(value)


def _date(value: object, where: str) -> datetime:
    """`2023/05/20 (Sat) 02:21`, or ISO 8601; UTC when no zone is named."""
    if not isinstance(value, str):
        raise BenchError(f"{where}: a haystack date is not a string")
    text = _WEEKDAY.sub(" ", value).strip()
    for form in ("%Y/%m/%d %H:%M", "%Y/%m/%d %H:%M:%S", "%Y/%m/%d"):
        try:
            return datetime.strptime(text, form).replace(tzinfo=UTC)
        except ValueError:
            pass
    try:
        found = datetime.fromisoformat(text)
    except ValueError:
        raise BenchError(f"{where}: cannot read the date {value!r}") from None
    return found if found.tzinfo else found.replace(tzinfo=UTC)
