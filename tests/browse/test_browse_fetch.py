"""The model's `fetch` tool cannot read the browse page, even with its URL and token and with
private addresses allowed (issue 25 §2)."""

from __future__ import annotations

from pathlib import Path

import pytest

from browse.conftest import Served
from evertalk.agent.policy import Policy
from evertalk.agent.tools import Toolbox, ToolContext
from evertalk.agent.tools.sandbox import Sandbox
from evertalk.chat import Chat
from evertalk.config import ToolPolicies

pytestmark = pytest.mark.anyio


async def test_fetch_gets_no_page_of_the_chat(served: Served, tmp_path: Path) -> None:
    chat = Chat.open(tmp_path / "own" / "chat")
    try:
        work = tmp_path / "work"
        work.mkdir()
        ctx = ToolContext(
            chat=chat,
            workdir=work,
            agents_dir=tmp_path / "own" / "chat" / "agents",
            sandbox=Sandbox(fetch_private=True),
        )
        toolbox = Toolbox(Policy(ToolPolicies(fetch="allow")), None)
        for path in ("", "api/view"):
            outcome = await toolbox.run("fetch", {"url": served.url + path}, ctx)
            assert outcome.failed and "Status: 403 Forbidden" in outcome.text
            assert "summary" not in outcome.text
    finally:
        chat.close()
