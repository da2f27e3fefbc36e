"""The system prompt, the tool definitions and the turn header (SPEC §5, §6.2, §6.5–§6.7)."""

from __future__ import annotations

import inspect
import json
import re
import time
from datetime import UTC, datetime, timedelta, timezone

import pytest

from evertalk import prompts
from evertalk.memory.coarse import coarse_text
from evertalk.memory.text import PLACEHOLDER
from evertalk.prompts import (
    INSTRUCTIONS_HEADING,
    NO_TOOLS_HEADING,
    NO_TOOLS_NOTE,
    SECTION_HEADINGS,
    SYSTEM_PROMPT,
    TOOLS,
    TURN_MARKER,
    system_text,
    system_text_without_tools,
    turn_header,
)

# -- the system prompt --------------------------------------------------------------------------


def _sections() -> list[str]:
    """The prompt cut at its headings: the opening, then one text per heading, in order."""
    parts: list[str] = []
    rest = SYSTEM_PROMPT
    for heading in SECTION_HEADINGS:
        before, found, rest = rest.partition(f"\n\n{heading}\n\n")
        assert found, heading
        parts.append(before)
    return [*parts, rest]


def test_sections_in_spec_order() -> None:
    """An unheaded opening, then the view, the tools, turns and compactions (SPEC §5)."""
    assert len(SECTION_HEADINGS) == 4
    assert not SYSTEM_PROMPT.startswith("#")  # the opening comes first, with no heading
    headings = [line for line in SYSTEM_PROMPT.split("\n") if line.startswith("#")]
    assert headings == list(SECTION_HEADINGS)
    assert all(section.strip() for section in _sections())


def test_holds_the_markers() -> None:
    assert "`Compaction:`" in SYSTEM_PROMPT
    assert "`id+n|text`" in SYSTEM_PROMPT
    assert "`id+n|` head" in SYSTEM_PROMPT
    assert f"`{PLACEHOLDER}`" in SYSTEM_PROMPT
    assert "`[Name]`" in SYSTEM_PROMPT
    for kind in ("user", "ever", "tool", "echo", "work", "note"):
        assert f"\n- {kind}: " in SYSTEM_PROMPT
    for call in ("`zoom(id, n)`", "`zoom(id, 1)`", "`zoom(name)`", "`date(id)`"):
        assert call in SYSTEM_PROMPT
    assert "`<input>`" in SYSTEM_PROMPT and "`<chat>`" in SYSTEM_PROMPT


def test_section_contents() -> None:
    """Each point of SPEC §5 sits in its own section; the checks name identifiers and a few
    key words, not whole sentences, so the wording may change."""
    opening, view, tools, turns, compactions = _sections()
    assert "Ever" in opening and "single user" in opening
    assert "`<chat>`" in opening and "turn" in opening
    assert "`Compaction:`" in opening and "compaction" in opening

    assert "`id+n|text`" in view and "oldest first" in view and "spaces" in view
    kinds = [line.split(":")[0][2:] for line in view.split("\n") if line.startswith("- ")]
    assert kinds == ["user", "ever", "tool", "echo", "work", "note"]
    assert "`[Name]`" in view.split("\n- work: ")[1].split("\n")[0]
    assert "in twos" in view and "level after level" in view  # pairs joined, then pairs of those
    assert f"`{PLACEHOLDER}`" in view and "zoom" in view.split(PLACEHOLDER)[1]
    # the coarse lines a turn on a chat that is behind may show (memory/coarse.py)
    coarse = coarse_text((3, 0))
    assert (
        coarse.startswith("[not yet summarized: messages") and "zoom" in view.split(coarse[:29])[1]
    )
    assert "pages" in view

    assert "`zoom(id, n)`" in tools and "pair of lines" in tools
    assert "`zoom(id, 1)`" in tools and "verbatim" in tools and "images" in tools
    assert "power of two" in tools and "divisible by n" in tools and "coarser" in tools
    assert "`zoom(name)`" in tools and "subagent" in tools
    assert "`date(id)`" in tools

    assert "instructions that close this prompt" in turns and "subagent" in turns
    assert "latest mention" in turns and "zooming" in turns and "in full" in turns
    assert "other tools" in turns  # memory is searched by zooming only
    assert "in your reply" in turns and "next turn" in turns
    assert "between two of your tool calls" in turns
    assert "`[Name]`" in turns and "poll" in turns

    assert "`<input>`" in compactions and "`<chat>`" in compactions
    assert "merge task" in compactions
    assert "questions" in compactions and "commands" in compactions
    assert "no tools" in compactions.lower() and "`id+n|` head" in compactions
    assert "user's own words first" in compactions
    assert "unchanged" in compactions and "overstate" in compactions
    assert "`<input>` lacks is rejected" in compactions  # the grounding check (SPEC §4.8)
    assert "over the limit" in compactions  # the follow-up's own words (compactor/tasks.py)
    assert "512 bytes" in compactions and "70" in compactions and "170" in compactions


