"""The row of a model call that is tried again: it counts down to the next try, once a second,
and says how to stop the turn instead (a bad hour at the provider can mean minutes of tries)."""

from __future__ import annotations

import math
import time

from textual.timer import Timer
from textual.widget import Widget

from evertalk.protocol.events import Retrying
from evertalk.tui.widgets import NoteRow

STOP_KEYS = "Ctrl+C or Esc stops the turn"


def countdown_line(frame: Retrying, left: float) -> str:
    """`retrying (2/10) in 7 s: server overloaded (529); Ctrl+C or Esc stops the turn` while
    it counts down; `retrying (2/10) after 7.0 s: server overloaded (529)` once it is due."""
    when = f"in {math.ceil(left)} s" if left > 0 else f"after {frame.delay:.1f} s"
    line = f"retrying ({frame.attempt}/{frame.of}) {when}: {frame.why}"
    if frame.replaces:
        line += "; the reply starts over"
    return f"{line}; {STOP_KEYS}" if left > 0 else line


class Countdown:
    """A retry's row, its text brought up to date each second until the try is due."""

    def __init__(self, owner: Widget, row: NoteRow, frame: Retrying) -> None:
        self.row = row
        self.frame = frame
        self.due = time.monotonic() + frame.delay
        self._timer: Timer | None = owner.set_interval(1.0, self.tick)

    @property
    def running(self) -> bool:
        return self._timer is not None

    def tick(self) -> None:
        left = self.due - time.monotonic()
        self.row.set_text(countdown_line(self.frame, left))
        if left <= 0:
            self.stop()

    def stop(self) -> None:
        """No more ticks: the try is due, another came, or the turn ended; the row says
        when the call was tried again, without a count that would stand still."""
        if self._timer is not None:
            self._timer.stop()
            self._timer = None
            self.row.set_text(countdown_line(self.frame, 0))
