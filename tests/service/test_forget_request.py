"""The `forget` request (SPEC §12): while a service owns the chat, forgetting is its work; the
command goes through it. Neither the model's tools nor the MCP server can forget."""

from __future__ import annotations

from pathlib import Path

import anyio
import pytest
from test_memory_requests import client

from evertalk.agent.tools.registry import PARSERS
from evertalk.chat import Chat
from evertalk.cli import main
from evertalk.client.remote import RequestFailed
from evertalk.mcp_server import Memory, build_server
from evertalk.protocol.replies import Appended, ForgetPreview, Forgotten, Reopened, View, Zoom
from evertalk.protocol.requests import Append, Forget, GetView, GetZoom, OutsideMessage
from evertalk.tui.forget import forget_in_app
from fakes import AnthropicFake
from tui.tui_support import script, write_config

pytestmark = pytest.mark.anyio
WORD = "zqpassphrase-4417"


@pytest.fixture
def home(tmp_path: Path) -> Path:
    home = tmp_path / "home"
    write_config(home)
    with Chat.open(home / "chat") as chat:
        for n in range(4):
            text = f"message {n} about the backups" + (f", the key is {WORD}" if n == 2 else "")
            chat.append("user" if n % 2 == 0 else "ever", text)
    return home


async def test_a_forget_through_the_service_reopens_the_chat_without_the_text(home: Path) -> None:
    async with client(home, AnthropicFake(script())) as (remote, seen):
        preview = await remote.request(Forget(range="2", preview=True), ForgetPreview)
        assert preview.changes and any("prompt cache" in line for line in preview.lines)
        assert WORD in (await remote.request(GetView(), View)).text  # nothing changed yet
        done = await remote.request(Forget(range="2", reason="a key"), Forgotten)
        assert done.messages == 1 and done.summaries >= 1
        with anyio.fail_after(10):
            while not any(isinstance(frame, Reopened) for frame in seen):
                await anyio.sleep(0.01)
        zoom = await remote.request(GetZoom(id=2, n=1), Zoom)
        assert zoom.text.startswith("2+1|user: [forgotten on ") and "a key" in zoom.text
        assert WORD not in (await remote.request(GetView(), View)).text
        with pytest.raises(RequestFailed, match="the chat has 4 messages, 0–3"):
            await remote.request(Forget(range="9"), Forgotten)
    for path in home.rglob("*"):
        if path.is_file():
            assert WORD.encode() not in path.read_bytes(), path


async def test_the_command_goes_through_a_running_service(home: Path) -> None:
    async with client(home, AnthropicFake(script())) as (remote, seen):
        argv = ["memory", "redact", WORD, "--yes", "--home", str(home)]
        assert await anyio.to_thread.run_sync(main, argv) == 0
        with anyio.fail_after(10):
            while not any(isinstance(frame, Reopened) for frame in seen):
                await anyio.sleep(0.01)
        zoom = await remote.request(GetZoom(id=2, n=1), Zoom)
        assert zoom.text == "2+1|user: message 2 about the backups, the key is [redacted]"


async def test_the_command_says_what_the_service_refused(
    home: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    async with client(home, AnthropicFake(script())):
        argv = ["memory", "forget", "9", "--yes", "--home", str(home)]
        assert await anyio.to_thread.run_sync(main, argv) == 1
    out, err = capsys.readouterr()
    assert "Nothing to forget" not in out
    said = [line for line in err.splitlines() if line.startswith("evertalk:")]
    assert said == ["evertalk: forget: the chat has 4 messages, 0–3"], err


def test_no_tool_of_the_model_or_of_mcp_forgets(tmp_path: Path) -> None:
    words = ("forget", "redact", "erase", "delete")
    assert not [name for name in PARSERS if any(word in name for word in words)]
    server = build_server(Memory(tmp_path))
    names = [tool.name for tool in anyio.run(server.list_tools)]
    assert names and not [name for name in names if any(word in name for word in words)]


async def test_slash_forget_previews_then_forgets_on_yes(home: Path) -> None:
    async with client(home, AnthropicFake(script())) as (remote, seen):
        rows = await forget_in_app(remote, ("2", "the", "key"))
        assert rows[-1] == "Type `/forget 2 yes the key` to forget this for good."
        assert WORD in (await remote.request(GetZoom(id=2, n=1), Zoom)).text
        rows = await forget_in_app(remote, ("2", "yes", "the", "key"))
        assert rows[0].startswith("Forgotten: 1 message; ")
        with anyio.fail_after(10):
            while not any(isinstance(frame, Reopened) for frame in seen):
                await anyio.sleep(0.01)
        zoom = await remote.request(GetZoom(id=2, n=1), Zoom)
        assert zoom.text.endswith(": the key]")


async def test_a_message_sent_right_after_a_forget_is_logged_by_the_reopened_chat(
    home: Path,
) -> None:
    async with client(home, AnthropicFake(script())) as (remote, seen):
        await remote.request(Forget(range="2", reason="a key"), Forgotten)
        # at once: the chat is reopening, and the agent that forgot takes no changes
        note = OutsideMessage(kind="note", text="captured just now", key="just-now")
        appended = await remote.request(Append(messages=[note]), Appended)
        assert appended.ids == [4]
        assert any(isinstance(frame, Reopened) for frame in seen)  # it waited for the reopen
        zoom = await remote.request(GetZoom(id=4, n=1), Zoom)
        assert zoom.text == "4+1|note: captured just now"
