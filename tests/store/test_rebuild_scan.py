"""The rebuild's lean scan reads the log exactly as the log's definition does, line by line.

The rebuild decodes lines with msgspec and keeps its per-line work in one loop; what counts, what
is skipped and why, and every warning must stay what `Scan`, `pages.verdicts` and `decode_node`
(the plain reading of the files, which repair and the tools use too) make of the same bytes.
"""

from __future__ import annotations

import json
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from store_helpers import lock_held

from budget import examples
from evertalk.store import ChatStore, CorruptLog, jsonl
from evertalk.store.fast_lines import REFUSED, decode_message_line
from evertalk.store.jsonl import TORN, Line, Scan
from evertalk.store.pages import verdicts
from evertalk.store.records import (
    MessageRecord,
    decode_node,
    encode_message,
    encode_node,
    read_message_line,
)
from evertalk.store.skipped import Skipped

# -- the reference: the log read line by line, as the store read it before its fast path ---------


@dataclass
class Reference:
    messages: list[tuple[str, int, int]] = field(default_factory=list)
    """Each message's file (relative), offset and length, by id."""
    nodes: dict[tuple[int, int], tuple[str, int, int, int, int]] = field(default_factory=dict)
    """Each built node's file, offset, length, size and flag."""
    warnings: list[str] = field(default_factory=list)


def _lines(scan: Scan, skipped: Skipped) -> Iterator[Line]:
    yield from scan
    if scan.torn_lineno is not None:
        skipped.add(str(scan.path), scan.torn_lineno, f"{TORN}; skipped")


def reference(chat: Path) -> Reference | CorruptLog:
    """What the log holds, or the error that keeps it from opening (duplicates, gaps)."""
    skipped, found = Skipped(), Reference()
    where: dict[int, str] = {}  # the file of each message put, or the line of one pending
    pending: dict[int, tuple[tuple[str, int, int], str]] = {}
    for path in sorted((chat / "main").iterdir()):
        name = f"main/{path.name}"
        for line, record, skip in verdicts(_lines(Scan(path), skipped)):
            if skip is not None:
                skipped.add(str(path), line.lineno, f"{skip}; skipped")
                continue
            assert record is not None
            at, here = (name, line.offset, line.length), f"{path} line {line.lineno}"
            i = record.i
            if i < len(found.messages) or i in pending:
                first = pending[i][1] if i in pending else where[i]
                return CorruptLog(f"{here}: message id {i} is a duplicate (first: {first})")
            pending[i] = (at, here)
            while len(found.messages) in pending:
                k = len(found.messages)
                found.messages.append(pending.pop(k)[0])
                where[k] = str(chat / found.messages[k][0])
    if pending:
        return CorruptLog("a gap")
    total, beyond = len(found.messages), 0
    for path in sorted((chat / "tree").iterdir()):
        name = f"tree/{path.name}"
        for line in _lines(Scan(path), skipped):
            node = decode_node(line.record) if line.record is not None else None
            if node is None:
                reason = line.reason or "not a valid tree record"
                skipped.add(str(path), line.lineno, f"{reason}; skipped")
            elif node.l > 62 or (node.i + 1) << node.l > total:
                beyond += 1
            elif (node.l, node.i) in found.nodes:
                why = "a second record of a node already built; skipped"
                skipped.add(str(path), line.lineno, why)
            else:
                at = (name, line.offset, line.length, node.size, node.flag)
                found.nodes[(node.l, node.i)] = at
    found.warnings = [f"rebuilding the index of {chat}: there is no index yet"]
    found.warnings += skipped.warnings()
    if beyond:
        found.warnings.append(
            f"{beyond} tree records of {chat} name messages past the end of the log; skipped "
            "(the next open by evertalk sets them aside)"
        )
    return found


def observed(store: ChatStore) -> Reference:
    """What the store's index answers, in the reference's terms."""
    found = Reference(warnings=list(store.warnings))
    for i in range(store.message_count):
        location = store.message_location(i)
        assert location is not None
        found.messages.append((location.file, location.offset, location.length))
    sizes = store.node_sizes()
    for level, flags in enumerate(store.node_flags()):
        for i, flag in enumerate(flags):
            if flag:
                location = store.node_location(level, i)
                assert location is not None
                size = sizes[level][i]
                found.nodes[(level, i)] = (
                    location.file,
                    location.offset,
                    location.length,
                    size,
                    flag,
                )
    return found


# -- lines, well-formed and not ------------------------------------------------------------------

TEXTS = st.text(st.sampled_from('ab \n\t"\\/é€😀\x00\x1f'), max_size=12)
ODD_VALUES = ["1", '"x"', "NaN", "-Infinity", "1e999", str(2**70), "[[[]]]", '{"a": null}',
              '"\\ud800"', '"\\udfff\\ud800"', '"é"', "true"]  # fmt: skip


