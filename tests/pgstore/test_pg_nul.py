"""Texts holding NUL characters, which the file store keeps and PostgreSQL's text refuses,
read back from the database as they were written."""

from __future__ import annotations

from collections.abc import Callable

from hypothesis import given
from hypothesis import strategies as st

from evertalk.memory.tree import BUILT
from evertalk.pgstore import nul
from evertalk.pgstore.connect import Connection
from evertalk.pgstore.pgchat import PgChat

AWKWARD = st.lists(st.sampled_from(["\x00", "\\", "0", "\x01", "nul", "a", "é"])).map("".join)


@given(st.one_of(AWKWARD, AWKWARD.map(lambda text: nul.MARK + text), st.text()))
def test_a_stored_text_reads_back_as_written(text: str) -> None:
    held = nul.stored(text)
    assert "\x00" not in held
    assert nul.read(held) == text
    if "\x00" not in text and not text.startswith(nul.MARK):
        assert held == text  # an ordinary text is stored as it is


def test_messages_and_nodes_with_nul_in_the_database(
    pg_connect: Callable[..., Connection],
) -> None:
    chat = PgChat.open(pg_connect(), machine="home")
    texts = ["out\x00put", nul.MARK + "looks escaped", "back\\0slash\x00"]
    ids = [chat.append_message("echo", text, key=f"k\x00{n}", agent="a\x00b") for n, text in
           enumerate(texts)]  # fmt: skip
    records = chat.read_messages(0, 3)
    assert [r.text for r in records] == texts
    assert [r.key for r in records] == ["k\x000", "k\x001", "k\x002"]
    assert {r.agent for r in records} == {"a\x00b"}
    assert [r.size for r in records] == [len(t.encode()) for t in texts]
    assert chat.logged("k\x001") and chat.append_message("echo", "again", key="k\x001") == ids[1]
    assert chat.build(0, 0, "a line\x00with a NUL")
    node = chat.read_node(0, 0)
    assert node is not None and node.text == "a line\x00with a NUL" and node.flag == BUILT
