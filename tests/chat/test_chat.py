"""The chat glue: the store and the core together, against a pure core fed the same events."""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from budget import examples
from evertalk.chat import Chat, ToolInputError
from evertalk.memory import Budget, MemoryCore
from evertalk.memory.text import MESSAGE_LIMIT, PLACEHOLDER

SMALL = Budget(ceiling=1_500, floor=700, cceiling=600, cfloor=300, window=3)

op = st.one_of(
    st.tuples(st.just("append"), st.integers(1, 1_200)),
    st.tuples(st.just("build"), st.integers(0, 10), st.integers(1, 512)),
    st.tuples(st.just("fail"), st.integers(0, 10)),
    st.tuples(st.just("restart")),
)


def _open(chat_dir: Path) -> Chat:
    return Chat.open(chat_dir, budget=SMALL)


def _same(chat: Chat, core: MemoryCore) -> None:
    assert chat.core.saved() == core.saved()
    assert chat.core.view.size == core.view.size
    assert chat.core.cview.size == core.cview.size
    assert chat.core.ready() == core.ready()


@settings(max_examples=examples(40), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(op, min_size=1, max_size=60))
def test_chat_matches_the_pure_core_and_restarts_identically(ops: list[tuple[int, ...]]) -> None:
    folder = Path(tempfile.mkdtemp())
    try:
        chat = _open(folder / "chat")
        reference = MemoryCore(SMALL)
        for step in ops:
            if step[0] == "append":
                text = "é" * (int(step[1]) // 2)
                chat.append("user", text)
                reference.append("user", text)
            elif step[0] in ("build", "fail"):
                ready = reference.ready()
                if not ready:
                    continue
                node = ready[int(step[1]) % len(ready)]
                if step[0] == "build":
                    line = "s" * int(step[2])
                    chat.build(node, line)
                    reference.build(node, line)
                else:
                    chat.fail(node)
                    reference.fail(node)
            else:
                before = (chat.core.saved(), chat.render_view(), chat.render_cview())
                chat.close()
                chat = _open(folder / "chat")
                assert not chat.warnings
                assert (chat.core.saved(), chat.render_view(), chat.render_cview()) == before
                reference.failures.clear()  # failure counts are not saved (SPEC §4.5)
            _same(chat, reference)
        chat.close()
    finally:
        shutil.rmtree(folder)


def test_long_text_is_split_into_pages_with_keys(tmp_path: Path) -> None:
    text = ("word " * 20_000) + "end"
    with _open(tmp_path / "chat") as chat:
        ids = chat.append("ever", text, key="reply-1")
        assert len(ids) == 4 and ids == list(range(4))
        pages = [chat.store.read_message(i) for i in ids]
        assert "".join(page.text for page in pages) == text
        assert all(len(page.text) <= MESSAGE_LIMIT for page in pages)
        assert [page.key for page in pages] == [f"reply-1.{n}" for n in range(4)]
        assert chat.append("ever", text, key="reply-1") == ids  # re-sent: nothing new
        assert chat.t == 4


def test_zoom_and_date(tmp_path: Path) -> None:
    with _open(tmp_path / "chat") as chat:
        chat.append("user", "hello\nthere")
        chat.append("tool", "x" * 600)
        assert chat.zoom(0, 1) == "0+1|user: hello\nthere"
        assert chat.zoom(0, 2) == f"0+1|user: hello there\n1+1|{PLACEHOLDER}"
        chat.build((0, 1), "a tool call")
        assert chat.zoom(0, 2) == "0+1|user: hello there\n1+1|a tool call"
        for bad in [(1, 2), (0, 3), (2, 1), (0, 4), (-1, 1)]:
            with pytest.raises(ToolInputError):
                chat.zoom(*bad)
        assert chat.date(0)[:4].isdigit()
        with pytest.raises(ToolInputError):
            chat.date(2)


def test_view_renders_placeholder_never_a_partial_message(tmp_path: Path) -> None:
    with _open(tmp_path / "chat") as chat:
        chat.append("user", "short")
        chat.append("echo", "y" * 900)
        assert chat.render_view() == f"<chat>\n0+1|user: short\n1+1|{PLACEHOLDER}\n</chat>"


def test_read_only_open_writes_nothing(tmp_path: Path) -> None:
    with _open(tmp_path / "chat") as chat:
        chat.append("user", "hi")
    before = {p: p.read_bytes() for p in (tmp_path / "chat").rglob("*") if p.is_file()}
    with Chat.open(tmp_path / "chat", readonly=True) as chat:
        assert chat.t == 1
    after = {p: p.read_bytes() for p in (tmp_path / "chat").rglob("*") if p.is_file()}
    assert before == after


def test_lone_surrogates_are_stored_as_replacement_characters(tmp_path: Path) -> None:
    with _open(tmp_path / "chat") as chat:
        chat.append("echo", "bytes \udcff from a tool")
        assert chat.store.read_message(0).text == "bytes \ufffd from a tool"
