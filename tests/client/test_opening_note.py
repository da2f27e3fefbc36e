"""The note that a service is opening the chat comes only once the wait is long enough to be
worth it: never for a chat that opens within a second, a cold start of an empty one included."""

from __future__ import annotations

from evertalk.client.connection import SAY_AFTER, say_opening


def test_an_open_within_a_second_says_nothing() -> None:
    said: list[str] = []
    assert SAY_AFTER == 1.0
    assert not say_opening(4242, 0.0, said.append)
    assert not say_opening(4242, 0.99, said.append)
    assert said == []


def test_a_longer_open_is_said_once_it_has_lasted_a_second() -> None:
    said: list[str] = []
    assert say_opening(4242, 1.0, said.append)
    assert said == ["the service (pid 4242) is opening the chat; a large one takes a while"]
    assert not say_opening(4242, 5.0, None)  # a client that says nothing
