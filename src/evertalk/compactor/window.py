"""A compaction request within the compactor model's context window (SPEC §3.7).

The core bounds a context to the cview's ceiling (32,000 bytes by default), which today's hosted
models hold easily beside the tools, the system prompt and the task. A smaller window (a local
model's 8,192 or 32,768 tokens) may not: the oldest lines of the context are then left out too,
as many as it takes, and the output cap shrinks to a quarter of the window as a turn's does. A
node whose task alone does not fit is never sent; the compactor cuts it (SPEC §2.5).

Tokens are estimated from bytes as a turn estimates them: overestimating only leaves out a line
more, while a request over the window is refused by the API and would count as a failure.
"""

from __future__ import annotations

import json

from evertalk.memory.text import utf8_len
from evertalk.providers.base import BYTES_PER_TOKEN, Request, Text

FOLLOW_UP_ROOM = 4 * 2_048
"""Bytes kept free for the size loop's follow-ups (SPEC §4.4): up to four, each an over-long reply
sent back (cut to about a kilobyte, `tasks.sent_back`) and the follow-up that shows its first 512
bytes. One that still does not fit ends the loop, as a follow-up that got no shorter does."""

QUARTER = 4
"""A small window keeps three quarters for the prompt: the output cap is at most a quarter."""

REPLY_TOKENS = 1_000
"""The output cap of a compaction's reply. A line needs about 170 tokens; 1,000 leave room for a
model that writes a few lines before keeping to one, and stop one that rambles: a small local
model asked for 16,000 wrote to the end of its window, minutes a call, and its reply sent back
then overflowed the window."""

THINKING_TOKENS = 15_000
"""Added to the cap for a hosted model asked to think (an effort other than `none`): its thoughts
count against the cap (OpenAI's reasoning, Anthropic's adaptive thinking), and a small model was
measured keeping to the size only with thinking on (SPEC §4.7)."""


SMALL_REPLY_SHARE = 24
"""In a small window the reply's cap is at most a 24th of it (341 tokens of 8,192): a small
local model writes about 25 tokens a second on a laptop's CPU, and one that rambles to a longer
cap spends most of a call's time on words that are thrown away; a line needs about 170 tokens."""

REPLY_FLOOR = 320
"""The reply's cap is never made smaller than this: a line of 512 bytes in a script that takes
more tokens per byte (CJK, about 250 tokens), and a few words around it."""


def output_cap(max_tokens: int, window: int, thinking: bool = False) -> int:
    """The output cap of a call: the reply's cap (a sixteenth of a small window at most), and
    the room for thoughts when the model is asked to think; at most a quarter of the window."""
    reply = min(max_tokens, max(REPLY_FLOOR, window // SMALL_REPLY_SHARE))
    return min(reply + (THINKING_TOKENS if thinking else 0), window // QUARTER)


def thinks(effort: str | None, local: bool) -> bool:
    """Whether a compaction call is asked to think: an effort other than `none` on a hosted
    model. A local server's model is not told by the effort, and its thoughts, if it has them,
    share the reply's cap."""
    return not local and effort not in (None, "none")


def estimate(request: Request) -> int:
    """The tokens a request may take of the window: its prompt, estimated from its bytes, and
    its output cap. A compaction's messages hold text only."""
    size = sum(utf8_len(block.text) for block in request.system)
    for tool in request.tools:
        schema = json.dumps(tool.input_schema, ensure_ascii=False, separators=(",", ":"))
        size += utf8_len(tool.name) + utf8_len(tool.description) + utf8_len(schema)
    for message in request.messages:
        size += sum(utf8_len(part.text) for part in message.parts if isinstance(part, Text))
    return -(-size // BYTES_PER_TOKEN) + request.max_tokens


def context_room(bare: Request, window: int) -> int | None:
    """The bytes of context lines that fit beside a request sent with an empty context (`bare`),
    the follow-ups' room kept free; None when not even `bare` fits the window."""
    left = window - estimate(bare)
    if left < 0:
        return None
    return max(0, left * BYTES_PER_TOKEN - FOLLOW_UP_ROOM)


def newest_that_fit(lines: list[str], room: int) -> list[str]:
    """The newest rendered lines that fit in `room` bytes, each with its newline."""
    used = 0
    kept = 0
    for line in reversed(lines):
        used += utf8_len(line) + 1
        if used > room:
            break
        kept += 1
    return lines[len(lines) - kept :]
