"""What a window shows of the log (`tui/shown.py`): rows touched by events become a part with
the messages the next `logged` frame holds, a row touched again joins its parts, and a lost
connection takes back everything from the first message under way."""

from __future__ import annotations

from evertalk.client.remote import Message
from evertalk.tui.shown import ShownLog
from evertalk.tui.widgets import NoteRow


def message(i: int, kind: str = "user") -> Message:
    return Message(i, kind, f"message {i}")


def test_touched_rows_show_the_messages_logged_next() -> None:
    shown = ShownLog(2)
    question, reply = NoteRow("q"), NoteRow("r")
    shown.touch(question, reply)
    assert shown.logged(4, [message(2), message(3, "ever")]) == []
    (part,) = shown.parts_with([3])
    assert part.rows == [question, reply] and sorted(part.records) == [2, 3]
    assert shown.position == 4


def test_messages_no_event_drew_are_for_the_window_to_draw() -> None:
    shown = ShownLog(2)
    found = shown.logged(3, [message(2)])
    assert found == [message(2)] and shown.parts_with([2]) == []


def test_a_row_touched_again_joins_its_parts() -> None:
    shown = ShownLog(0)
    reply, tool = NoteRow("reply"), NoteRow("tool")
    shown.touch(reply)
    shown.logged(1, [message(0, "ever")])
    shown.touch(tool)
    shown.logged(2, [message(1, "tool")])
    assert len(shown.parts()) == 2
    shown.touch(reply, tool)  # the turn ended: one stretch of the log
    shown.logged(2, [])
    (part,) = shown.parts()
    assert sorted(part.records) == [0, 1] and set(part.rows) == {reply, tool}


def test_during_a_turn_a_stretch_no_row_touched_goes_with_the_next() -> None:
    shown = ShownLog(0)
    row = NoteRow("reply")
    assert shown.logged(1, [message(0, "ever")], turning=True) == []
    shown.touch(row)
    shown.logged(2, [message(1, "ever")], turning=True)
    (part,) = shown.parts()
    assert sorted(part.records) == [0, 1]


def test_a_lost_connection_takes_back_what_was_under_way() -> None:
    shown = ShownLog(0)
    before, opening, reply = NoteRow("before"), NoteRow("opening"), NoteRow("reply")
    shown.drawn([(before, [message(0), message(1, "ever")])])
    shown.position = 2
    shown.touch(opening)
    shown.logged(3, [message(2)])
    shown.touch(reply)  # streaming: not logged yet
    since, gone = shown.unshown([opening])
    assert since == 2
    assert set(gone) == {opening, reply}
    shown.forget_rows(gone)
    assert shown.parts_with([2]) == [] and shown.parts_with([0]) != []


def test_a_part_on_both_sides_of_the_position_goes_whole() -> None:
    shown = ShownLog(0)
    early, late = NoteRow("early"), NoteRow("late")
    shown.drawn([(early, [message(0), message(5)])])
    shown.drawn([(late, [message(3)])])
    shown.position = 6
    since, gone = shown.unshown([late])
    assert since == 0 and set(gone) == {early, late}
