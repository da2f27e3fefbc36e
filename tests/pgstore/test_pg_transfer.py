"""`push` a file chat into the database and `pull` it back: the same log, tree and views."""

from __future__ import annotations

import random
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path

import pytest
from bench.chat_gen import WORDS, write_chat

from evertalk.memory.core import SavedViews
from evertalk.memory.tree import BUILT, CUT, FREE
from evertalk.pgstore.connect import Connection
from evertalk.pgstore.errors import TransferError
from evertalk.pgstore.pgchat import PgChat
from evertalk.pgstore.transfer import Copied, pull, push
from evertalk.store.chat_dir import ChatStore
from evertalk.store.message_log import NewMessage
from evertalk.store.views import VIEW_NAME, load_views, save_views

DAYS = ("2026-11-28", "2026-11-29", "2026-11-30")


def generated_chat(chat_dir: Path, count: int) -> None:
    """`count` messages with every node built; view.json as the store itself writes it."""
    write_chat(
        chat_dir,
        count,
        rng=random.Random(7),
        words=WORDS,
        day_of=lambda t: DAYS[t * len(DAYS) // count],
        tree_day=lambda day: day,
        summary_words=lambda rng: rng.randrange(5, 30),
    )
    saved = load_views(chat_dir)
    assert isinstance(saved, SavedViews)
    save_views(chat_dir, saved)


def assert_same_chat(one: Path, other: Path) -> None:
    with (
        ChatStore.open(one, readonly=True) as first,
        ChatStore.open(other, readonly=True) as second,
    ):
        count = first.message_count
        assert second.message_count == count
        for i in range(count):
            assert first.read_message(i) == second.read_message(i)
        flags = first.node_flags()
        assert second.node_flags() == flags
        for level, row in enumerate(flags):
            for index, flag in enumerate(row):
                if flag:
                    assert first.read_node(level, index) == second.read_node(level, index)
    assert (one / VIEW_NAME).read_bytes() == (other / VIEW_NAME).read_bytes()


def test_push_then_pull_gives_the_same_chat(
    tmp_path: Path, pg_connect: Callable[..., Connection]
) -> None:
    source = tmp_path / "files" / "chat"
    generated_chat(source, 3000)
    target = PgChat.open(pg_connect(), machine="home")
    seen: list[tuple[str, int, int]] = []
    copied = push(source, target, progress=lambda *step: seen.append(step), batch=700)
    assert copied.messages == 3000 and copied.nodes > 3000 and copied.views
    assert [step for step in seen if step[0] == "messages"][-1] == ("messages", 3000, 3000)
    assert seen[-1] == ("nodes", copied.nodes, copied.nodes)
    assert target.message_count == 3000 and target.node_count == copied.nodes

    assert push(source, target) == Copied(0, 0, False)  # all there: nothing copied again

    back = tmp_path / "back" / "chat"
    assert pull(target, back, batch=700) == copied
    assert_same_chat(source, back)


def test_an_interrupted_push_goes_on_where_it_stopped(
    tmp_path: Path, pg_connect: Callable[..., Connection]
) -> None:
    source = tmp_path / "files" / "chat"
    generated_chat(source, 1200)
    target = PgChat.open(pg_connect(), machine="home")

    def cut_off(stage: str, done: int, total: int) -> None:
        if done >= 500:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        push(source, target, progress=cut_off, batch=250)
    assert target.message_count == 500 and target.node_count == 0
    copied = push(source, target, batch=250)
    assert copied.messages == 700 and copied.views
    pull(target, tmp_path / "back" / "chat")
    assert_same_chat(source, tmp_path / "back" / "chat")


def test_every_kind_of_record_comes_back(
    tmp_path: Path, pg_connect: Callable[..., Connection]
) -> None:
    source = tmp_path / "files" / "chat"
    when = datetime(2026, 5, 4, 3, 2, 1, tzinfo=UTC)
    with ChatStore.open(source) as store:
        store.append_message("user", "hello", date=when, key="k1", images=["cat.png"])
        long = ["page one", "page two", "page three"]
        store.append_pages(NewMessage("ever", "".join(long), key="k2", date=when), long)
        failed = NewMessage("echo", "failed call", agent="helper", date=when, failed=True)
        store.append_pages(failed, ["failed call"])
        store.append_pages(NewMessage("tool", "ab", date=when), ["a", "b"])  # pages, no key
        store.append_nodes([(0, 0, "hello", FREE), (0, 1, "page one cut", CUT)], date=when)
        store.append_node(1, 0, "a summary", BUILT, date=when)
        store.save_views(SavedViews(7, [(1, 0), (0, 2)], [(0, 6)], True, False, (9, 5, 4, 2)))
    target = PgChat.open(pg_connect(), machine="home")
    assert push(source, target, batch=2) == Copied(7, 3, True)  # batches end on whole messages
    again = NewMessage("ever", "xyz", key="k2")
    assert target.logged("k2") and target.append_pages(again, ["x", "y", "z"]) == [1, 2, 3]
    pull(target, tmp_path / "back" / "chat", batch=2)
    assert_same_chat(source, tmp_path / "back" / "chat")


def test_a_push_into_another_chat_is_refused(
    tmp_path: Path, pg_connect: Callable[..., Connection]
) -> None:
    source = tmp_path / "files" / "chat"
    with ChatStore.open(source) as store:
        store.append_message("user", "mine")
    target = PgChat.open(pg_connect(), machine="home")
    target.append_message("user", "someone else's")
    with pytest.raises(TransferError, match="message 0 differs"):
        push(source, target)
    target.append_message("user", "and more")
    with pytest.raises(TransferError, match="holds 2 messages"):
        push(source, target)


def test_a_pull_writes_only_a_new_folder(
    tmp_path: Path, pg_connect: Callable[..., Connection]
) -> None:
    (tmp_path / "chat").mkdir()
    (tmp_path / "chat" / "view.json").write_text("[]")
    with pytest.raises(TransferError, match="is not empty"):
        pull(PgChat.open(pg_connect(), machine="home"), tmp_path / "chat")
