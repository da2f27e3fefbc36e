"""`memory redact` and `memory forget` reach undo's checkpoints (SPEC §12): a file's content kept
before a turn wrote it, which holds the text, is dropped, and undo refuses that file in one line
while it still restores the others. Once through the files, once as a user runs it, through the
service, after a `-p` turn that edited a file holding a key."""

from __future__ import annotations

from pathlib import Path

import pytest

from evertalk.agent.tools.checkpoints import Checkpoints
from evertalk.agent.turn import tool_text
from evertalk.agent.undo import apply, plan
from evertalk.chat import Chat
from evertalk.cli import main
from fakes import AnthropicFake, ToolCall, reply
from fakes import chat as answer
from home_scan import files_holding
from served_home import fake, home, run

__all__ = ["fake", "home"]  # the fixtures, used by name

SECRET = 'zqtoken-8812-"quoted"\n'
DROPPED = "its earlier content held forgotten text: dropped"


def _turn(home: Path, work: Path, turn: int, files: dict[str, tuple[bytes, bytes]]) -> None:
    """Turn `turn` wrote each file (name: what it held before, what it wrote)."""
    checkpoint = Checkpoints(home / "checkpoints").turn(turn)
    for name, (before, after) in files.items():
        checkpoint.record(work / name, name, before, after)
        (work / name).write_bytes(after)


@pytest.fixture
def files_home(tmp_path: Path) -> tuple[Path, Path]:
    home, work = tmp_path / "home", tmp_path / "work"
    work.mkdir()
    with Chat.open(home / "chat") as chat:
        chat.append("user", "tidy notes.txt")
        chat.append("tool", tool_text("edit", {"path": "notes.txt", "old": "token", "new": "x"}))
    kept = f"token: {SECRET}".encode()
    wide = f"token: {SECRET}".encode("utf-16-le")  # as a Windows editor may save it
    files = {"notes.txt": (kept, b"x: gone\n"), "other.txt": (b"old\n", b"new\n")}
    _turn(home, work, 0, files | {"wide.txt": (wide, b"narrow\n")})
    return home, work


def test_a_checkpoint_alone_holding_the_text_is_scrubbed_and_undo_says_so(
    files_home: tuple[Path, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    home, work = files_home
    assert files_holding(home, SECRET) == ["checkpoints/0/0.before", "checkpoints/0/2.before"]
    assert main(["memory", "redact", SECRET, "--yes", "--home", str(home)]) == 0
    out = capsys.readouterr().out
    assert "No message changes." in out and "undo checkpoints: checkpoints/0" in out
    assert files_holding(home, SECRET) == []

    store = Checkpoints(home / "checkpoints")
    planned = plan(store)
    assert f"  REFUSE  notes.txt: {DROPPED}" in planned.lines()
    done = apply(store, planned)
    assert done.restored == ["other.txt"] and (work / "other.txt").read_text() == "old\n"
    assert done.lines()[1:] == [f"Refused: notes.txt: {DROPPED}", f"Refused: wide.txt: {DROPPED}"]
    assert (work / "notes.txt").read_text() == "x: gone\n"


def test_forgetting_a_write_drops_a_later_checkpoint_of_what_it_wrote(
    files_home: tuple[Path, Path],
) -> None:
    home, work = files_home
    content = "diary: the meeting moved to thursday\n"
    with Chat.open(home / "chat") as chat:
        [call] = chat.append("tool", tool_text("write", {"path": "d.txt", "content": content}))
    _turn(home, work, 5, {"d.txt": (content.encode(), b"later\n")})
    assert main(["memory", "forget", str(call), "--yes", "--home", str(home)]) == 0
    assert files_holding(home, content) == []
    [refused] = plan(Checkpoints(home / "checkpoints"), 5).refused
    assert refused.shown == "d.txt" and "forgotten" in refused.why


def test_redact_through_the_service_reaches_the_checkpoint_of_an_edit(
    home: Path, fake: AnthropicFake
) -> None:
    work = home.parent / "work"
    work.mkdir(exist_ok=True)
    (work / "notes.txt").write_text(f"token: {SECRET}")
    calls = reply(
        ToolCall("edit", {"path": "notes.txt", "old": "token:", "new": "key:"}),
        ToolCall("write", {"path": "copy.txt", "content": f"a copy:\n{SECRET}"}),
    )
    fake.behaviour.push(calls, answer("Done."))  # type: ignore[attr-defined]
    turn = run(home, "-p", "tidy my notes", "--allow", "write,edit")
    assert turn.returncode == 0, turn.stderr
    assert run(home, "memory", "search", "zqtoken").returncode == 0  # the search database too
    held = files_holding(home, SECRET)
    assert [name for name in held if name.startswith("checkpoints/")] == ["checkpoints/0/0.before"]
    assert "chat/index/search.sqlite" in " ".join(held)

    redact = run(home, "memory", "redact", SECRET, "--yes")  # the service runs: through it
    assert redact.returncode == 0, redact.stderr
    assert "undo checkpoints: checkpoints/0" in redact.stdout
    assert files_holding(home, SECRET) == []

    undo = run(home, "undo", "--yes")
    assert f"REFUSE  notes.txt: {DROPPED}" in undo.stdout, undo.stdout
    assert (work / "notes.txt").read_text() == f"key: {SECRET}"  # kept as it is
    assert not (work / "copy.txt").exists()  # the turn created it: undone
