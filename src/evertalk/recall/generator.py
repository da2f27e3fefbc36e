"""The generated chat: N messages of ordinary agent work with K planted facts, and a question
for each (SPEC §14).

Deterministic by seed: one `random.Random(seed)` draws everything, in a fixed order, and no
step depends on the order of a dict or a set, so that the same seed writes the same chat and
questions byte for byte. The facts are spread over ages (how many messages before the
questions they were said) on a geometric scale, from a few messages to the whole chat, and
their kinds are dealt in shuffled rounds so that each age gets a mix.
"""

from __future__ import annotations

import json
import math
import random
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Final

from evertalk.recall import filler, vocab

START: Final = datetime(2026, 3, 2, 9, 0, tzinfo=UTC)
TWO_IDS: Final = frozenset({"tool_output", "second_page"})
"""Kinds whose fact takes two log ids: a call and its output, a paste's two pages."""
PATTERN: Final = ("user", "ever", "tool", "echo", "tool", "echo", "ever")
"""The rhythm of ordinary work: a request, a reply, tool calls with their output."""
PASTE_CHANCE: Final = 1 / 60
MIN_MESSAGES_PER_FACT: Final = 6


@dataclass(frozen=True)
class Message:
    id: int  # its first id in the log
    kind: str  # user, ever, tool or echo
    text: str
    date: str  # ISO 8601 with its offset
    pages: int  # how many log messages it becomes (SPEC §1.6)


@dataclass(frozen=True)
class Question:
    number: int
    kind: str
    topic: str  # the codename the fact and the question share
    text: str
    expected: str
    wrong: tuple[str, ...]  # values that score as a wrong recall (a correction's older one)
    message: int | None  # the log id of the statement that answers it
    age: int | None  # log messages from that statement to the end of the chat


@dataclass(frozen=True)
class Chat:
    seed: int
    messages: tuple[Message, ...]
    questions: tuple[Question, ...]

    @property
    def size(self) -> int:
        """The messages of the log (a long paste counts its pages)."""
        return sum(message.pages for message in self.messages)

    def chat_jsonl(self) -> str:
        return "".join(
            json.dumps(
                {"i": m.id, "kind": m.kind, "text": m.text, "date": m.date}, ensure_ascii=False
            )
            + "\n"
            for m in self.messages
        )

    def questions_jsonl(self) -> str:
        return "".join(
            json.dumps(question_record(q), ensure_ascii=False) + "\n" for q in self.questions
        )


def question_record(question: Question) -> dict[str, object]:
    return {
        "number": question.number,
        "kind": question.kind,
        "topic": question.topic,
        "question": question.text,
        "expected": question.expected,
        "wrong": list(question.wrong),
        "message": question.message,
        "age": question.age,
    }


@dataclass(frozen=True)
class _Slot:
    """What a planned log id holds: a fact's statement, or its older value (a correction)."""

    fact: int
    role: str  # "fact", "older", "call" (the tool call before a tool-output fact), "page1"


@dataclass(frozen=True)
class _Fact:
    """A planted fact: what it is about, its kind, its value and the older one it corrects."""

    name: str
    kind: str
    value: str
    older: str | None


def generate(messages: int, facts: int, seed: int) -> Chat:
    """The chat of `messages` log messages with `facts` planted facts, for `seed`."""
    if facts < 1:
        raise ValueError("--facts must be at least 1")
    if messages < MIN_MESSAGES_PER_FACT * facts:
        raise ValueError(
            f"--messages must be at least {MIN_MESSAGES_PER_FACT} per fact "
            f"({MIN_MESSAGES_PER_FACT * facts} for {facts} facts)"
        )
    rng = random.Random(seed)
    names = codenames(rng, facts)
    kinds = deal_kinds(rng, facts)
    values = [draw_values(rng, kind) for kind in kinds]
    plan, spots = place(rng, messages, kinds)
    planted = [_Fact(n, k, v, o) for n, k, (v, o) in zip(names, kinds, values, strict=True)]
    written = _write(rng, messages, plan, planted)
    questions = []
    for number, index in enumerate(sorted(range(facts), key=lambda j: spots[j])):
        fact = planted[index]
        questions.append(
            Question(
                number=number + 1,
                kind=fact.kind,
                topic=fact.name,
                text=vocab.FACTS[fact.kind][1].format(c=fact.name),
                expected=fact.value,
                wrong=(fact.older,) if fact.older else (),
                message=spots[index],
                age=messages - spots[index],
            )
        )
    return Chat(seed, tuple(written), tuple(questions))


def codenames(rng: random.Random, count: int) -> list[str]:
    """`count` made-up names, none inside another or inside any text of the vocabulary."""
    corpus = " ".join(_all_vocabulary()).lower()
    names: list[str] = []
    while len(names) < count:
        parts = [filler.pick(rng, vocab.SYLLABLES) for _ in range(rng.choice((2, 3)))]
        name = "".join(parts).capitalize()
        low = name.lower()
        if len(name) < 6 or low in corpus:
            continue
        if any(low in other.lower() or other.lower() in low for other in names):
            continue
        names.append(name)
    return names


def _all_vocabulary() -> list[str]:
    texts: list[str] = []
    for name in dir(vocab):
        value = getattr(vocab, name)
        if isinstance(value, tuple):
            texts += [item for item in value if isinstance(item, str)]
    for statement, question in vocab.FACTS.values():
        texts += [statement, question]
    return sorted(texts)


