"""The benchmark's report: recall overall, by age and by kind, zooms per question, and what
building and asking cost, for evertalk and the baseline side by side (SPEC §14). A table for
the terminal, and one JSON object for programs.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any, Final

from evertalk.ledger import UsageRecord, summarize
from evertalk.recall.scoring import Outcome, bucket, bucket_order

JUDGE_NOTE: Final = (
    "scored by containment of the expected answer (case and separators ignored): stricter than "
    "the LLM judge of the published results, so these figures run lower than theirs"
)


@dataclass(frozen=True)
class Answer:
    number: int
    kind: str
    age: int | None
    question: str
    expected: str
    answer: str
    outcome: Outcome
    zooms: int = 0
    error: str | None = None

    @property
    def bucket(self) -> str:
        return bucket(self.age)


@dataclass(frozen=True)
class Spend:
    """Model calls from the ledger: their tokens, cost (None: a price unknown) and cache share."""

    calls: int = 0
    input: int = 0
    output: int = 0
    cache_read: int = 0
    cache_write: int = 0
    cost: float | None = 0.0

    @classmethod
    def of(cls, records: Iterable[UsageRecord]) -> Spend:
        t = summarize(records).total
        cost = None if t.unpriced else t.cost
        return cls(t.calls, t.input, t.output, t.cache_read, t.cache_write, cost)

    def __add__(self, other: Spend) -> Spend:
        cost = None if self.cost is None or other.cost is None else self.cost + other.cost
        return Spend(
            self.calls + other.calls,
            self.input + other.input,
            self.output + other.output,
            self.cache_read + other.cache_read,
            self.cache_write + other.cache_write,
            cost,
        )

    @property
    def prompt(self) -> int:
        return self.input + self.cache_read + self.cache_write

    @property
    def cache_share(self) -> float | None:
        """The share of prompt tokens read from the cache."""
        return self.cache_read / self.prompt if self.prompt else None

    def line(self) -> str:
        share = "-" if self.cache_share is None else f"{self.cache_share:.0%}"
        cost = "price unknown" if self.cost is None else f"${self.cost:,.4f}"
        return (
            f"{self.calls:,} calls · {_tokens(self.prompt)} in, {_tokens(self.output)} out · "
            f"cache {share} · {cost}"
        )


@dataclass
class Side:
    """One contestant's answers: evertalk's turns, or the baseline's calls."""

    name: str
    answers: list[Answer] = field(default_factory=list)

    def recall(self, answers: Sequence[Answer] | None = None) -> tuple[int, int]:
        chosen = self.answers if answers is None else answers
        return sum(a.outcome == "right" for a in chosen), len(chosen)

    def by(self, key: str) -> dict[str, tuple[int, int]]:
        groups: dict[str, list[Answer]] = {}
        for answer in self.answers:
            groups.setdefault(getattr(answer, key), []).append(answer)
        order = sorted(groups, key=bucket_order if key == "bucket" else str)
        return {name: self.recall(groups[name]) for name in order}

    def zooms(self) -> float | None:
        return sum(a.zooms for a in self.answers) / len(self.answers) if self.answers else None


@dataclass
class Report:
    version: str
    seed: int | None
    messages: int
    facts: int
    provider: str
    model: str
    memory_model: str
    baseline_bytes: int
    evertalk: Side = field(default_factory=lambda: Side("evertalk"))
    baseline: Side = field(default_factory=lambda: Side("baseline"))
    building: Spend = field(default_factory=Spend)
    asking: Spend = field(default_factory=Spend)
    baseline_spend: Spend = field(default_factory=Spend)
    dataset: str | None = None
    stopped: str | None = None  # where Ctrl+C stopped it
    notes: list[str] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        sides = {}
        for side in (self.evertalk, self.baseline):
            right, asked = side.recall()
            sides[side.name] = {
                "recall": _share(right, asked),
                "right": right,
                "asked": asked,
                "by_age": {k: _group(v) for k, v in side.by("bucket").items()},
                "by_kind": {k: _group(v) for k, v in side.by("kind").items()},
                "zooms_per_question": side.zooms() if side.name == "evertalk" else None,
                "answers": [asdict(a) | {"bucket": a.bucket} for a in side.answers],
            }
        spends = {
            "building": self.building,
            "asking": self.asking,
            "baseline": self.baseline_spend,
        }
        return {
            "version": self.version,
            "seed": self.seed,
            "dataset": self.dataset,
            "messages": self.messages,
            "facts": self.facts,
            "provider": self.provider,
            "model": self.model,
            "memory_model": self.memory_model,
            "baseline_bytes": self.baseline_bytes,
            "stopped": self.stopped,
            "notes": self.notes,
            "cost": {
                name: asdict(spend) | {"cache_share": spend.cache_share}
                for name, spend in spends.items()
            },
            **sides,
        }

    def table(self) -> list[str]:
        source = f"dataset {self.dataset}" if self.dataset else f"seed {self.seed}"
        lines = [
            f"evertalk bench recall · evertalk {self.version} · {source} · "
            f"{self.messages:,} messages · {self.facts:,} questions",
            f"turn model {self.model} ({self.provider}) · memory model {self.memory_model} · "
            f"baseline: the newest {self.baseline_bytes:,} bytes of the log, no tools",
            "",
            f"{'':22}{'evertalk':>16}{'baseline':>16}",
            _row("recall", self.evertalk.recall(), self.baseline.recall()),
        ]
        mine, theirs = self.evertalk.by("bucket"), self.baseline.by("bucket")
        for name in sorted(set(mine) | set(theirs), key=bucket_order):
            lines.append(_row(f"  age {name}", mine.get(name), theirs.get(name)))
        mine, theirs = self.evertalk.by("kind"), self.baseline.by("kind")
        for name in sorted(set(mine) | set(theirs)):
            lines.append(_row(f"  kind {name}", mine.get(name), theirs.get(name)))
        zooms = self.evertalk.zooms()
        lines.append(
            f"{'zooms per question':22}{'-' if zooms is None else f'{zooms:.1f}':>16}{'-':>16}"
        )
        lines += [
            "",
            f"building   {self.building.line()}",
            f"asking     {self.asking.line()}",
            f"baseline   {self.baseline_spend.line()}",
        ]
        if self.stopped:
            lines.append(f"stopped by Ctrl+C {self.stopped}: the figures cover what was done")
        lines += [f"note: {note}" for note in self.notes]
        return lines


def _row(label: str, mine: tuple[int, int] | None, theirs: tuple[int, int] | None) -> str:
    return f"{label:22}{_cell(mine):>16}{_cell(theirs):>16}"


def _cell(figures: tuple[int, int] | None) -> str:
    if figures is None or not figures[1]:
        return "-"
    right, asked = figures
    return f"{right}/{asked} {right / asked:4.0%}"


def _share(right: int, asked: int) -> float | None:
    return right / asked if asked else None


def _group(figures: tuple[int, int]) -> dict[str, Any]:
    return {"right": figures[0], "asked": figures[1], "recall": _share(*figures)}


def _tokens(count: int) -> str:
    if count >= 1_000_000:
        return f"{count / 1e6:.1f}M"
    if count >= 1_000:
        return f"{count / 1e3:.1f}K"
    return str(count)
