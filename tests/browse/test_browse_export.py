"""`evertalk memory browse --out FILE`: one private, self-contained HTML file that needs no
server and asks nothing of the network, with the zooms beneath the view up to its bound."""

from __future__ import annotations

import stat
from pathlib import Path

import pytest

from browse.browse_chat import HOSTILE, make_chat
from browse.browser_support import chromium
from evertalk.browse.data import ChatData
from evertalk.browse.export import write_page
from evertalk.cli import main


@pytest.fixture
def home(tmp_path: Path) -> Path:
    make_chat(tmp_path / "home" / "chat")
    return tmp_path / "home"


def test_the_command_writes_a_private_file(
    home: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "memory.html"
    assert main(["memory", "browse", "--home", str(home), "--out", str(out)]) == 0
    said = capsys.readouterr().out
    assert said.startswith(f"wrote {out} (") and "zooms beneath the view" in said
    assert stat.S_IMODE(out.stat().st_mode) == 0o600
    page = out.read_text()
    assert 'http-equiv="Content-Security-Policy"' in page and "default-src 'none'" in page
    for outside in ('src="http', 'href="http', '<link rel="stylesheet"', "<script src"):
        assert outside not in page
    assert HOSTILE not in page  # its "<" is escaped inside the embedded JSON


def test_a_missing_chat_is_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["memory", "browse", "--home", str(tmp_path), "--out", str(tmp_path / "x.html")])
    assert code == 1
    err = capsys.readouterr().err
    assert err.startswith("evertalk: no chat in") and err.count("\n") == 1


def open_file(page_path: Path, names: list[str]) -> str:
    """Open the file in Chromium and drill down along `names`, stopping where the file has no
    more; the zoom panel's text at the end."""
    with chromium() as browser:
        page = browser.new_page()
        problems: list[str] = []
        page.on("console", lambda m: problems.append(m.text) if m.type == "error" else None)
        page.on("pageerror", lambda error: problems.append(str(error)))
        page.goto(page_path.as_uri())
        page.wait_for_selector("body[data-lines]")
        page.wait_for_selector('body[data-sawtooth="ready"]')
        for depth, name in enumerate(names):
            start, count = name.split("+")
            row = ".line" if depth == 0 else ".child"
            page.locator(f'{row}[data-id="{start}"][data-n="{count}"]').click()
            page.wait_for_selector(f'body[data-zoom="{name}"]')
            if page.locator(".missing").count():
                break
        text = page.text_content("#zoom-body") or ""
        assert problems == []
    return text


def test_the_file_drills_down_to_a_message_with_no_server(home: Path, tmp_path: Path) -> None:
    out = tmp_path / "memory.html"
    data = ChatData(home / "chat")
    try:
        _, zooms = write_page(data, home / "usage.jsonl", out)
    finally:
        data.close()
    assert zooms > 16  # everything beneath this small view
    text = open_file(out, ["0+32", "0+16", "0+8", "4+4", "4+2", "5+1"])
    assert HOSTILE in text


def test_past_its_bound_the_file_says_so(home: Path, tmp_path: Path) -> None:
    out = tmp_path / "small.html"
    data = ChatData(home / "chat")
    try:
        _, zooms = write_page(data, home / "usage.jsonl", out, room=8_000)
    finally:
        data.close()
    assert 0 < zooms < 16
    assert "m58" in open_file(out, ["58+1"])  # the newest lines come first
    text = open_file(out, ["0+32", "0+16", "0+8", "4+4", "4+2", "5+1"])
    assert "not included in this file" in text
    assert HOSTILE not in text


def test_a_port_out_of_range_is_one_line(home: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["memory", "browse", "--home", str(home), "--port", "70000"]) == 1
    assert capsys.readouterr().err == "evertalk: --port must be between 0 and 65535, not 70000\n"