def deal_kinds(rng: random.Random, count: int) -> list[str]:
    """The kinds in shuffled rounds of all eight."""
    kinds: list[str] = []
    while len(kinds) < count:
        round_ = list(vocab.KINDS)
        rng.shuffle(round_)
        kinds += round_
    return kinds[:count]


def draw_values(rng: random.Random, kind: str) -> tuple[str, str | None]:
    """The fact's value, and the older value it overrides (a correction's alone)."""
    if kind == "decision":
        return filler.pick(rng, vocab.DECISIONS), None
    if kind == "number":
        return f"{rng.randint(1_200, 98_000):,}", None
    if kind == "identifier":
        prefix = filler.pick(rng, ("OPS", "INC", "SUP", "REL"))
        return f"{prefix}-{rng.randint(1000, 9999)}{filler.pick(rng, 'bcdfghkmnpqrstvwxz')}", None
    if kind == "name":
        return filler.pick(rng, vocab.PEOPLE), None
    if kind == "preference":
        return filler.pick(rng, vocab.PREFERENCES), None
    if kind == "correction":
        old, new = rng.sample(vocab.REGIONS, 2)
        return new, old
    if kind == "tool_output":
        digits = "".join(filler.pick(rng, "0123456789abcdef") for _ in range(11))
        return filler.pick(rng, "abcdef") + digits, None
    return filler.pick(rng, vocab.HOSTS), None


def target_ages(rng: random.Random, messages: int, count: int) -> list[int]:
    """Ages spread on a geometric scale from 2 to the whole chat, one per equal step."""
    low, high = math.log(2), math.log(messages - 1)
    ages = []
    for k in range(count):
        share = (k + rng.random()) / count
        ages.append(max(2, min(messages - 1, round(math.exp(low + (high - low) * share)))))
    return ages


def place(
    rng: random.Random, messages: int, kinds: list[str]
) -> tuple[dict[int, _Slot], list[int]]:
    """The log ids that hold each fact (its statement's id in `spots`), on free ids nearest
    their target ages."""
    plan: dict[int, _Slot] = {}
    spots = [0] * len(kinds)
    ages = target_ages(rng, messages, len(kinds))
    order = list(range(len(kinds)))
    rng.shuffle(order)  # which kind gets which age
    for fact, age in zip(order, ages, strict=True):
        kind = kinds[fact]
        spot = _free(plan, messages - age, messages, 2 if kind in TWO_IDS else 1, lowest=2)
        spots[fact] = spot
        plan[spot] = _Slot(fact, "fact")
        if kind == "tool_output":
            plan[spot - 1] = _Slot(fact, "call")
        elif kind == "second_page":
            plan[spot - 1] = _Slot(fact, "page1")
        elif kind == "correction":
            wanted = rng.randint(0, max(0, spot - 2))
            plan[_free(plan, wanted, spot, 1, lowest=0)] = _Slot(fact, "older")
    return plan, spots


def _free(plan: dict[int, _Slot], wanted: int, end: int, width: int, lowest: int) -> int:
    """The free id nearest `wanted` (below `end`) with `width - 1` free ids before it."""
    for distance in range(end + 1):
        for spot in (wanted - distance, wanted + distance):
            first = spot - width + 1
            if (
                first >= lowest
                and spot < end
                and all(i not in plan for i in range(first, spot + 1))
            ):
                return spot
    raise ValueError("too many facts for the messages: use more --messages")


def _write(
    rng: random.Random,
    messages: int,
    plan: dict[int, _Slot],
    planted: list[_Fact],
) -> list[Message]:
    out: list[Message] = []
    when = START
    beat = 0
    last_tool = "shell"
    log_id = 0
    while log_id < messages:
        when += timedelta(seconds=rng.randint(20, 900))
        slot = plan.get(log_id)
        pages = 1
        if slot is not None:
            kind, text, pages = _planted(rng, slot.role, planted[slot.fact])
        elif _paste_fits(rng, plan, log_id, messages):
            kind, text, pages = "user", filler.paste(rng), 2
        else:
            kind = PATTERN[beat % len(PATTERN)]
            beat += 1
            if kind == "tool":
                text, last_tool = filler.tool_call(rng)
            elif kind == "echo":
                text = filler.tool_output(rng, last_tool)
            else:
                text = filler.user_ask(rng) if kind == "user" else filler.ever_reply(rng)
        out.append(Message(log_id, kind, text, when.isoformat(), pages))
        log_id += pages
    return out


def _paste_fits(rng: random.Random, plan: dict[int, _Slot], log_id: int, messages: int) -> bool:
    return rng.random() < PASTE_CHANCE and log_id + 1 < messages and log_id + 1 not in plan


def _planted(rng: random.Random, role: str, fact: _Fact) -> tuple[str, str, int]:
    """(kind, text, pages) of a planned id: `fact`'s message in this `role` (see `_Slot`)."""
    kind, name = fact.kind, fact.name
    statement = vocab.FACTS[kind][0].format(c=name, v=fact.value)
    if role == "older":
        return "ever", filler.padded(rng, vocab.CORRECTION_FIRST.format(c=name, v=fact.older)), 1
    if role == "call":
        command = {"command": f"make build TARGET={name.lower()}"}
        return "tool", f"shell {json.dumps(command, separators=(',', ':'))}", 1
    if role == "page1":
        return "user", filler.paste(rng, planted=statement), 2
    if kind == "tool_output":
        lines = [filler.log_line(rng) for _ in range(rng.randint(8, 16))]
        lines.insert(rng.randint(2, len(lines)), statement)
        return "echo", "shell: " + "\n".join(lines), 1
    speaker = "ever" if kind == "number" else "user"
    return speaker, filler.padded(rng, statement), 1
