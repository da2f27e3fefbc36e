"""Scripted models for the recall benchmark's tests and its `make bench` figure (no tests of
their own).

- `summaries(names, drop_numbers)`: a compactor that keeps, in every line, each sentence of its
  input that names one of the facts' codenames (and, once they no longer fit a line, the
  codenames alone); with `drop_numbers` it leaves every number out of its lines.
- `reader(names, chat_end)`: a turn model that answers only from what its request holds: it
  finds the codename its question names, zooms into every line that mentions it (down to single
  messages), and answers with the sentence of the newest message line that mentions it. Lines
  of messages logged after the chat (earlier questions and their answers) are not read. Without
  tools (the baseline) it answers from the last line of the log that mentions it.

Both tell a compaction (tool_choice none), a turn (tools) and a baseline call (no tools) apart.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from typing import Any

from fakes import Behaviour, Call, Reply, Script, Text, ToolCall, sized_line, slow
from fakes.behaviours import Outcome

HEAD = re.compile(r"\d+\+\d+\|")
LINE = re.compile(r"^(\d+)\+(\d+)\|(.*)$", re.M)
SENTENCE = re.compile(r"(?<=[.!?])\s+|\n+")
NUMBER = re.compile(r"(?<![\w-])\d[\d,.]*\d(?![\w-])|(?<![\w-])\d(?![\w-])")
ROOM = 480
FILLER_LINE = 160


def is_compaction(call: Call) -> bool:
    return call.body.get("tool_choice") in ({"type": "none"}, "none")


def is_baseline(call: Call) -> bool:
    return not call.body.get("tools")


def summaries(names: Sequence[str], *, drop_numbers: bool = False) -> Behaviour:
    def behave(call: Call) -> Outcome:
        return Reply(pieces=(Text(summary(call.input_text, names, drop_numbers)),))

    return behave


def summary(text: str, names: Sequence[str], drop_numbers: bool) -> str:
    body = HEAD.sub(" ", text)
    keyed: list[str] = []
    for sentence in SENTENCE.split(body):
        sentence = " ".join(sentence.split())
        if sentence and sentence not in keyed and _named(sentence, names):
            keyed.append(sentence)
    if not keyed:
        line = sized_line(body, FILLER_LINE)
    else:
        line = " ".join(keyed)
        if len(line.encode()) > ROOM:
            line = "; ".join(name for name in names if name.lower() in body.lower())
    if drop_numbers:
        line = " ".join(NUMBER.sub("", line).split())
    return line.encode()[:ROOM].decode("utf-8", "ignore") or "work"


def _named(text: str, names: Iterable[str]) -> bool:
    low = text.lower()
    return any(name.lower() in low for name in names)


def reader(names: Sequence[str], chat_end: int) -> Behaviour:
    def behave(call: Call) -> Outcome:
        if is_baseline(call):
            return _baseline(call, names)
        chunks = _user_chunks(call.body)
        question = chunks[0].rsplit("</chat>", 1)[-1] if chunks else ""
        topic = next((n for n in names if n.lower() in question.lower()), None)
        if topic is None:
            return Reply(pieces=(Text("I cannot tell what you are asking about."),))
        mentions = [
            (int(i), int(n), text)
            for chunk in chunks
            for i, n, text in LINE.findall(chunk)
            if topic.lower() in text.lower() and int(i) < chat_end
        ]
        zoomed = _zoomed(call.body)
        todo = sorted({(i, n) for i, n, _ in mentions if n > 1 and (i, n) not in zoomed})
        if todo:
            calls = tuple(ToolCall("zoom", {"id": i, "n": n}) for i, n in todo)
            return Reply(pieces=calls)
        leaves = [(i, text) for i, n, text in mentions if n == 1]
        if not leaves:
            return Reply(pieces=(Text("Nothing in my memory says."),))
        return Reply(pieces=(Text(_sentence(max(leaves)[1], topic)),))

    return behave


def _baseline(call: Call, names: Sequence[str]) -> Outcome:
    text = "".join(t for role, t in call.turns if role == "user")
    log, _, question = text.rpartition("</log>")
    topic = next((n for n in names if n.lower() in question.lower()), None)
    said = [line for line in log.splitlines() if topic and topic.lower() in line.lower()]
    if topic is None or not said:
        return Reply(pieces=(Text("I do not know."),))
    return Reply(pieces=(Text(_sentence(said[-1], topic)),))


def _sentence(text: str, topic: str) -> str:
    found = [s for s in SENTENCE.split(text) if topic.lower() in s.lower()]
    return found[-1] if found else text


def _user_chunks(body: dict[str, Any]) -> list[str]:
    """The texts of the user messages, a text block or a tool result each."""
    chunks: list[str] = []
    for message in body.get("messages", []):
        if message.get("role") != "user":
            continue
        content = message.get("content")
        if isinstance(content, str):
            chunks.append(content)
            continue
        joined = ""
        for block in content:
            if block.get("type") == "text":
                joined += block["text"]
            elif block.get("type") == "tool_result":
                if joined:
                    chunks.append(joined)
                    joined = ""
                inner = block.get("content")
                parts = inner if isinstance(inner, list) else [{"text": inner or ""}]
                chunks.append("".join(str(p.get("text", "")) for p in parts))
        if joined:
            chunks.append(joined)
    return chunks


def _zoomed(body: dict[str, Any]) -> set[tuple[int, int]]:
    done: set[tuple[int, int]] = set()
    for message in body.get("messages", []):
        content = message.get("content")
        if message.get("role") != "assistant" or not isinstance(content, list):
            continue
        for block in content:
            if block.get("type") == "tool_use" and block.get("name") == "zoom":
                done.add((int(block["input"]["id"]), int(block["input"]["n"])))
    return done


def script(
    names: Sequence[str],
    chat_end: int,
    *,
    drop_numbers: bool = False,
    compaction_delay: float = 0.0,
) -> Script:
    """Compactions to `summaries` (each `compaction_delay` seconds late), turns and baseline
    calls to `reader`."""
    compactor = summaries(names, drop_numbers=drop_numbers)
    if compaction_delay:
        compactor = slow(compaction_delay, compactor)
    return Script(reader(names, chat_end)).route(is_compaction, compactor)
