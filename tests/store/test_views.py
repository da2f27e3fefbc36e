"""view.json: atomic saves, both formats, unreadable files (SPEC §3.6)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from evertalk.store import ChatStore, SavedViews, StoreError
from evertalk.store.views import (
    SAVE_AFTER,
    SAVE_EVERY,
    ViewCheckpoints,
    encode_views,
    load_views,
    parse_views,
    save_views,
)

pairs = st.lists(st.tuples(st.integers(0, 62), st.integers(0, 2**40)), max_size=50)


@given(
    t=st.integers(0, 2**40),
    view=pairs,
    cview=st.none() | pairs,
    shrinking=st.booleans(),
    cshrinking=st.booleans(),
)
def test_views_round_trip(
    t: int,
    view: list[tuple[int, int]],
    cview: list[tuple[int, int]] | None,
    shrinking: bool,
    cshrinking: bool,
) -> None:
    saved = SavedViews(t, view, cview, shrinking, cshrinking)
    assert parse_views(encode_views(saved)) == saved


def test_the_file_holds_the_spec_format(tmp_path: Path) -> None:
    save_views(tmp_path, SavedViews(5, [(2, 0), (0, 4)], [(2, 0), (0, 4)], True, False))
    assert json.loads((tmp_path / "view.json").read_bytes()) == {
        "t": 5,
        "view": [[2, 0], [0, 4]],
        "cview": [[2, 0], [0, 4]],
        "shrinking": True,
        "cshrinking": False,
    }


def test_save_is_atomic_and_makes_no_fsync(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The new content goes to a temporary file that is renamed over the old one; no fsync, as
    view.json is derived (a power cut leaves the old one, or one the open refuses and refolds)."""
    old = SavedViews(1, [(0, 0)], [(0, 0)], False, False)
    new = SavedViews(2, [(1, 0)], [(1, 0)], False, False)
    save_views(tmp_path, old)
    events: list[str] = []
    real_replace = os.replace

    def fsync(fd: int) -> None:
        events.append(f"fsync {Path(os.readlink(f'/proc/self/fd/{fd}')).name}")

    def replace(src: str | Path, dst: str | Path) -> None:
        events.append(f"replace {Path(src).name} {Path(dst).name}")
        assert load_views(tmp_path) == old  # until the rename, readers see the old views
        real_replace(src, dst)

    monkeypatch.setattr(os, "fsync", fsync)
    monkeypatch.setattr(os, "replace", replace)
    save_views(tmp_path, new)
    assert events == ["replace view.json.tmp view.json"]
    assert load_views(tmp_path) == new
    assert sorted(p.name for p in tmp_path.iterdir()) == ["view.json"]
    assert (tmp_path / "view.json").stat().st_mode & 0o777 == 0o600


def test_a_bare_list_is_the_original_format(tmp_path: Path) -> None:
    (tmp_path / "view.json").write_text("[[3, 0], [1, 4], [0, 10]]")
    assert load_views(tmp_path) == SavedViews(11, [(3, 0), (1, 4), (0, 10)], None, False, False)


def test_a_missing_file_is_none(tmp_path: Path) -> None:
    assert load_views(tmp_path) is None


@pytest.mark.parametrize(
    "content",
    [
        b"",
        b"{",
        b"\xff",
        b"3",
        b'{"t": 1, "view": [[0, 0]], "cview": [[0, 0]], "shrinking": false}',
        b'{"t": -1, "view": [], "cview": [], "shrinking": false, "cshrinking": false}',
        b'{"t": 1, "view": [[0]], "cview": [], "shrinking": false, "cshrinking": false}',
        b'{"t": 1, "view": [[0, true]], "cview": [], "shrinking": false, "cshrinking": false}',
        b'{"t": 1, "view": [], "cview": [], "shrinking": 0, "cshrinking": false}',
        b'{"t": 1, "view": {}, "cview": [], "shrinking": false, "cshrinking": false}',
        b"[[0, 0], [1]]",
        b"[[99, 0]]",
        b"[" * 100000,
    ],
)
def test_unreadable_content_is_an_error_string(tmp_path: Path, content: bytes) -> None:
    (tmp_path / "view.json").write_bytes(content)
    error = load_views(tmp_path)
    assert isinstance(error, str)
    assert str(tmp_path / "view.json") in error and "\n" not in error


def test_the_store_saves_and_loads_views(chat: Path) -> None:
    saved = SavedViews(0, [], [], False, False)
    with ChatStore.open(chat) as store:
        assert store.load_views() is None
        store.save_views(saved)
    with ChatStore.open(chat, readonly=True) as reader:
        assert reader.load_views() == saved
        with pytest.raises(StoreError, match="read-only"):
            reader.save_views(saved)


def test_views_changed_long_enough_ago_are_due() -> None:
    now = [100.0]
    checkpoints = ViewCheckpoints(lambda: now[0])
    assert not checkpoints.due()
    checkpoints.changed(1)
    now[0] += SAVE_AFTER - 0.1
    checkpoints.changed(1)
    assert not checkpoints.due()
    now[0] += 0.1  # measured from the first change not saved, not the latest
    assert checkpoints.due()
    checkpoints.saved()
    assert not checkpoints.due() and not checkpoints.pending
    checkpoints.changed(SAVE_EVERY)
    assert checkpoints.due()


def test_the_budget_is_recorded_and_read_back(tmp_path: Path) -> None:
    saved = SavedViews(2, [(0, 0), (0, 1)], [(1, 0)], False, False, (9_828, 4_914, 2_457, 1_228))
    save_views(tmp_path, saved)
    assert load_views(tmp_path) == saved
    (tmp_path / "view.json").write_text(
        '{"t":1,"view":[[0,0]],"cview":null,"shrinking":false,"cshrinking":false,'
        '"budget":[10,20,5,1]}'
    )
    loaded = load_views(tmp_path)
    assert isinstance(loaded, str) and "floor over its ceiling" in loaded
