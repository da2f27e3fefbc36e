"""`evertalk undo` as a user runs it: a `-p` turn against the fake writes and edits files, then the
command puts them back through the service, and the chat gets a note saying so."""

from __future__ import annotations

import stat
from pathlib import Path

from test_turn_support import log_of, workdir_beside

from fakes import AnthropicFake, ToolCall, reply
from fakes import chat as answer
from served_home import fake, home, run

__all__ = ["fake", "home"]  # the fixtures, used by name


BEFORE = {"a.txt": "alpha\n", "b.txt": "beta\n", "src/c.py": "x = 1\ny = 2\n"}


def a_turn_changes_files(home: Path, fake: AnthropicFake) -> Path:
    """Three files changed (two written, one edited) and one created, in one turn."""
    work = workdir_beside(home)
    for name, text in BEFORE.items():
        (work / name).parent.mkdir(parents=True, exist_ok=True)
        (work / name).write_text(text)
    calls = reply(
        ToolCall("write", {"path": "a.txt", "content": "ALPHA\n"}),
        ToolCall("write", {"path": "b.txt", "content": "BETA\n"}),
        ToolCall("edit", {"path": "src/c.py", "old": "y = 2", "new": "y = 3"}),
        ToolCall("write", {"path": "docs/new.md", "content": "# New\n"}),
    )
    fake.behaviour.push(calls, answer("Done."))  # type: ignore[attr-defined]
    result = run(home, "-p", "change them", "--allow", "write,edit")
    assert result.returncode == 0, result.stderr
    assert (work / "a.txt").read_text() == "ALPHA\n"
    assert (work / "src/c.py").read_text() == "x = 1\ny = 3\n"
    assert (work / "docs/new.md").exists()
    return work


def test_undo_restores_a_turns_files_and_tells_ever(home: Path, fake: AnthropicFake) -> None:
    work = a_turn_changes_files(home, fake)
    result = run(home, "undo", "--yes")
    assert result.returncode == 0, result.stderr
    for name, text in BEFORE.items():
        assert (work / name).read_text() == text, name
    assert not (work / "docs/new.md").exists()  # the turn created it: gone
    # the preview: the files, a diff from the file as it is to the file restored, the caveat
    assert result.stdout.startswith("Undo turn 0 (“change them”): the files its write and edit")
    assert "restore src/c.py" in result.stdout and "remove  docs/new.md" in result.stdout
    assert "-y = 3\n+y = 2" in result.stdout
    assert "shell commands are not tracked" in result.stdout
    notes = [text for kind, text in log_of(home) if kind == "note"]
    assert len(notes) == 1 and "undid turn" in notes[0]
    assert "a.txt" in notes[0] and "docs/new.md" in notes[0]
    again = run(home, "undo", "--yes")  # undone already: nothing before it
    assert again.returncode == 1 and "nothing to undo" in again.stderr


def test_a_file_changed_since_is_refused_by_name(home: Path, fake: AnthropicFake) -> None:
    work = a_turn_changes_files(home, fake)
    (work / "b.txt").write_text("mine now\n")
    result = run(home, "undo", "--yes")
    assert result.returncode == 1  # one file was left as it is
    assert "REFUSE  b.txt: changed since the turn wrote it" in result.stdout
    assert "Refused: b.txt changed since the turn wrote it" in result.stdout
    assert (work / "b.txt").read_text() == "mine now\n"  # the user's change is kept
    assert (work / "a.txt").read_text() == "alpha\n"  # the others are restored
    assert (work / "src/c.py").read_text() == BEFORE["src/c.py"]
    assert not (work / "docs/new.md").exists()
    note = next(text for kind, text in log_of(home) if kind == "note")
    assert "Left as they are (changed since the turn wrote them): b.txt" in note


def test_undo_asks_first_and_no_changes_nothing(home: Path, fake: AnthropicFake) -> None:
    work = a_turn_changes_files(home, fake)
    result = run(home, "undo", stdin="n\n")
    assert result.returncode == 1 and "Restore these files? [y/N]" in result.stdout
    assert "Nothing was changed." in result.stdout
    assert (work / "a.txt").read_text() == "ALPHA\n"
    assert not [text for kind, text in log_of(home) if kind == "note"]


def test_checkpoints_are_private(home: Path, fake: AnthropicFake) -> None:
    a_turn_changes_files(home, fake)
    root = home / "checkpoints"
    folders = [root, *[p for p in root.rglob("*") if p.is_dir()]]
    files = [p for p in root.rglob("*") if p.is_file()]
    assert len(folders) == 2 and len(files) == 4  # the index and three earlier contents
    assert {stat.S_IMODE(p.stat().st_mode) for p in folders} == {0o700}
    assert {stat.S_IMODE(p.stat().st_mode) for p in files} == {0o600}


def test_an_unknown_turn_is_one_line(home: Path, fake: AnthropicFake) -> None:
    a_turn_changes_files(home, fake)
    result = run(home, "undo", "999", "--yes")
    assert result.returncode == 1
    assert result.stderr.startswith("evertalk: turn 999 changed no file that undo can restore")
    assert len(result.stderr.splitlines()) == 1
