"""The request layout: the view in 4-line blocks, cache marks where SPEC §7 puts them.

Turns (SPEC §6.2):       [tools] [system, marked*] [user: view blocks, tail] [the turn's steps]
Compactions (SPEC §4.2): [tools] [system, marked] [user: context blocks, task] [follow-ups]

* when the view is too short for all three view marks (`marks_system`). Subagents use the turns'
layout.

Everything here is a pure function of its arguments, so the same view prefix always gives the
same blocks, byte for byte, and the prompt cache can read them back.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from dataclasses import replace
from typing import Any

from .base import Image, Message, Part, Request, Text, Thinking, Tool, ToolResult, ToolUse

BLOCK_LINES = 4
"""Lines per whole view block (SPEC §7: blocks of 16 lines left up to 15 lines unread)."""

MARK_REACH = 20
"""How far back (in blocks) Anthropic looks from a mark for an earlier cache entry."""

MAX_MARKS = 4
"""Anthropic answers 400 to a request with more cache breakpoints than this."""

SEPARATOR = "\n"
"""Starts the block after the view's `</chat>` (which has no newline of its own): some APIs join
text blocks with nothing between them (SPEC §6.2). The layout adds it; callers pass the turn's
header and a compaction's task without it."""


def view_blocks(rendered: str) -> list[str]:
    """The rendered view cut into pieces that concatenate back to it exactly.

    Each whole block holds 4 lines that each end in `\\n` (`<chat>` is the first line); the last
    piece holds the remaining 0–3 lines and `</chat>`, with no trailing newline. A view that only
    grows keeps all its earlier whole blocks byte-identical.
    """
    lines = rendered.split("\n")
    head, last = lines[:-1], lines[-1]
    whole = len(head) // BLOCK_LINES
    blocks = [
        "".join(line + "\n" for line in head[i * BLOCK_LINES : (i + 1) * BLOCK_LINES])
        for i in range(whole)
    ]
    rest = head[whole * BLOCK_LINES :]
    blocks.append("".join(line + "\n" for line in rest) + last)
    return blocks


def turn_marks(whole_blocks: int) -> list[int]:
    """The view blocks a turn marks, ascending: the last whole block and the blocks 20 and 40
    before it, where they exist (SPEC §7). The request end is marked separately."""
    if whole_blocks <= 0:
        return []
    last = whole_blocks - 1
    return [i for i in (last - 2 * MARK_REACH, last - MARK_REACH, last) if i >= 0]


def marks_system(whole_blocks: int) -> bool:
    """Whether a turn also marks the end of its tools and system prompt: only with a slot to
    spare, when the block 20 or 40 before the view's last whole block does not exist, so that
    the view marks keep their priority.

    A young chat's view blocks change from turn to turn, and nothing before its end mark was
    ever written: without this mark its first turns read nothing from the cache, not even the
    ~2,000 tokens of tools and system prompt that never change."""
    return len(turn_marks(whole_blocks)) + 2 <= MAX_MARKS  # + this mark and the request end


def turn_request(
    model: str,
    system: str,
    tools: list[Tool],
    rendered_view: str,
    tail: Sequence[Part],
    steps: Sequence[Message],
    max_tokens: int,
    effort: str | None = None,
    cache_key: str | None = None,
) -> Request:
    """One call of a turn (or of a subagent): the tools and system prompt (marked if
    `marks_system`), the view (marked), the tail (header, message, images; the separator is
    added before it), then the turn's own steps so far, with the request-end mark on the very
    last block."""
    blocks = view_blocks(rendered_view)
    whole = len(blocks) - 1
    marks = set(turn_marks(whole))
    view_parts: list[Part] = [Text(block, mark=i in marks) for i, block in enumerate(blocks)]
    first = Message("user", [*view_parts, *_after_view([_unmarked(part) for part in tail])])
    messages = [first, *(Message(step.role, [_unmarked(p) for p in step.parts]) for step in steps)]
    request = Request(
        model=model,
        system=[Text(system, mark=marks_system(whole))],
        tools=list(tools),
        messages=_mark_end(messages),
        max_tokens=max_tokens,
        effort=effort,
        cache_key=cache_key,
    )
    check_marks(request)
    return request


