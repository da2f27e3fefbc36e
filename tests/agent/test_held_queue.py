"""The messages held for a turn: in order, durable before they are held, and settled once
the log has them (SPEC §6.4)."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

from evertalk.agent.held_queue import HeldQueue, Quiet
from evertalk.agent.images import ImageStore
from evertalk.agent.turn import Held

NOON = datetime(2026, 12, 4, 12, tzinfo=UTC)


def queue(folder: Path) -> HeldQueue:
    return HeldQueue(folder, ImageStore(folder / "images"), lambda: NOON)


def test_held_in_order_and_taken_at_once(tmp_path: Path) -> None:
    held = queue(tmp_path)
    assert not held and held.take() == []
    first = held.add(Held("user", "one", key="k1"))
    second = held.add(Held("user", "two"))
    assert second.key is not None and second.key != "k1"  # a key of its own, for the log
    assert [m.text for m in held] == ["one", "two"] and len(held) == 2
    assert held.holds("k1") and not held.holds("k9")
    assert held.take() == [first, second] and not held
    held.put_back([first])
    assert held.take() == [first]
    held.close()


def test_a_restart_holds_again_what_the_log_lacks(tmp_path: Path) -> None:
    before = queue(tmp_path)
    before.add(Held("user", "logged", key="a"))
    before.add(Held("user", "waiting", key="b"))
    before.add(Quiet("work", "stopped", "Scout", key="c"))
    before.close()
    after = queue(tmp_path)
    warnings: list[str] = []
    assert after.recover(warnings, lambda key: key == "a") == 2
    assert [(m.text, type(m)) for m in after] == [("waiting", Held), ("stopped", Quiet)]
    assert after.holds("b") and not after.holds("a")
    assert not after.only_quiet()
    after.take()
    after.settle(lambda key: True)  # the log has them all: the file is emptied
    after.close()
    again = queue(tmp_path)
    assert again.recover([], lambda key: False) == 0
    again.close()


def test_only_quiet_reports_left(tmp_path: Path) -> None:
    held = queue(tmp_path)
    held.add(Quiet("work", "stopped", "Scout"))
    assert held.only_quiet()
    held.add(Held("user", "go on"))
    assert not held.only_quiet()
    held.close()
