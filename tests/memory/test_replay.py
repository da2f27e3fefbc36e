"""The conformance replay (SPEC Appendix A), run as the real command in a subprocess."""

from __future__ import annotations

import json
import random
import re
import subprocess
import sys
from typing import Any

import pytest
from memory_reference import RefCore

KEYS = ["t", "view", "size", "shrinking", "cview", "csize", "cshrinking", "ready"]


def run(lines: list[str], *flags: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "evertalk", "memory", "replay", *flags],
        input="".join(line + "\n" for line in lines),
        capture_output=True,
        text=True,
        timeout=120,
    )


def outputs(lines: list[str], *flags: str) -> list[str]:
    done = run(lines, *flags)
    assert done.returncode == 0, done.stderr
    assert "Traceback" not in done.stderr
    out = done.stdout.split("\n")
    assert out[-1] == ""  # every line ends with a newline
    assert len(out) - 1 == len(lines)  # one output line per input line
    return out[:-1]


def append(text: str, kind: str = "user") -> str:
    return json.dumps({"op": "append", "kind": kind, "text": text})


def build(level: Any, index: Any, text: Any = "a line") -> str:
    return json.dumps({"op": "build", "l": level, "i": index, "text": text})


def fail(level: Any, index: Any) -> str:
    return json.dumps({"op": "fail", "l": level, "i": index})


def ref_line(ref: RefCore) -> dict[str, Any]:
    return {
        "t": ref.t,
        "view": [list(n) for n in ref.view],
        "size": ref.size(ref.view),
        "shrinking": ref.shrinking,
        "cview": [list(n) for n in ref.cview],
        "csize": ref.size(ref.cview),
        "cshrinking": ref.cshrinking,
        "ready": [list(n) for n in ref.ready()],
    }


def test_state_lines_keys_and_separators() -> None:
    events = [append("hello"), append("x" * 700, "echo"), build(0, 1, "a summary"), fail(0, 0)]
    out = outputs(events)
    for line in out[:3]:
        state = json.loads(line)
        assert list(state) == KEYS
        assert line == json.dumps(state)  # `, ` and `: ` separators, nothing else
        assert ", " in line and ": " in line
        assert re.search(r"[,:](?! )", line) is None  # every , and : is followed by a space
        assert isinstance(state["t"], int) and isinstance(state["shrinking"], bool)
        assert all(isinstance(n, list) and len(n) == 2 for n in state["view"] + state["ready"])
    first, second, third = (json.loads(line) for line in out[:3])
    assert first == {
        "t": 1,
        "view": [[0, 0]],
        "size": 11,
        "shrinking": False,
        "cview": [[0, 0]],
        "csize": 11,
        "cshrinking": False,
        "ready": [],
    }
    assert second["view"] == [[0, 0], [0, 1]] and second["size"] == 11 + 29
    assert second["ready"] == [[0, 1]]
    assert third["size"] == 11 + 9 and third["csize"] == 11 + 9
    assert third["ready"] == []  # "user: hello\na summary" (21 bytes) made (1, 0) free
    assert json.loads(out[3]).keys() == {"error"}


def test_exit_zero_at_end_of_input() -> None:
    done = run([])
    assert done.returncode == 0 and done.stdout == "" and done.stderr == ""
    done = run([append("one"), append("two")])
    assert done.returncode == 0 and len(done.stdout.splitlines()) == 2


INVALID = [
    "not json",
    "",
    "[1, 2]",
    '"append"',
    "null",
    "{}",
    '{"op": "merge"}',
    '{"op": null}',
    json.dumps({"op": "append", "kind": "bot", "text": "x"}),
    json.dumps({"op": "append", "kind": "User", "text": "x"}),
    json.dumps({"op": "append", "text": "x"}),
    json.dumps({"op": "append", "kind": "user"}),
    json.dumps({"op": "append", "kind": "user", "text": 5}),
    json.dumps({"op": "append", "kind": "user", "text": None}),
    build(0, 99),  # does not exist
    build(5, 0),  # does not exist
    build(0, 0),  # built (free)
    fail(0, 0),  # built (free)
    build(1, 0),  # built (free parent)
    build(1, 1),  # a parent with an unbuilt half
    fail(1, 1),
    build(0, 2, None),  # text must be a string
    json.dumps({"op": "build", "l": 0, "i": 2}),
    build(False, 2),  # booleans are not integers
    build(0, True),
    fail(False, False),
    build(0.0, 2),
    build("0", 2),
    build(0, -1),
    build(-1, 0),
    fail(None, 2),
]


def test_errors_change_nothing() -> None:
    valid = [append("a"), append("b"), append("c" * 600), append("d" * 600)]
    mixed: list[str] = []
    for event in valid:
        mixed.append(event)
        mixed.extend(INVALID)
    mixed += [build(0, 2, "line two"), *INVALID]
    clean = outputs([*valid, build(0, 2, "line two")])
    out = outputs(mixed)
    errors = [json.loads(line) for line in out if '"error"' in line]
    states = [line for line in out if '"error"' not in line]
    assert len(errors) == len(mixed) - len(clean)
    for error in errors:
        assert list(error) == ["error"] and isinstance(error["error"], str) and error["error"]
        assert "\n" not in error["error"]
    assert states == clean  # the state after each valid event is as if no error had come


def test_every_error_is_reported_after_valid_events() -> None:
    valid = [append("a"), append("b"), append("c" * 600), append("d" * 600)]
    out = outputs([*valid, *INVALID])
    for event, line in zip(INVALID, out[len(valid) :], strict=True):
        assert list(json.loads(line)) == ["error"], event


