"""How long to wait before the next try to reach the database: each failure doubles the wait, up
to a ceiling, and a success starts it over.

No I/O, no clock and no randomness of its own: the caller sleeps, and the spread that keeps
several machines from trying all at once comes from the `jitter` it is given (a draw in
[0, 1], as `random.Random(...).random`), so that every delay can be checked in a test.
"""

from __future__ import annotations

import math
from collections.abc import Callable

SPREAD = 0.5
"""The part of a delay the jitter may take off: with it, a delay lies between half of its
nominal value and the whole of it."""


class Backoff:
    """The delays before successive tries: `first`, then each `factor` times the one before,
    never above `most`. With `jitter`, each delay is its nominal value less up to SPREAD of it,
    by the draw; the nominal values go on growing as without it."""

    def __init__(
        self,
        first: float = 0.5,
        most: float = 30.0,
        factor: float = 2,
        *,
        jitter: Callable[[], float] | None = None,
    ) -> None:
        if not (math.isfinite(first) and first > 0):
            raise ValueError(f"the first delay is a positive number of seconds, not {first}")
        if not (math.isfinite(most) and most >= first):
            raise ValueError(f"the longest delay ({most} s) is at least the first ({first} s)")
        if not (math.isfinite(factor) and factor >= 1):
            raise ValueError(f"the delays grow by a factor of at least 1, not {factor}")
        self.first = float(first)
        self.most = float(most)
        self.factor = float(factor)
        self.jitter = jitter
        self._nominal = self.first

    def next_delay(self) -> float:
        """The delay before the next try, in seconds (one more failure counted)."""
        nominal = self._nominal
        self._nominal = min(self.most, nominal * self.factor)
        if self.jitter is None:
            return nominal
        draw = self.jitter()
        if not 0 <= draw <= 1:
            raise ValueError(f"a jitter draw lies in [0, 1], not {draw}")
        return nominal * (1 - SPREAD * draw)

    def reset(self) -> None:
        """A try succeeded: the next failure waits `first` again."""
        self._nominal = self.first
