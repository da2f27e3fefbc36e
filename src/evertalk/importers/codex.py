"""Codex CLI session rollouts: `~/.codex/sessions/YYYY/MM/DD/rollout-<time>-<id>.jsonl`.

Since autumn 2025 each line is `{"timestamp", "type", "payload"}`: a `session_meta` first (the
session's `id`, `cwd`, `cli_version`, …), then `response_item` lines whose payload is what the
model saw (`message` with `role` and `content` items `input_text`, `input_image` (a data URL),
`output_text`; `function_call` with `name`, `arguments` (a JSON string) and `call_id`;
`function_call_output` with `call_id` and `output`; `custom_tool_call(_output)`,
`local_shell_call`, `web_search_call`, `reasoning`, `ghost_snapshot`, …), and `event_msg`,
`turn_context` and `compacted` lines, which repeat or describe what the items hold. Older
rollouts have no wrapper: a first line `{"id", "timestamp", "instructions", "git"}`, then the
items themselves, one per line, with `{"record_type": "state"}` lines between them, and no time
of their own (each takes the session's).

How it maps: user text → `user`, assistant text → `ever`, calls → `tool`, outputs → `echo` (a
shell output given as `{"output", "metadata": {"exit_code"}}` becomes the output and `[exit
status N]`, as the app's own shell reports it; an MCP tool's output, which old rollouts log as
the JSON of its content items, becomes their text and images), images kept, reasoning never
imported. Left out and counted: the context Codex injects as user messages (environment,
AGENTS.md instructions), developer and system messages, event, turn-context and compaction
lines, and anything of a type not known here. Keys are `codex:<session id>:<line>`: a rollout
only grows.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Final

from evertalk.importers.common import (
    THOUGHTS,
    Context,
    Draft,
    Emitter,
    arguments,
    echo_text,
    image_from_base64,
    image_from_url,
    jsonl_records,
    parse_time,
    string,
    tool_text,
)
from evertalk.importers.model import Conversation, ImageData, SourceKind

SOURCE: Final[SourceKind] = "codex"

WRAPPED = frozenset({"session_meta", "response_item", "event_msg", "turn_context", "compacted"})
ITEMS = frozenset(
    {
        "message",
        "reasoning",
        "function_call",
        "function_call_output",
        "custom_tool_call",
        "custom_tool_call_output",
        "local_shell_call",
        "web_search_call",
    }
)

_INJECTED = (
    "<environment_context>",
    "<user_instructions>",
    "# AGENTS.md instructions",
    "<INSTRUCTIONS>",
)
"""How the context Codex sends as user messages begins: the user never typed it."""


def looks_like(record: dict[str, Any], first: bool) -> bool:
    """Whether a record is one of a rollout, new or old."""
    kind = record.get("type")
    if kind in WRAPPED and isinstance(record.get("payload"), dict):
        return True
    if first and "id" in record and "timestamp" in record and "type" not in record:
        return "role" not in record and "text" not in record
    return record.get("record_type") == "state" or (kind in ITEMS and "payload" not in record)


def read(path: Path, display: str, ctx: Context) -> list[Conversation]:
    draft = Draft(SOURCE, display, path.stem, ctx)
    names: dict[str, str] = {}  # call_id → tool name
    session_time = None
    cwd: str | None = None
    for line, record in jsonl_records(path, display, ctx):
        kind = record.get("type")
        payload = record.get("payload")
        if kind in WRAPPED and isinstance(payload, dict):
            if kind == "session_meta":
                if draft.id == path.stem:
                    draft.id = string(payload.get("id")) or draft.id
                cwd = cwd or string(payload.get("cwd"))
                continue
            if kind != "response_item":
                ctx.skip(f"Codex {kind} lines")
                continue
            time = parse_time(record.get("timestamp"))
            item = payload
        elif "type" not in record and "id" in record and "timestamp" in record:
            # the first line of an old rollout: the session, and the time of all its items
            draft.id = string(record.get("id")) or draft.id
            session_time = parse_time(record.get("timestamp"))
            continue
        elif record.get("record_type") is not None:
            ctx.skip("Codex state lines")
            continue
        else:
            time = session_time
            item = record
        if time is None:
            ctx.problem(display, "no valid time for this item", line)
            continue
        out = draft.record(f"{SOURCE}:{draft.id}:{line}", f"{SOURCE} {display}:{line}", time)
        _item(item, out, names)
    draft.heading = f"Imported from Codex: session {draft.id}" + (f" in {cwd}" if cwd else "")
    conversation = draft.finish()
    return [conversation] if conversation is not None else []


def _item(item: dict[str, Any], out: Emitter, names: dict[str, str]) -> None:
    kind = item.get("type")
    ctx = out.draft.ctx
    if kind == "message":
        _message(item, out)
    elif kind == "reasoning":
        ctx.skip(THOUGHTS)
    elif kind in ("function_call", "custom_tool_call"):
        name = string(item.get("name")) or "tool"
        _remember(item, name, names)
        raw = item.get("arguments") if kind == "function_call" else item.get("input")
        if isinstance(raw, str):
            tool_input = arguments(raw) if kind == "function_call" else {"input": raw}
        else:
            tool_input = raw if isinstance(raw, dict) else {}
        out.add("tool", tool_text(name, tool_input))
    elif kind == "local_shell_call":
        _remember(item, "local_shell", names)
        action = item.get("action")
        out.add("tool", tool_text("local_shell", action if isinstance(action, dict) else {}))
    elif kind == "web_search_call":
        action = item.get("action")
        out.add("tool", tool_text("web_search", action if isinstance(action, dict) else {}))
    elif kind in ("function_call_output", "custom_tool_call_output"):
        name = names.get(string(item.get("call_id")) or "", "tool")
        text, images = _output(item.get("output"), ctx)
        out.add("echo", echo_text(name, text, len(images)), images)
    else:
        ctx.skip(f"Codex {kind if isinstance(kind, str) else 'untyped'} items")


def _remember(item: dict[str, Any], name: str, names: dict[str, str]) -> None:
    call_id = string(item.get("call_id")) or string(item.get("id"))
    if call_id:
        names[call_id] = name


def _message(item: dict[str, Any], out: Emitter) -> None:
    role = item.get("role")
    ctx = out.draft.ctx
    if role not in ("user", "assistant"):
        ctx.skip("system and developer messages")
        return
    content = item.get("content")
    parts = [{"type": "input_text", "text": content}] if isinstance(content, str) else content
    texts: list[str] = []
    images: list[ImageData] = []
    for part in parts if isinstance(parts, list) else ():
        if not isinstance(part, dict):
            continue
        kind = part.get("type")
        if kind in ("input_text", "output_text", "text"):
            text = string(part.get("text")) or ""
            if role == "user" and text.lstrip().startswith(_INJECTED):
                ctx.skip("context the agent injected")
            elif not _image_label(text):
                texts.append(text)
        elif kind == "input_image":
            image = image_from_url(part.get("image_url"), ctx)
            if image is not None:
                images.append(image)
        else:
            ctx.skip(f"Codex {kind} parts")
    if not texts and not images:
        return
    text = "\n\n".join(t for t in texts if t.strip())
    if role == "user" and text.lstrip().startswith("<turn_aborted>"):
        out.add("note", "Codex: the user interrupted the turn.")
        return
    out.add("user" if role == "user" else "ever", text, tuple(images))


def _image_label(text: str) -> bool:
    """The tags newer versions put around an attached image, which say nothing of their own."""
    stripped = text.strip()
    return stripped == "</image>" or (stripped.startswith("<image") and stripped.endswith(">"))


def _output(value: object, ctx: Context) -> tuple[str, tuple[ImageData, ...]]:
    if isinstance(value, str):
        mcp = _mcp_content(value)
        return _output(mcp, ctx) if mcp is not None else (_shell_output(value), ())
    if isinstance(value, dict):
        items = value.get("content_items")
        if isinstance(items, list):
            return _output(items, ctx)
        return _output(value.get("content", ""), ctx)
    if isinstance(value, list):
        texts: list[str] = []
        images: list[ImageData] = []
        for part in value:
            if not isinstance(part, dict):
                continue
            if part.get("type") in ("input_text", "output_text", "text"):
                texts.append(string(part.get("text")) or "")
            elif part.get("type") == "input_image":
                image = image_from_url(part.get("image_url"), ctx)
                if image is not None:
                    images.append(image)
            elif part.get("type") == "image":  # an MCP result's image
                image = image_from_base64(part.get("mimeType"), part.get("data"), ctx)
                if image is not None:
                    images.append(image)
        return "\n".join(texts), tuple(images)
    return "", ()


def _mcp_content(text: str) -> list[Any] | None:
    """The content items of an MCP tool's result, which older versions logged as JSON text: a
    list of `{"type": "text", "text"}` (and image) items, or the whole result, `{"content": […]}`.
    None for any other output."""
    if not text.startswith(("[", '{"content"')):
        return None
    try:
        value = json.loads(text)
    except (ValueError, RecursionError):
        return None
    items = value.get("content") if isinstance(value, dict) else value
    if not isinstance(items, list) or not items:
        return None
    known = all(isinstance(item, dict) and isinstance(item.get("type"), str) for item in items)
    return items if known else None


def _shell_output(text: str) -> str:
    """An output string; older versions wrote a shell's as JSON with its exit code."""
    if not text.startswith("{"):
        return text
    try:
        value = json.loads(text)
    except ValueError:
        return text
    output = value.get("output") if isinstance(value, dict) else None
    if not isinstance(output, str):
        return text
    metadata = value.get("metadata")
    code = metadata.get("exit_code") if isinstance(metadata, dict) else None
    if isinstance(code, int) and not isinstance(code, bool):
        ending = "" if not output or output.endswith("\n") else "\n"
        return f"{output}{ending}[exit status {code}]"
    return output