def _obj(pairs: list[tuple[str, str]], spaced: bool) -> bytes:
    sep, colon = (", ", ": ") if spaced else (",", ":")
    return ("{" + sep.join(f"{json.dumps(k)}{colon}{v}" for k, v in pairs) + "}").encode()


@st.composite
def message(draw: st.DrawFn, i: int, page: tuple[int, int] | None = None) -> bytes:
    """A record that counts, plain or with what a reader must take in its stride."""
    text = draw(TEXTS)
    ascii_only = draw(st.booleans())
    pairs = [
        ("i", str(i)),
        ("kind", json.dumps(draw(st.sampled_from(["user", "ever", "tool", "echo", "work"])))),
        ("text", json.dumps(text, ensure_ascii=ascii_only)),
        ("size", str(draw(st.sampled_from([len(text.encode()), 0, 99])))),
        ("date", '"2026-03-01T09:30:00-05:00"'),
    ]
    if draw(st.booleans()):
        pairs.append(("key", json.dumps(f"k{i}")))
    if page is not None:
        pairs += [("part", str(page[0])), ("parts", str(page[1]))]
    extra = draw(
        st.sampled_from(
            [None, None, None, ("agent", '"Bo"'), ("images", '["a.png"]'), ("key", "5"),
             ("images", "[1]"), ("agent", "null"), ("agent", '"\\udc00"'), ("key", "null")]
            + [("zz", value) for value in ODD_VALUES]
        )
    )  # fmt: skip
    if extra is not None:
        pairs.append(extra)
    return _obj(pairs, draw(st.booleans()))


@st.composite
def not_a_message(draw: st.DrawFn, i: int) -> bytes:
    """A line that holds no message: damage, a record of the wrong shape."""
    good = [("i", str(i)), ("kind", '"user"'), ("text", '"x"'), ("size", "1"), ("date", '"d"')]
    broken = draw(
        st.sampled_from(
            [("i", "-1"), ("i", "true"), ("i", "1.0"), ("kind", '"robot"'), ("text", "5"),
             ("text", '"\\ud800"'), ("size", "-1"), ("size", "true"), ("date", "null"),
             ("part", "5"), ("parts", "1")]
        )
    )  # fmt: skip
    record = _obj([pair for pair in good if pair[0] != broken[0]] + [broken], False)
    garbage = draw(st.binary(max_size=20).filter(lambda raw: b"\n" not in raw))
    return draw(st.sampled_from([record, garbage, b"[1, 2]", b'"a string"', b"{}", b"", record]))


@st.composite
def message_log(draw: st.DrawFn) -> tuple[list[bytes], int]:
    """Lines of a message log, and the messages they hold when nothing goes wrong."""
    lines: list[bytes] = []
    t = 0
    for _ in range(draw(st.integers(0, 14))):
        what = draw(st.sampled_from(["plain", "plain", "plain", "pages", "lost", "bad"]))
        if what == "plain":
            lines.append(draw(message(t)))
            t += 1
        elif what == "bad":
            lines.append(draw(not_a_message(t)))
        else:
            parts = draw(st.integers(2, 3))
            written = parts if what == "pages" else draw(st.integers(1, parts - 1))
            lines += [draw(message(t + n, (n, parts))) for n in range(written)]
            t += parts if what == "pages" else 0
    return lines, t


