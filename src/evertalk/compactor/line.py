"""The size loop of a compaction (SPEC §4.4, §4.8), as a pure state machine: no I/O, no clock.

The compactor sends `SizeLoop.first_task`, then feeds each reply to `take`, which says what to do
next: ask again after the reply (a follow-up), store a line, or give up (the call fails).

Given the task's source, every line is checked against it (`grounding`). A line that states
what its input does not gets a follow-up saying what was wrong, as an over-long one does, but is
never kept: if no try gives a grounded line, the call fails as an unusable reply does, and the
node's third failure cuts it from its input (SPEC §2.5, §4.5), which cannot invent anything.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from evertalk.compactor.grounding import MIN_SHARED, Source, check
from evertalk.compactor.tasks import not_grounded, sent_back, too_long
from evertalk.memory.text import LINE_LIMIT, cut_utf8, flatten, utf8_len

MAX_TRIES = 5
"""At most this many model calls per compaction."""

MAX_REJECTIONS = 2
"""A loop ends at its second line not true to its input. A model that invents twice in the same
conversation rarely stops at the third ask, and a small local model's try takes long; the node's
next attempt starts afresh."""

_FENCE_LINE = re.compile(r"^[ \t]*(?:```+|~~~+)[^\n`~ \t]*[ \t]*$", re.MULTILINE)
_FENCE_EDGE = re.compile(r"^(?:```+|~~~+)|(?:```+|~~~+)$")
_HEAD = re.compile(r"^\d+\+\d+[ \t]*\|[ \t]*")
_BREAK = re.compile(r"; |[.!?] |[。！？]")
# the marks our own follow-ups show (`[CUT]`, `[CUT: 1,234 more bytes …]`): a model that copies
# one would keep it in its line
_MARK = re.compile(r"[ \t]*\[CUT\b[^\]\n]{0,80}\][ \t]*", re.IGNORECASE)


def process(reply: str) -> str:
    """A reply as a candidate line: surrounding whitespace stripped, code fences dropped, a copied
    `[CUT]` mark dropped, an `id+n|` head the model repeated dropped, every newline turned into
    a space."""
    text = _FENCE_LINE.sub("", reply.strip()).strip()
    text = _FENCE_EDGE.sub("", text).strip()
    text = _MARK.sub(" ", text).strip()
    text = _HEAD.sub("", text, count=1)
    return flatten(text).strip()


def cut_line(line: str) -> str:
    """`line` cut to fit in 512 bytes (SPEC §4.4 step 4); one that fits is returned as it is.

    The whole characters that fit in 512 bytes, shortened further to the last `; ` (cut before
    it) or sentence end (cut after its mark) when one begins within their last fifth, without
    trailing spaces. Never empty for a non-empty line.
    """
    if utf8_len(line) <= LINE_LIMIT:
        return line
    prefix = cut_utf8(line, LINE_LIMIT)
    size = utf8_len(prefix)
    # a mark may start on the prefix's last character and end just after it
    window = line[: len(prefix) + 1]
    end = len(prefix)
    for match in _BREAK.finditer(window):
        start = match.start()
        if start >= len(prefix):
            continue
        if 5 * utf8_len(prefix[:start]) >= 4 * size:
            end = start if match.group().startswith(";") else start + 1
    cut = prefix[:end].rstrip()
    return cut or prefix


@dataclass(frozen=True)
class FollowUp:
    """Send `text` as the next user message, in the same conversation as the reply, which goes
    back as `reply`: the processed line, cut when it is long (`tasks.sent_back`)."""

    text: str
    reply: str


@dataclass(frozen=True)
class Done:
    """Store `line`: 1–512 bytes. `trimmed` says it was cut from a longer line."""

    line: str
    trimmed: bool = False


@dataclass(frozen=True)
class Unusable:
    """No try gave a usable line: the compaction call fails (SPEC §4.5). `rejected` says why the
    latest line not true to its input was (None: no line was rejected, none was given)."""

    rejected: str | None = None


Next = FollowUp | Done | Unusable


class SizeLoop:
    """One compaction's tries. Send `first_task`, then pass each reply to `take`.

    `tries` counts the model calls made so far; `sizes` holds each processed reply's byte count
    (0 for an empty or thinking-only reply); `rejected`, why the latest reply's line was not true
    to its input (None: it was, or it was not checked). Without a `source`, lines are not checked.
    """

    def __init__(
        self,
        first_task: str,
        source: Source | None = None,
        min_shared: float = MIN_SHARED,
        max_rejections: int = MAX_REJECTIONS,
    ) -> None:
        self.first_task = first_task
        self.source = source
        self.min_shared = min_shared
        self.max_rejections = max_rejections
        self.tries = 0
        self.sizes: list[int] = []
        self.rejected: str | None = None
        self.rejections: list[str] = []
        self.result: Done | Unusable | None = None
        self._best: str | None = None  # the shortest over-long line so far (first among equals)
        self._best_size = 0

    @property
    def finished(self) -> bool:
        return self.result is not None

    def take(self, reply: str, thinking_only: bool = False) -> Next:
        """Account for one model call whose reply text is `reply`.

        `thinking_only` marks a reply that held thoughts but no text; it counts as empty.
        """
        if self.result is not None:
            raise RuntimeError("the size loop has already ended")
        self.tries += 1
        self.rejected = None
        line = "" if thinking_only else process(reply)
        size = utf8_len(line)
        self.sizes.append(size)
        if not line:
            return self._end()
        rejection = self._judge(line)
        if rejection is not None:
            return rejection
        if size <= LINE_LIMIT:
            return self._finish(Done(line))
        if self._best is not None and size >= self._best_size:
            return self._end()  # a follow-up that did not get shorter: asking again rarely helps
        self._best, self._best_size = line, size
        if self.tries >= MAX_TRIES:
            return self._end()
        return FollowUp(too_long(line), sent_back(line))

    def _judge(self, line: str) -> Next | None:
        """None for a grounded line (or with no source); else what follows its rejection."""
        if self.source is None:
            return None
        verdict = check(line, self.source, self.min_shared)
        if verdict.grounded:
            return None
        self.rejected = verdict.reason()
        self.rejections.append(self.rejected)
        if len(self.rejections) >= self.max_rejections or self.tries >= MAX_TRIES:
            return self._end()
        return FollowUp(not_grounded(verdict.missing, verdict.low_share), sent_back(line))

    def stop(self) -> Done | Unusable:
        """End the loop before the next try: the follow-up would not fit the model's window.
        As when a follow-up gets no shorter, the best line so far is kept and cut."""
        if self.result is not None:
            raise RuntimeError("the size loop has already ended")
        return self._end()

    def _end(self) -> Done | Unusable:
        if self._best is None:
            why = self.rejections[-1] if self.rejections else None
            return self._finish(Unusable(why))
        return self._finish(Done(cut_line(self._best), trimmed=True))

    def _finish(self, result: Done | Unusable) -> Done | Unusable:
        self.result = result
        return result
