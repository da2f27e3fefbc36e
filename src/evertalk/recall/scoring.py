"""Scoring an answer: it recalls the fact when it contains the expected value, case and
separators ignored (`48,213` is found in `48213`, `ops-4821b` in `OPS 4821B`). A value that a
correction overrode, found in the answer, makes it a wrong recall even beside the right one: the
answer does not tell which is true."""

from __future__ import annotations

import itertools
import re
import unicodedata
from typing import Final, Literal

Outcome = Literal["right", "stale", "missed", "failed"]
"""`stale`: the answer holds an overridden value; `failed`: no answer came (the turn or the
call failed)."""

AGE_BUCKETS: Final = (1, 16, 64, 256, 1024, 4096, 16384)
"""The lower bounds of the age buckets, in log messages: each four times the last."""

_NOT_ALNUM = re.compile(r"[\W_]+")


def squash(text: str) -> str:
    """`text` compared the containment way: NFKC, case folded, letters and digits only."""
    return _NOT_ALNUM.sub("", unicodedata.normalize("NFKC", text).casefold())


def score(answer: str, expected: str, wrong: tuple[str, ...] = ()) -> Outcome:
    said = squash(answer)
    if any(squash(value) and squash(value) in said for value in wrong):
        return "stale"
    return "right" if squash(expected) and squash(expected) in said else "missed"


def bucket(age: int | None) -> str:
    """The age bucket's label: `1-15`, `16-63`, …, `16384+`; `unknown` without an age."""
    if age is None:
        return "unknown"
    for low, high in itertools.pairwise(AGE_BUCKETS):
        if low <= age < high:
            return f"{low}-{high - 1}"
    return f"{AGE_BUCKETS[-1]}+" if age >= AGE_BUCKETS[-1] else f"{AGE_BUCKETS[0]}-15"


def bucket_order(label: str) -> int:
    """Where a bucket's label sorts: youngest first, `unknown` last."""
    head = label.split("-")[0].rstrip("+")
    return int(head) if head.isdigit() else 1 << 30
