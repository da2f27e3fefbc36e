"""`Chat` and `SharedChat` are made of parts, one job each: a method is said in one part only,
so that no part hides another's (the first in the order of the bases would win, silently), and
what SharedChat's parts override of Chat's is what a SharedChat runs."""

from __future__ import annotations

import inspect

import pytest

from evertalk.chat import Chat
from evertalk.shared_chat import SharedChat


def parts(whole: type, package: str) -> list[type]:
    return [part for part in whole.__mro__ if part.__module__.startswith(package + ".")]


def hidden(whole: type, package: str) -> list[str]:
    """The methods a part of `package` says that `whole` does not run (but for what a part
    declares for another to say, abstract)."""
    found = []
    for part in parts(whole, package):
        for name, value in vars(part).items():
            if not callable(value) and not isinstance(value, property | classmethod):
                continue
            if getattr(value, "__isabstractmethod__", False):
                continue
            if inspect.getattr_static(whole, name) is not value:
                found.append(f"{part.__qualname__}.{name}")
    return found


@pytest.mark.parametrize(
    ("whole", "package", "count"),
    [(Chat, "evertalk.chat_parts", 6), (SharedChat, "evertalk.shared_chat_parts", 6)],
)
def test_each_method_is_said_in_one_part(whole: type, package: str, count: int) -> None:
    assert len(parts(whole, package)) == count
    assert hidden(whole, package) == []


def test_a_part_that_hides_another_is_found() -> None:
    feed = next(p for p in parts(SharedChat, "evertalk.shared_chat_parts") if "follow" in vars(p))
    twice = type(
        "Twice",
        (feed,),
        {"record": inspect.getattr_static(feed, "record"), "__module__": feed.__module__},
    )
    whole = type("Whole", (twice, SharedChat), {})
    assert hidden(whole, "evertalk.shared_chat_parts") == ["SharedReadAhead.record"]