def test_oversize_line_rule_is_in_our_own_words() -> None:
    """The rule for a line sent back as too long says it in this prompt's words, and in the
    words the follow-up uses (`Over the limit: …`), not in the design note's."""
    compactions = _sections()[4]
    assert "If told the line is too long, shorten it." not in compactions
    assert "over the limit" in compactions and "shorter" in compactions


def test_is_tight() -> None:
    """The prompt and the tools go with every call: they must not grow unnoticed."""
    assert len(SYSTEM_PROMPT.encode()) <= 4_750
    tools = json.dumps([[t.name, t.description, t.input_schema] for t in TOOLS])
    assert len(tools) <= 3_600  # 3,300 before `fetch` (issue 25)


def test_holds_no_state() -> None:
    """No date, time, path or count that could change between calls (SPEC §5, §8.10)."""
    assert not re.search(r"\d{4}-\d{2}-\d{2}", SYSTEM_PROMPT)
    assert not re.search(r"\d{1,2}:\d{2}", SYSTEM_PROMPT)
    assert not re.search(r"\b(19|20)\d\d\b", SYSTEM_PROMPT)
    assert not re.search(r"[+-]\d{2}:?\d{2}\b", SYSTEM_PROMPT)
    assert "~/" not in SYSTEM_PROMPT and "/home" not in SYSTEM_PROMPT
    # the only numbers are the fixed facts of the design (8 is from UTF-8)
    assert set(re.findall(r"\d+", SYSTEM_PROMPT)) <= {"1", "2", "4", "8", "70", "170", "512"}


def test_lines_are_whole_paragraphs() -> None:
    """Hard wraps in the source are joined: no line of the prompt ends mid-sentence."""
    for line in SYSTEM_PROMPT.split("\n"):
        assert line == line.strip()
        if line and not line.startswith("#"):
            assert line[-1] in ".:", line


# -- the system text with the user's instructions -----------------------------------------------


def test_system_text_takes_no_time() -> None:
    assert list(inspect.signature(system_text).parameters) == ["instructions"]


def test_system_text_is_byte_stable_across_days() -> None:
    instructions = "I am Ana. My notes live in ~/notes.\nPrefer small commits.\n"
    monday = system_text(instructions).encode()
    time.sleep(0.01)  # time moves on; nothing in the text may follow it
    tuesday = system_text(instructions).encode()
    assert monday == tuesday
    assert monday.startswith(SYSTEM_PROMPT.encode())
    assert monday.decode().endswith(
        f"\n\n{INSTRUCTIONS_HEADING}\n\nI am Ana. My notes live in ~/notes.\nPrefer small commits."
    )


@pytest.mark.parametrize("empty", ["", "\n", "  \n\t"])
def test_no_instructions_gives_the_prompt_alone(empty: str) -> None:
    assert system_text(empty) == SYSTEM_PROMPT


def test_without_tools_the_note_comes_before_the_users_instructions() -> None:
    assert system_text_without_tools("") == f"{SYSTEM_PROMPT}\n\n{NO_TOOLS_NOTE}"
    text = system_text_without_tools("Prefer small commits.\n")
    assert text == system_text_without_tools("Prefer small commits.")  # byte-stable
    assert text.startswith(SYSTEM_PROMPT + "\n\n" + NO_TOOLS_HEADING + "\n")
    assert text.endswith(f"{NO_TOOLS_NOTE}\n\n{INSTRUCTIONS_HEADING}\n\nPrefer small commits.")
    for line in NO_TOOLS_NOTE.split("\n")[1:]:  # whole paragraphs, as in the prompt
        assert not line or line[-1] == "."


# -- tool definitions ---------------------------------------------------------------------------


