"""Collecting a long output in bounded memory and clipping it exactly as SPEC §1.5 says.

A command can print gigabytes; the clipped text only ever shows its first and last few thousand
characters and the exact count of what was cut, so that is all a ClipBuffer keeps.
"""

from __future__ import annotations

from evertalk.memory.text import MESSAGE_LIMIT, clip_note, clip_output, clip_shape


class ClipBuffer:
    """Text fed in pieces; `text()` equals `clip_output(all of it, limit)`.

    Keeps the first `limit` characters and at least the last `limit` (at most 3 × `limit` in all),
    and counts every character.
    """

    def __init__(self, limit: int = MESSAGE_LIMIT) -> None:
        self.limit = limit
        self.total = 0
        self._head: list[str] = []
        self._head_len = 0
        self._tail: list[str] = []
        self._tail_len = 0
        self._dropped = 0  # characters between head and tail that were let go

    def feed(self, piece: str) -> None:
        if not piece:
            return
        self.total += len(piece)
        room = self.limit - self._head_len
        if room > 0:
            taken = piece[:room]
            self._head.append(taken)
            self._head_len += len(taken)
            piece = piece[room:]
        if not piece:
            return
        self._tail.append(piece)
        self._tail_len += len(piece)
        if self._tail_len > 2 * self.limit:
            tail = "".join(self._tail)
            self._dropped += len(tail) - self.limit
            self._tail = [tail[-self.limit :]]
            self._tail_len = self.limit

    def ends_with_newline(self) -> bool:
        last = self._tail[-1] if self._tail else self._head[-1] if self._head else ""
        return last.endswith("\n")

    def text(self) -> str:
        head = "".join(self._head)
        tail = "".join(self._tail)
        if not self._dropped:
            return clip_output(head + tail, self.limit)
        keep_head, keep_tail, cut = clip_shape(self.total, self.limit)
        return f"{head[:keep_head]}\n{clip_note(cut)}\n{tail[len(tail) - keep_tail :]}"
