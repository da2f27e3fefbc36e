"""`evertalk memory search QUERY [--limit N] [--json]` and `/memory search QUERY`."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from evertalk import search_cli
from evertalk.chat import Chat
from evertalk.cli import main
from evertalk.service.commands import search_text
from evertalk.slash import SEARCH, CommandError, Invocation, read_line


def run(home: Path, *args: str) -> int:
    return main(["memory", "search", "--home", str(home), *args])


@pytest.fixture
def home(tmp_path: Path) -> Path:
    with Chat.open(tmp_path / "chat") as chat:
        for k in range(6):
            chat.append("user", f"ordinary note {k}")
        chat.append("tool", "Traceback: KeyError 'capacitor_flux'")
        chat.append("ever", "the flux capacitor is fixed")
    return tmp_path


def test_hits_show_id_kind_date_line_and_snippet(
    home: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert run(home, "flux", "capacitor") == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0].startswith("7+1  ever  ") and " in view line " in out[0]
    assert out[1] == "  the «flux capacitor» is fixed"  # the phrase first
    assert out[2].startswith("6+1  tool  ")
    with Chat.open(home / "chat", readonly=True) as chat:
        assert chat.date(7) in out[0]


def test_json_for_programs(home: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert run(home, "keyerror", "--json", "--limit", "5") == 0
    data = json.loads(capsys.readouterr().out)
    assert data["query"] == "keyerror" and data["capped"] is False
    (hit,) = data["hits"]
    assert (hit["id"], hit["n"], hit["summary"], hit["kind"]) == (6, 1, False, "tool")
    assert "«KeyError»" in hit["snippet"] and len(hit["view_lines"]) == 1


def test_no_hits_is_no_error(home: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert run(home, "absent") == 0
    assert capsys.readouterr().out == "no hits for 'absent'\n"


def test_usage_errors(home: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert run(home, "") == 2
    assert "give words to search for" in capsys.readouterr().err
    assert run(home, "--", "- *") == 2
    capsys.readouterr()
    assert run(home, "note", "--limit", "0") == 2
    assert "--limit" in capsys.readouterr().err
    assert main(["memory", "search", "--home", str(home)]) == 2  # no query at all


def test_no_chat_is_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert run(tmp_path / "nowhere", "x") == 1
    err = capsys.readouterr().err
    assert err.startswith("evertalk: no chat in") and err.count("\n") == 1


def test_control_characters_are_shown_as_codes(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with Chat.open(tmp_path / "chat") as chat:
        chat.append("tool", "\x1b[2Jcleared screen marker")
    assert run(tmp_path, "marker") == 0
    out = capsys.readouterr().out
    assert "\x1b" not in out and "\\x1b[2Jcleared" in out


def test_a_long_catch_up_says_what_it_does(
    home: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(search_cli, "SAID_AFTER", 5)
    assert run(home, "note") == 0
    captured = capsys.readouterr()
    assert "building the search index: 8 messages" in captured.err
    assert captured.out.count("ordinary «note»") == 6
    assert run(home, "note") == 0  # caught up now: nothing to say
    assert capsys.readouterr().err == ""


def test_the_slash_command(home: Path) -> None:
    line = read_line("/memory search flux capacitor")
    assert line == Invocation(SEARCH, "/memory search", ("flux", "capacitor"))
    with Chat.open(home / "chat") as chat:
        text = search_text(chat, line.args)
        assert text.splitlines()[0].startswith("7+1  ever  ")
        with pytest.raises(CommandError, match="usage: /memory search QUERY"):
            search_text(chat, ())