def compaction_request(
    model: str,
    system: str,
    tools: list[Tool],
    rendered_context: str,
    task: str,
    followups: Sequence[tuple[str, str]],
    max_tokens: int,
    effort: str | None = None,
    cache_key: str | None = None,
) -> Request:
    """One try of a compaction: the turns' tools and system prompt (marked), the context
    blocks (last whole one marked) and the task (the separator added before it), then each
    (reply, follow-up) of the size loop; `tool_choice` none, the request-end mark on the last
    block."""
    blocks = view_blocks(rendered_context)
    last_whole = len(blocks) - 2
    parts: list[Part] = [Text(block, mark=i == last_whole) for i, block in enumerate(blocks)]
    messages = [Message("user", [*parts, *_after_view([Text(task)])])]
    for reply, followup in followups:
        messages.append(Message("assistant", [Text(reply)]))
        messages.append(Message("user", [Text(followup)]))
    request = Request(
        model=model,
        system=[Text(system, mark=True)],
        tools=list(tools),
        messages=_mark_end(messages),
        max_tokens=max_tokens,
        tool_choice="none",
        effort=effort,
        cache_key=cache_key,
    )
    check_marks(request)
    return request


def count_marks(request: Request) -> int:
    return sum(1 for _ in _marked(request))


def check_marks(request: Request) -> None:
    """Refuse a request with more than 4 cache marks: the API would answer 400."""
    marks = count_marks(request)
    if marks > MAX_MARKS:
        raise ValueError(f"a request may carry at most {MAX_MARKS} cache marks, not {marks}")


def prefix_keys(request: Request) -> list[str]:
    """One key per marked block, in request order: `model:hash`, the hash covering the model and
    the exact content of everything up to and including that block (tools, system, messages).
    Two calls with equal keys write the same cache entry (SPEC §4.6).

    The marks themselves are not part of a key (moving a mark does not change the cached bytes).
    A key inside the messages also covers `tool_choice` and the effort, whose changes invalidate
    Anthropic's cached message blocks though not the tools and system prompt.
    """
    hasher = hashlib.sha256()
    keys: list[str] = []

    def key() -> str:
        return f"{request.model}:{hasher.copy().hexdigest()}"

    def feed(*item: Any) -> None:
        hasher.update(_dumps(list(item)).encode("utf-8", "surrogatepass"))
        hasher.update(b"\n")  # never inside compact JSON, so items cannot run together

    feed("model", request.model)
    for tool in request.tools:
        feed("tool", tool.name, tool.description, tool.input_schema)
    for block in request.system:
        feed("system", block.text)
        if block.mark:
            keys.append(key())
    feed("options", request.tool_choice, request.effort)
    for message in request.messages:
        feed("message", message.role)
        for part in message.parts:
            feed("part", part_content(part))
            if _is_marked(part):
                keys.append(key())
    return keys


def part_content(part: Part) -> dict[str, Any]:
    """A part as plain data, without its mark."""
    if isinstance(part, Text):
        return {"type": "text", "text": part.text}
    if isinstance(part, Image):
        return {"type": "image", "media_type": part.media_type, "data": part.data}
    if isinstance(part, Thinking):
        return {
            "type": "thinking",
            "text": part.text,
            "signature": part.signature,
            "redacted": part.redacted,
        }
    if isinstance(part, ToolUse):
        return {"type": "tool_use", "id": part.id, "name": part.name, "input": part.input}
    return {
        "type": "tool_result",
        "tool_use_id": part.tool_use_id,
        "content": [part_content(item) for item in part.content],
        "is_error": part.is_error,
    }


def _dumps(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def _is_marked(part: Part) -> bool:
    return isinstance(part, Text | Image | ToolResult) and part.mark


def _marked(request: Request) -> list[Part]:
    blocks: list[Part] = [block for block in request.system if block.mark]
    for message in request.messages:
        blocks.extend(part for part in message.parts if _is_marked(part))
    return blocks


def _after_view(parts: list[Part]) -> list[Part]:
    """The separator at the start of what follows the view: on its first text, or as a text
    of its own before an image."""
    if not parts:
        return parts
    head = parts[0]
    if isinstance(head, Text):
        return [replace(head, text=SEPARATOR + head.text), *parts[1:]]
    return [Text(SEPARATOR), *parts]


def _unmarked(part: Part) -> Part:
    if isinstance(part, Text | Image | ToolResult) and part.mark:
        return replace(part, mark=False)
    return part


def _mark_end(messages: list[Message]) -> list[Message]:
    """Put the request-end mark on the last block of the last message (it moves as a loop
    grows: each call is laid out afresh, earlier end marks dropped)."""
    if not messages or not messages[-1].parts:
        return messages
    last = messages[-1]
    end = last.parts[-1]
    if not isinstance(end, Text | Image | ToolResult):
        raise ValueError("a request must end with a text, image or tool result block")
    return [*messages[:-1], Message(last.role, [*last.parts[:-1], replace(end, mark=True)])]