@st.composite
def tree_log(draw: st.DrawFn, t: int) -> list[bytes]:
    lines = []
    for _ in range(draw(st.integers(0, 16))):
        level = draw(st.integers(0, 3))
        i = draw(st.integers(0, max((t >> level) + 1, 1)))  # now and then past the end
        size = draw(st.sampled_from([3, 300, 512, 513]))
        text = draw(st.sampled_from(["a", "é", "a\nb", "\\"])) * (size // 3)
        pairs = [("l", str(level)), ("i", str(i)), ("text", json.dumps(text)), ("size", "1")]
        flag = draw(st.sampled_from([None, ("free", "true"), ("cut", "true"), ("free", "1")]))
        if flag is not None:
            pairs.append(flag)
        if draw(st.integers(0, 5)) == 0:
            pairs.append(draw(st.sampled_from([("cut", "true"), ("zz", "NaN"), ("zz", '"é"')])))
        line = _obj(pairs, draw(st.booleans()))
        lines.append(draw(st.sampled_from([line, line, line, b"garbage", b"[]"])))
    return lines


def _write(path: Path, lines: list[bytes], torn: bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(b"".join(line + b"\n" for line in lines) + torn)


@settings(max_examples=examples(120), deadline=None)
@given(
    log=message_log(),
    split=st.integers(0, 20),
    backwards=st.booleans(),
    duplicate=st.integers(0, 8),
    torn=st.sampled_from([b"", b"", b'{"i": 0, "te', b'{"l": 0}']),
    chunk=st.integers(1, 400),
    data=st.data(),
)
def test_a_rebuild_reads_the_log_as_its_lines_define_it(
    log: tuple[list[bytes], int],
    split: int,
    backwards: bool,
    duplicate: int,
    torn: bytes,
    chunk: int,
    data: st.DataObject,
) -> None:
    lines, t = log
    if duplicate == 0 and lines:  # a record logged twice: both refuse to open, alike
        lines.append(lines[len(lines) // 2])
    tree = data.draw(tree_log(t))
    days = ["2026-03-01.jsonl", "2026-03-02.jsonl"]
    if backwards:  # a clock that stepped back: the later ids in the earlier-named file
        days.reverse()
    old = jsonl.CHUNK
    jsonl.CHUNK = chunk  # batches end anywhere: in a page group, in a line
    try:
        with tempfile.TemporaryDirectory() as folder:
            chat = Path(folder) / "chat"
            _write(chat / "main" / days[0], lines[:split], b"")
            _write(chat / "main" / days[1], lines[split:], torn)
            _write(chat / "tree" / "2026-03-01.jsonl", tree, torn)
            expected = reference(chat)
            try:
                with lock_held(chat), ChatStore.open(chat, readonly=True) as reader:
                    got: Reference | CorruptLog = observed(reader)
            except CorruptLog as error:
                got = error
            if isinstance(expected, CorruptLog):
                assert isinstance(got, CorruptLog)
                if str(expected) != "a gap":
                    assert str(got) == str(expected)
                return
            assert got == expected
            with ChatStore.open(chat) as owner:  # the same scan, saved
                saved = observed(owner)
            with ChatStore.open(chat, readonly=True) as reader:  # nothing left to scan
                again = observed(reader)
                assert (again.messages, again.nodes) == (saved.messages, saved.nodes)
                assert again.warnings == [] or torn != b""
    finally:
        jsonl.CHUNK = old
    assert len(saved.messages) == len(expected.messages)
    if not any("moved to" in warning for warning in saved.warnings):  # else the tree was edited
        assert (saved.messages, saved.nodes) == (expected.messages, expected.nodes)
    assert {n: at[3:] for n, at in saved.nodes.items()} == {
        n: at[3:] for n, at in expected.nodes.items()
    }


@pytest.mark.parametrize("level", [61, 62, 63, 64, 2**70])
def test_a_node_of_any_level_is_read_as_the_definition_reads_it(level: int, tmp_path: Path) -> None:
    """Levels past the last one a log can reach go to the definition and are past its end."""
    chat = tmp_path / "chat"
    _write(
        chat / "main" / "2026-03-01.jsonl",
        [encode_message(i, "user", "m", "d") for i in range(3)],
        b"",
    )
    _write(chat / "tree" / "2026-03-01.jsonl", [encode_node(n, 0, "x", 1) for n in (0, level)], b"")
    expected = reference(chat)
    with lock_held(chat), ChatStore.open(chat, readonly=True) as reader:
        assert observed(reader) == expected


# -- the fast decoder agrees with the definition, line by line -----------------------------------


@settings(max_examples=examples(400), deadline=None)
@given(
    line=st.one_of(
        message(3),
        not_a_message(3),
        message(3, (0, 2)),
        st.binary(max_size=60).filter(lambda raw: b"\n" not in raw),
    ),
    cut=st.integers(0, 80),
    byte=st.binary(min_size=1, max_size=1),
)
def test_a_line_the_fast_decoder_accepts_is_the_same_message(
    line: bytes, cut: int, byte: bytes
) -> None:
    for raw in (line, line[:cut] + byte + line[cut:], line[:cut]):
        try:
            fast = decode_message_line(raw)
        except REFUSED:  # the definition alone decides
            continue
        record = read_message_line(raw)
        assert isinstance(record, MessageRecord) and record.page is None
        assert (fast.i, fast.kind, fast.text, fast.date) == (
            record.i,
            record.kind,
            record.text,
            record.date,
        )
        images = tuple(fast.images) if fast.images is not None else None
        assert (fast.key, images, fast.agent) == (record.key, record.images, record.agent)


_PLAIN = b'{"i": 0, "kind": "user", "text": "a", "size": 1, "date": "d", '


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        (_PLAIN + b'"zz": "\xff"}', "not valid JSON"),
        (_PLAIN + b'"zz": ' + b"[" * 3000 + b"]" * 3000 + b"}", "not valid JSON"),
        (_PLAIN + b'"zz": NaN}', MessageRecord(0, "user", "a", 1, "d")),
        (_PLAIN + b'"key": "\\ud800"}', MessageRecord(0, "user", "a", 1, "d", key="\ud800")),
        (_PLAIN + b'"key": 5}', MessageRecord(0, "user", "a", 1, "d")),
    ],
)
def test_lines_the_fast_decoder_cannot_vouch_for_go_to_the_definition(
    raw: bytes, expected: MessageRecord | str
) -> None:
    """What json.loads decides otherwise than msgspec would (bad UTF-8 or nesting in a key
    msgspec only skips, NaN, lone surrogates), and keys of the wrong type, are left to it."""
    with pytest.raises(REFUSED):
        decode_message_line(raw)
    assert read_message_line(raw) == expected
