"""What the importer tests share: where the fixtures are, and small ways to look at a reading.

The fixtures under `fixtures/` have the shape of the real files, oddities included:
- `claude-code/projects/-home-ada-src-shop/`: a session (a slash command and its output, a meta
  caveat, thinking, an empty text block, Bash/Read/Task/Edit calls with their results, a result
  with an image and one with a `<system-reminder>`, an inline subagent sidechain, a pasted image,
  a rewind, a synthetic API error, a refused call and an interruption, a torn line mid-file, a
  compaction boundary and its summary, non-ASCII) and a subagent's own `agent-*.jsonl`;
- `codex/sessions/`: a wrapped rollout of autumn 2025, an old unwrapped one of May 2025, and an
  old one of June 2025 with MCP calls (their outputs logged as JSON text);
- `chatgpt-export/`: `conversations.json` (hidden system and custom-instruction messages, a
  regenerated reply, an edited question, an image found in the export and one missing from it, an
  attachment, thoughts, code interpreter and DALL·E calls, a voice message, a null time) and
  its other files;
- `chatgpt-search/`: an export's `conversations.json` with a `web.run` search of 2025 (results
  in the tool message's metadata, citation markers in the reply) and a browsing call of 2023;
- `own/`: evertalk's own JSON Lines, with a line of an unknown role and a blank text.
"""

from __future__ import annotations

import json
import shutil
import zipfile
from pathlib import Path

from evertalk.importers import Conversation, Imported, Reading

FIXTURES = Path(__file__).parent / "fixtures"
CLAUDE_PROJECT = FIXTURES / "claude-code" / "projects" / "-home-ada-src-shop"
CLAUDE_SESSION = CLAUDE_PROJECT / "5c1e2f0a-8d3b-4c61-9f0e-2b7d4a9c1e35.jsonl"
CLAUDE_AGENT = CLAUDE_PROJECT / "agent-a41c9e07.jsonl"
CODEX_SESSIONS = FIXTURES / "codex" / "sessions"
CODEX_NEW = (
    CODEX_SESSIONS
    / "2025/10/03/rollout-2025-10-03T14-02-11-0199a3c2-7d1e-7b40-9c55-3e8f1a2b4c6d.jsonl"
)
CODEX_OLD = (
    CODEX_SESSIONS
    / "2025/05/07/rollout-2025-05-07T17-24-21-5973b6c0-94b8-487b-a530-2aeb6098ae0e.jsonl"
)
CODEX_OLD_MCP = (
    CODEX_SESSIONS
    / "2025/06/12/rollout-2025-06-12T09-30-05-2b8e41d7-6c0a-4f19-9d3e-7a15c0e2b964.jsonl"
)
CHATGPT_EXPORT = FIXTURES / "chatgpt-export"
CHATGPT_SEARCH = FIXTURES / "chatgpt-search"
OWN = FIXTURES / "own" / "old-assistant.jsonl"

PNG_1x1 = (
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5E"
    "rkJggg=="
)


def only(reading: Reading) -> Conversation:
    """The one conversation of a reading."""
    assert len(reading.conversations) == 1, [c.id for c in reading.conversations]
    return reading.conversations[0]


def pairs(conversation: Conversation) -> list[tuple[str, str]]:
    """(kind, text) of each message, in order."""
    return [(m.kind, m.text) for m in conversation.messages]


def keyed(conversation: Conversation) -> dict[str, Imported]:
    return {m.key: m for m in conversation.messages}


def zip_export(folder: Path, target: Path, prefix: str = "") -> Path:
    """The export folder as the zip ChatGPT mails, its files under `prefix`."""
    with zipfile.ZipFile(target, "w", zipfile.ZIP_DEFLATED) as archive:
        for path in sorted(folder.iterdir()):
            archive.write(path, prefix + path.name)
    return target


def copy_tree(source: Path, target: Path) -> Path:
    shutil.copytree(source, target)
    return target


def claude_record(
    kind: str,
    uuid: str,
    parent: str | None,
    timestamp: str,
    content: object,
    **extra: object,
) -> str:
    """One line of a Claude Code transcript, as version 2.0 writes it."""
    record: dict[str, object] = {
        "parentUuid": parent,
        "isSidechain": False,
        "userType": "external",
        "cwd": "/home/ada/src/shop",
        "sessionId": "9d0e1f2a-3b4c-4d5e-8f6a-7b8c9d0e1f2a",
        "version": "2.0.14",
        "gitBranch": "main",
        "type": kind,
        "message": {"role": kind, "content": content},
        "uuid": uuid,
        "timestamp": timestamp,
    }
    if kind == "assistant":
        record["message"] = {
            "id": f"msg_{uuid[:8]}",
            "type": "message",
            "role": "assistant",
            "model": "claude-sonnet-4-5-20250929",
            "content": content,
            "stop_reason": None,
            "stop_sequence": None,
            "usage": {"input_tokens": 3, "output_tokens": 12},
        }
    record.update(extra)
    return json.dumps(record, ensure_ascii=False, separators=(",", ":"))
