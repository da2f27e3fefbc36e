"""`evertalk -p MESSAGE --model NAME` as a user runs it: that one turn on NAME, through the
service, with config.toml left as it is; and a `send` whose model is no name is refused."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from test_turn_support import MODEL, script, turn_bodies

from evertalk.client.connection import connect
from evertalk.protocol.events import MessageSent
from evertalk.protocol.replies import Accepted, Error
from evertalk.protocol.requests import Send
from fakes import AnthropicFake
from fakes import chat as answer
from served_home import run, served_home

OTHER = "claude-opus-5-5"


@pytest.fixture
def fake() -> AnthropicFake:
    return AnthropicFake(script().push(answer("From the other one."), answer("As usual.")))


@pytest.fixture
def home(tmp_path: Path, fake: AnthropicFake) -> Iterator[Path]:
    with served_home(tmp_path, fake, stop=True) as home:
        yield home


def test_model_runs_one_turn_on_another_model(home: Path, fake: AnthropicFake) -> None:
    config = (home / "config.toml").read_bytes()
    result = run(home, "-p", "which model are you?", "--model", OTHER)
    assert result.returncode == 0, result.stderr
    assert result.stdout == "From the other one.\n"
    result = run(home, "-p", "and now?")
    assert result.returncode == 0, result.stderr
    assert result.stdout == "As usual.\n"
    assert [body["model"] for body in turn_bodies(fake)] == [OTHER, MODEL]
    assert (home / "config.toml").read_bytes() == config


def test_a_send_whose_model_is_no_name_is_refused(home: Path) -> None:
    with connect(home, "test", start=True) as connection:
        for model in ("", " spaced ", 42):
            connection.send(Send(text="hi", model=model, rid=1))
            while not isinstance(frame := connection.receive(), Error):
                assert not isinstance(frame, Accepted | MessageSent), frame
            assert frame.kind == "bad_request" and frame.rid == 1
            assert frame.message.startswith("send: 'model' is not a model name")


def test_model_goes_with_a_message_only(tmp_path: Path) -> None:
    for args, said in (
        (("--model", OTHER), "--json, --allow, --image and --model go with -p MESSAGE"),
        (("-p", "--retry", "--model", OTHER), "--retry takes no --model"),
        (("-p", "hi", "--model", ""), "--model takes a model name, not ''"),
    ):
        result = run(tmp_path / "home", *args)
        assert result.returncode == 2, args
        assert result.stderr.startswith(f"evertalk: {said}"), result.stderr
