"""The chat's named reads: what others ask of it, answered without reaching into its parts."""

from __future__ import annotations

from pathlib import Path

from evertalk.chat import Chat
from evertalk.memory import Budget
from evertalk.memory.coarse import fit, rendered_size, shown_size, summaries_to_go

SMALL = Budget(ceiling=1_500, floor=700, cceiling=600, cfloor=300, window=3)


def test_named_reads_answer_what_the_parts_hold(tmp_path: Path) -> None:
    with Chat.open(tmp_path / "chat", budget=SMALL) as chat:
        chat.append("user", "first", key="k1")
        chat.append("ever", "second")
        chat.append("user", "third")
        assert chat.folder == tmp_path / "chat"
        assert chat.record(1).text == "second" and chat.record(1).kind == "ever"
        assert [r.text for r in chat.records(0, 3)] == ["first", "second", "third"]
        assert chat.records(2, 2) == []
        assert chat.logged("k1") and not chat.logged("k2")
        assert chat.view_size == chat.core.view.size > 0
        assert chat.view_nodes() == list(chat.core.view.nodes())
        assert chat.unbuilt_count() == chat.core.tree.unbuilt_count()
        assert chat.catch_up() == chat.core.catch_up()


def test_named_reads_of_the_views_progress(tmp_path: Path) -> None:
    with Chat.open(tmp_path / "chat", budget=SMALL) as chat:
        for i in range(12):
            chat.append("user", f"message {i} " + "x" * 200)
        assert chat.view_ceiling == SMALL.ceiling
        ready = chat.core.ready()
        assert ready and not chat.is_built(ready[0])
        chat.build(ready[0], "a summary")
        assert chat.is_built(ready[0])
        to_go = chat.summaries_to_go(chat.view_ceiling)
        assert to_go == summaries_to_go(chat.core.view, chat.t, chat.core.tree, SMALL.ceiling)
        assert to_go > 0


def test_the_view_fitted_to_a_room(tmp_path: Path) -> None:
    with Chat.open(tmp_path / "chat", budget=SMALL) as chat:
        for i in range(12):
            chat.append("user", f"message {i} " + "x" * 200)
        core = chat.core
        for room in (300, 900, 10_000):
            fitted = chat.fit_view(room)
            assert fitted == fit(core.view, core.t, core.tree, room, core.budget)
            sent = chat.sent_size(fitted.lines)
            assert sent == rendered_size(fitted.lines, shown_size(core.tree))
        assert chat.fit_view(10_000, keep=4) == fit(
            core.view, core.t, core.tree, 10_000, core.budget, 4
        )
