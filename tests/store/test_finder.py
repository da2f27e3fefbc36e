"""What a forget finds in a text (store/finder.py): a text in every escaping JSON has, inside the
JSON strings of a tool call's input however they escape it, and across page boundaries."""

from __future__ import annotations

import json

import pytest

from evertalk.store.finder import Finder, input_strings

SECRET = 'zq"pass\\word\nlineé\u0001'


@pytest.mark.parametrize("ascii_only", [False, True])
def test_a_text_is_found_json_escaped_once_or_twice(ascii_only: bool) -> None:
    once = json.dumps({"content": f"a {SECRET} b"}, ensure_ascii=ascii_only)
    twice = json.dumps({"input": once}, ensure_ascii=ascii_only)
    finder = Finder.text(SECRET)
    assert json.loads(finder.replace(once)) == {"content": "a [redacted] b"}
    assert json.loads(json.loads(finder.replace(twice))["input"]) == {"content": "a [redacted] b"}


def test_a_string_that_escapes_the_text_its_own_way_is_decoded() -> None:
    odd = 'edit {"new":"\\u007aq\\"pass\\\\word\\nline\\u00e9\\u0001 and \\/"}'
    new = Finder.text(SECRET).replace(odd)
    assert json.loads(new.removeprefix("edit ")) == {"new": "[redacted] and /"}


def test_a_regular_expression_reaches_into_escaped_strings() -> None:
    text = 'shell {"command":"export KEY=\\"sk-123456\\""}'
    new = Finder.regex(r"sk-\d+").replace(text)
    assert json.loads(new.removeprefix("shell ")) == {"command": 'export KEY="[redacted]"'}
    assert Finder.regex("red").replace("red") == "[redacted]"  # replaced once, not again


def test_a_text_over_a_strings_quotes_is_found_as_it_stands() -> None:
    text = '{"user":"ann","pass":"x\\ny"}'
    assert Finder.text('ann","pass').replace(text) == '{"user":"[redacted]":"x\\ny"}'


def test_a_text_over_page_boundaries_goes_where_most_of_it_was() -> None:
    finder = Finder.text("zqabcdefghij")
    assert finder.replace_pages(["xx zqab", "cdefghij yy"]) == ["xx ", "[redacted] yy"]
    assert finder.replace_pages(["zqabcdefg", "hij"]) == ["[redacted]", ""]
    assert finder.replace_pages(["1 zqabc", "def", "ghij 2"]) == ["1 [redacted]", "", " 2"]
    assert finder.replace_pages(["zqab", "zqabcdefghij"]) == ["zqab", "[redacted]"]


def test_lone_surrogates_of_a_damaged_line_pass_through() -> None:
    raw = b'{"text": "\xffzqabcdefghij"}'.decode("utf-8", "surrogateescape")
    new = Finder.text("zqabcdefghij").replace(raw)
    assert new.encode("utf-8", "surrogateescape") == b'{"text": "\xff[redacted]"}'


def test_a_forgotten_tool_calls_input_counts_but_its_path() -> None:
    call = 'write {"path":"src/long/name.py","content":"a secret line\\n","mode":"x"}'
    assert input_strings(call) == ["a secret line\n"]
    assert input_strings("write {not json") == []


def test_a_long_string_over_a_page_boundary_keeps_its_pages_around_the_change() -> None:
    content = "x" * 50 + SECRET + "y" * 50
    call = 'write {"content":' + json.dumps(content) + "}"
    pages = [call[:40], call[40:100], call[100:]]
    new = Finder.text(SECRET).replace_pages(pages)
    assert new[0] == pages[0] and new[2] == pages[2]
    assert json.loads("".join(new).removeprefix("write "))["content"] == (
        "x" * 50 + "[redacted]" + "y" * 50
    )