def _check_schema(schema: object) -> None:
    """A JSON schema that both APIs accept: an object with typed, described properties."""
    assert isinstance(schema, dict)
    assert schema["type"] == "object"
    assert "oneOf" not in schema and "anyOf" not in schema and "allOf" not in schema
    properties = schema["properties"]
    assert isinstance(properties, dict) and properties
    assert set(schema["required"]) <= set(properties)
    for prop in properties.values():
        assert prop["type"] in {"string", "integer"}
        assert isinstance(prop["description"], str) and prop["description"]


def test_tools_in_fixed_order() -> None:
    names = [tool.name for tool in TOOLS]
    assert names == ["zoom", "date", "shell", "read", "write", "edit", "fetch", "agent"]


def test_tool_schemas() -> None:
    for tool in TOOLS:
        assert tool.description
        _check_schema(tool.input_schema)
        json.dumps(tool.input_schema)  # plain JSON
    required = {tool.name: tool.input_schema["required"] for tool in TOOLS}
    assert required == {
        "zoom": [],  # either id + n or name: the tool itself validates
        "date": ["id"],
        "shell": ["command"],
        "read": ["path"],
        "write": ["path", "content"],
        "edit": ["path", "old", "new"],
        "fetch": ["url"],
        "agent": ["name", "task"],
    }
    props = {tool.name: list(tool.input_schema["properties"]) for tool in TOOLS}
    assert props["zoom"] == ["id", "n", "name"]
    assert props["shell"] == ["command", "timeout"]
    assert props["read"] == ["path", "offset", "limit"]


def test_tool_descriptions_name_their_forms() -> None:
    by_name = {tool.name: tool for tool in TOOLS}
    zoom = by_name["zoom"].description
    assert "`id`" in zoom and "`n`" in zoom and "`name`" in zoom and "`id+n`" in zoom
    assert "power of two" in zoom and "n = 1" in zoom
    assert "`old`" in by_name["edit"].description and "`new`" in by_name["edit"].description
    assert "`[name]`" in by_name["agent"].description
    assert "UTC offset" in by_name["date"].description


def test_tools_hold_no_state() -> None:
    text = json.dumps([[t.name, t.description, t.input_schema] for t in TOOLS])
    assert not re.search(r"\d{4}-\d{2}-\d{2}|\d{1,2}:\d{2}", text)


def test_tools_identical_across_calls() -> None:
    def dump() -> str:
        return json.dumps(
            [[t.name, t.description, t.input_schema] for t in prompts.TOOLS], sort_keys=False
        )

    first = dump()
    time.sleep(0.01)
    assert dump() == first


# -- the per-turn header ------------------------------------------------------------------------


def test_turn_header() -> None:
    now = datetime(2026, 10, 8, 14, 3, 22, tzinfo=timezone(timedelta(hours=2)))
    header = turn_header(now)
    assert "2026-10-08 Thursday 14:03:22 +02:00" in header
    assert header.endswith(TURN_MARKER)
    assert "compaction" in TURN_MARKER and not TURN_MARKER.startswith("Compaction:")
    assert not header.startswith("\n") and not header.endswith("\n")


@pytest.mark.parametrize(
    ("now", "expected"),
    [
        (datetime(2026, 1, 4, 0, 0, 5, tzinfo=UTC), "2026-01-04 Sunday 00:00:05 +00:00"),
        (
            datetime(2025, 12, 31, 23, 59, 59, tzinfo=timezone(-timedelta(hours=5, minutes=30))),
            "2025-12-31 Wednesday 23:59:59 -05:30",
        ),
        (
            datetime(2026, 3, 2, 9, 7, 0, tzinfo=timezone(timedelta(hours=13, minutes=45))),
            "2026-03-02 Monday 09:07:00 +13:45",
        ),
    ],
)
def test_turn_header_dates(now: datetime, expected: str) -> None:
    assert expected in turn_header(now)


def test_turn_header_naive_is_local() -> None:
    now = datetime(2026, 10, 8, 14, 3, 22)
    header = turn_header(now)
    assert "2026-10-08 Thursday 14:03:22 " in header
    assert re.search(r"14:03:22 [+-]\d{2}:\d{2}\n", header)


def test_turn_header_custom_marker() -> None:
    now = datetime(2026, 10, 8, 14, 3, 22, tzinfo=UTC)
    assert turn_header(now, "Task for you:").endswith("\nTask for you:")
