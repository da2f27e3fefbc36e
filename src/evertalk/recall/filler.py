"""Ordinary agent work for the generated chat: requests, replies, tool calls and their output,
code, and long pastes that the log splits into pages (SPEC §1.6).

Every function draws from the `random.Random` it is given and from nothing else, so that a seed
gives the same texts on every machine and every run.
"""

from __future__ import annotations

import json
import random
from collections.abc import Sequence

from evertalk.memory.text import split_text
from evertalk.recall import vocab

PASTE_CHARS = (36_000, 50_000)
"""A long paste's length: two pages, since a page ends between characters 24,001 and 30,000."""
SECOND_PAGE_FROM = 33_000
"""Where a paste's planted line may start: past any end of the first page."""


def pick(rng: random.Random, items: Sequence[str]) -> str:
    return items[rng.randrange(len(items))]


def fill(rng: random.Random, template: str) -> str:
    """A template with its fields drawn from the vocabulary (unused draws cost nothing)."""
    return template.format(
        verb=pick(rng, vocab.VERBS),
        file=pick(rng, vocab.FILES),
        issue=pick(rng, vocab.ISSUES),
        service=pick(rng, vocab.SERVICES),
        topic=pick(rng, vocab.TOPICS),
    )


def prose(rng: random.Random, words: int) -> str:
    """A run of plain words from the filler text, as a sentence."""
    start = rng.randrange(len(vocab.WORDS))
    picked = [vocab.WORDS[(start + k) % len(vocab.WORDS)] for k in range(words)]
    return " ".join(picked).rstrip(";,") + "."


def user_ask(rng: random.Random) -> str:
    text = fill(rng, pick(rng, vocab.USER_ASKS))
    if rng.random() < 0.35:  # some requests come with context
        text += "\n\n" + prose(rng, rng.randint(40, 160))
    return text


def ever_reply(rng: random.Random) -> str:
    text = fill(rng, pick(rng, vocab.EVER_REPLIES))
    if rng.random() < 0.3:
        text += "\n\n```python\n" + code(rng, rng.randint(6, 18)) + "\n```"
    elif rng.random() < 0.3:
        text += "\n\n" + prose(rng, rng.randint(30, 120))
    return text


def code(rng: random.Random, lines: int) -> str:
    start = rng.randrange(len(vocab.CODE_LINES))
    picked = [vocab.CODE_LINES[(start + k) % len(vocab.CODE_LINES)] for k in range(lines)]
    text = "\n".join(picked)
    return text.format(name=pick(rng, vocab.NAMES), cls=pick(rng, vocab.CLASSES))


def tool_call(rng: random.Random) -> tuple[str, str]:
    """A tool call as the log keeps it (`name {json}`), and the tool's name."""
    name = pick(rng, ("shell", "shell", "read", "edit"))
    path = pick(rng, vocab.FILES)
    arguments: dict[str, str]
    if name == "shell":
        arguments = {"command": pick(rng, ("pytest -q ", "git diff --stat ", "wc -l ")) + path}
    elif name == "read":
        arguments = {"path": path}
    else:
        arguments = {"path": path, "old": "limit=100", "new": "limit=limit"}
    return f"{name} {json.dumps(arguments, separators=(',', ':'))}", name


def tool_output(rng: random.Random, name: str) -> str:
    """A tool's result as the log keeps it (`name: output`)."""
    if name == "read":
        return f"{name}: " + code(rng, rng.randint(8, 40))
    if name == "edit":
        return f"{name}: replaced 1 occurrence in {pick(rng, vocab.FILES)}"
    lines = [f"{pick(rng, vocab.TEST_NAMES)} PASSED" for _ in range(rng.randint(3, 30))]
    lines.append(f"{len(lines)} passed in {rng.randint(1, 90)}.{rng.randint(0, 99):02d}s")
    return f"{name}: " + "\n".join(lines)


def log_line(rng: random.Random) -> str:
    event = pick(rng, vocab.LOG_EVENTS).format(n=rng.randint(1, 4000))
    stamp = (
        f"2026-03-02T{rng.randint(0, 23):02d}:{rng.randint(0, 59):02d}:{rng.randint(0, 59):02d}Z"
    )
    return f"{stamp} {pick(rng, vocab.LOG_LEVELS)} {pick(rng, vocab.SERVICES)}: {event}"


def paste(rng: random.Random, planted: str | None = None) -> str:
    """A long paste of log lines, two pages in the log; `planted` goes on a line of its own
    on the second page."""
    target = rng.randint(*PASTE_CHARS)
    lines = [pick(rng, ("Here is the log from last night:", "The full output, as promised:"))]
    size = len(lines[0]) + 1
    while size < target:
        if planted is not None and size >= SECOND_PAGE_FROM:
            lines.append(planted)
            size += len(planted) + 1
            planted = None
            continue
        line = log_line(rng)
        lines.append(line)
        size += len(line) + 1
    text = "\n".join(lines)
    if len(split_text(text)) != 2:  # pragma: no cover - PASTE_CHARS keeps it to two pages
        raise AssertionError("a paste must be two pages")
    return text


def padded(rng: random.Random, statement: str, minimum: int = 700) -> str:
    """`statement` on a line of its own inside a message long enough to need a summary."""
    before = fill(rng, pick(rng, vocab.USER_ASKS))
    after = prose(rng, 30)
    while len((before + statement + after).encode()) < minimum:
        after += " " + prose(rng, 30)
    return f"{before}\n{statement}\n{after}"
