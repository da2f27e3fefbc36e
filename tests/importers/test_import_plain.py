"""evertalk's own JSON Lines format: its mapping, its keys, and a round trip of any content."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st
from importer_helpers import OWN, only, pairs

from evertalk.importers import read_paths, record_line
from evertalk.importers.plain import ROLES, Role


def test_roles_map_to_kinds_and_texts_are_kept_as_given() -> None:
    reading = read_paths([OWN])
    conversation = only(reading)
    assert (conversation.source, conversation.id, conversation.title) == (
        "jsonl",
        "old-assistant",
        None,
    )
    assert pairs(conversation) == [  # no heading: the file is the user's own
        ("note", "Notes carried over from my old assistant."),
        ("user", "Remember: my sister's birthday is on 12 March."),
        ("ever", "Noted — 12 March. Je m'en souviendrai."),
        ("tool", 'calendar {"add":"Birthday (sister)","date":"03-12"}'),
        ("user", "ok"),
        ("user", "ok"),
    ]
    times = [m.time.isoformat() for m in conversation.messages]
    assert times[1] == "2023-11-20T09:01:10+01:00"
    assert times[3] == "2023-11-20T09:01:13+00:00"  # no zone given: UTC


def test_an_unknown_role_is_a_problem_and_a_blank_text_is_counted() -> None:
    reading = read_paths([OWN])
    assert [(p.file, p.line) for p in reading.problems] == [(str(OWN), 5)]
    assert "unknown role 'system'" in reading.problems[0].why
    assert reading.skipped["empty messages"] == 1


def test_keys_come_from_the_id_or_else_from_the_line_itself() -> None:
    keys = [m.key for m in only(read_paths([OWN])).messages]
    assert keys[1:4] == [
        "jsonl:old-assistant:m-1",
        "jsonl:old-assistant:m-2",
        "jsonl:old-assistant:3",
    ]
    assert keys[0].startswith("jsonl:old-assistant:")
    # the same line twice: two messages, the second key marked as a repeat
    assert keys[5] == keys[4] + "#1"
    assert len(set(keys)) == len(keys)


def test_a_line_added_elsewhere_leaves_the_other_keys_alone(tmp_path: Path) -> None:
    lines = OWN.read_text(encoding="utf-8").splitlines(keepends=True)
    before = [m.key for m in only(read_paths([OWN])).messages]
    grown = tmp_path / OWN.name
    added = record_line("note", "an earlier note", datetime(2023, 1, 1, tzinfo=UTC))
    grown.write_text("".join([added, *lines]), encoding="utf-8")
    after = [m.key for m in only(read_paths([grown])).messages]
    assert after[1:] == before


def test_a_missing_time_or_text_is_a_problem(tmp_path: Path) -> None:
    path = tmp_path / "notes.jsonl"
    path.write_text(
        '{"role": "user", "text": "no time"}\n'
        '{"role": "user", "time": "2024-01-01T00:00:00Z"}\n'
        '{"role": "user", "text": "fine", "time": "2024-01-01T00:00:00Z"}\n',
        encoding="utf-8",
    )
    reading = read_paths([path])
    assert [(p.line, p.why) for p in reading.problems] == [
        (1, "no valid time (ISO 8601)"),
        (2, "no text"),
    ]
    assert pairs(only(reading)) == [("user", "fine")]


ZONES = st.sampled_from(
    [UTC, timezone(timedelta(hours=2)), timezone(-timedelta(hours=5, minutes=30))]
)
RECORDS = st.lists(
    st.tuples(
        st.sampled_from(sorted(ROLES)),
        st.text(min_size=1).filter(str.strip),
        st.datetimes(
            min_value=datetime(1990, 1, 1), max_value=datetime(2090, 1, 1), timezones=ZONES
        ),
        st.booleans(),
    ),
    max_size=12,
)


@given(records=RECORDS)
def test_any_content_round_trips_and_reads_the_same_twice(
    tmp_path_factory: pytest.TempPathFactory, records: list[tuple[Role, str, datetime, bool]]
) -> None:
    folder = tmp_path_factory.mktemp("plain")
    path = folder / "export.jsonl"
    with path.open("w", encoding="utf-8") as file:
        for n, (role, text, time, with_id) in enumerate(records):
            file.write(record_line(role, text, time, f"id-{n}" if with_id else None))
    first = read_paths([path])
    second = read_paths([path])
    assert first.problems == []
    messages = first.conversations[0].messages if records else ()
    assert [(m.kind, m.text, m.time) for m in messages] == [
        (ROLES[role], text, time) for role, text, time, _ in records
    ]
    keys = [m.key for m in messages]
    assert len(set(keys)) == len(keys)
    assert keys == [m.key for c in second.conversations for m in c.messages]