def test_free_nodes_never_ready_and_the_window() -> None:
    events = [append("w" * 600) for _ in range(3)] + [append("tiny")]
    events += [append("w" * 600) for _ in range(2)]
    out = [json.loads(line) for line in outputs(events, "--window", "2")]
    assert out[3]["ready"] == [[0, 0], [0, 1]]  # the third unbuilt leaf is beyond the window
    assert out[-1]["ready"] == [[0, 0], [0, 1]]
    more = [build(0, 0, "x" * 300), build(0, 1, "y" * 300)]
    out = [json.loads(line) for line in outputs(events + more, "--window", "2")]
    # 3+1 is free, never ready; (1, 0) is 300 + 1 + 300 bytes: not free, ready now
    assert out[-1]["ready"] == [[0, 2], [0, 4], [1, 0]]
    assert out[-2]["ready"] == [[0, 1], [0, 2]]
    out = [json.loads(line) for line in outputs(events + more, "--window", "8")]
    assert out[-1]["ready"] == [[0, 2], [0, 4], [0, 5], [1, 0]]


def test_fail_three_times_builds_the_cut_node() -> None:
    events = [append("é" * 400), fail(0, 0), fail(0, 0)]
    out = [json.loads(line) for line in outputs([*events, fail(0, 0), fail(0, 0)])]
    assert out[2]["size"] == 29 and out[2]["ready"] == [[0, 0]]
    assert out[3]["size"] == 512  # "user: " + 253 two-byte characters: 6 + 506 bytes
    assert out[3]["ready"] == []
    assert list(out[4]) == ["error"]  # built now


@pytest.mark.parametrize(
    "flags",
    [
        ["--floor", "10", "--ceiling", "5"],
        ["--cfloor", "100", "--cceiling", "50"],
        ["--window", "0"],
        ["--ceiling", "abc"],
        ["--floor", "-1"],
        ["--bogus"],
    ],
)
def test_wrong_flags(flags: list[str]) -> None:
    done = run([append("a")], *flags)
    assert done.returncode == 2
    assert done.stdout == ""
    assert "Traceback" not in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1
    assert done.stderr.strip()


def test_random_stream_against_the_reference() -> None:
    rnd = random.Random(2024)
    budget = ["--ceiling", "1500", "--floor", "700", "--cceiling", "600", "--cfloor", "300"]
    budget += ["--window", "3"]
    ref = RefCore(1500, 700, 600, 300, 3)
    events, expected = [], []
    kinds = ["user", "ever", "tool", "echo", "work", "note"]
    for _ in range(700):
        roll = rnd.random()
        if roll < 0.3:
            size = rnd.choice([0, 3, 40, 300, 505, 506, 507, 700, 2_000])
            kind = rnd.choice(kinds)
            text = rnd.choice(["a", "é", "😀", "a\nb"]) * size
            events.append(append(text, kind))
            ref.append(kind, text)
            expected.append(ref_line(ref))
            continue
        pending = ref.pending()
        if roll < 0.8 and pending:
            node = rnd.choice(pending if roll < 0.65 else ref.ready() or pending)
            if roll < 0.7:
                text = rnd.choice(["s", "€", "😀"]) * rnd.randint(1, 128)
                events.append(build(*node, text))
                ref.build(node, text)
            else:
                events.append(fail(*node))
                ref.fail(node)
            expected.append(ref_line(ref))
            continue
        node = (rnd.randint(0, 6), rnd.randint(0, ref.t + 2))
        events.append(rnd.choice([build(*node, "z"), fail(*node)]))
        if ref.valid_target(node):
            if events[-1].startswith('{"op": "build"'):
                ref.build(node, "z")
            else:
                ref.fail(node)
            expected.append(ref_line(ref))
        else:
            expected.append({"error": None})
    out = outputs(events, *budget)
    shrinking_seen = False
    for event, line, want in zip(events, out, expected, strict=True):
        got = json.loads(line)
        if "error" in want:
            assert list(got) == ["error"], event
        else:
            assert got == want, event
            assert line == json.dumps(want)
            shrinking_seen |= got["shrinking"]
    assert shrinking_seen
    assert ref.t > 150


def test_unhashable_kind_is_an_error_line() -> None:
    lines = [json.dumps({"op": "append", "kind": ["user"], "text": "a"}), append("b")]
    out = outputs(lines)
    assert list(json.loads(out[0])) == ["error"]
    assert json.loads(out[1])["t"] == 1


def test_huge_level_is_an_error_line() -> None:
    lines = [append("a"), build(10**30, 0), fail(2**63, 0)]
    out = outputs(lines)
    assert [list(json.loads(line)) for line in out[1:]] == [["error"], ["error"]]


def test_a_line_that_is_not_utf8_is_an_error_line() -> None:
    data = b'{"op": "append", "kind": "user", "text": "a"}\n\xff\xfe not utf-8\n'
    data += b'{"op": "append", "kind": "user", "text": "b"}\n'
    done = subprocess.run(
        [sys.executable, "-m", "evertalk", "memory", "replay"],
        input=data,
        capture_output=True,
        timeout=120,
    )
    assert done.returncode == 0 and b"Traceback" not in done.stderr
    out = done.stdout.decode().splitlines()
    assert len(out) == 3
    assert list(json.loads(out[1])) == ["error"]
    assert json.loads(out[2])["t"] == 2
