"""Claude Code session transcripts: `~/.claude/projects/<project>/<session id>.jsonl`.

One JSON object per line, appended as the session goes. The records that are conversation have
`type` `user` or `assistant`, a `message` with `role` and `content` (a string, or a list of
blocks: `text`, `thinking`, `redacted_thinking`, `tool_use`, `tool_result`, `image`), and
`uuid`, `parentUuid`, `sessionId`, `timestamp` (ISO 8601, UTC), `isSidechain`, `cwd`,
`gitBranch`, `version`. Tool results come back in `user` records. One reply is written as
several `assistant` records, one per content block, sharing `message.id`; parallel tool results
point at different parents, so the `parentUuid` links form a tree, not a chain.

How it maps:

- user words → `user`; reply text → `ever`; `tool_use` → `tool`; `tool_result` → `echo` named
  after its call; images kept; `thinking` never imported.
- Left out and counted: `isMeta` records (caveats, hook feedback, expanded skills), compaction
  summaries (`isCompactSummary`: the messages they summarize are in the transcripts), records
  shown only in the transcript, `system`, `summary` (the one of this session titles it), `progress`,
  `file-history-snapshot`, `queue-operation` and any record type not known here, and the
  `<system-reminder>` blocks Claude Code adds to results and prompts for its model.
- Sidechains (a subagent's own thread: `isSidechain`, inline in older versions, in
  `agent-*.jsonl` files in newer ones) are left out and counted: the subagent's report comes
  back to the main thread as its call's result, an `echo`, as a subagent of the app's own
  reports to the chat while its working log stays apart.
- Slash commands, their output, `!` shell commands and interruptions → `note`; the synthetic
  replies Claude Code writes itself (API errors) → `note`.
- A rewind (the user went back to an earlier message and went on from there) keeps both
  branches, in the order they happened, with a `note` where the new branch starts: the
  abandoned exchange was said and seen, and the tree cannot always tell a rewind from parallel
  tool results, so nothing is dropped.
- The heading note is keyed and named by the `sessionId` of the file's last conversation
  record (the file's name when none has one), so that the same session under another name
  brings no second heading.
- Keys are `claude-code:<record uuid>` (without the session: `--resume` copies the earlier
  records, uuids and all, into the new session's file, and a replayed record must not be logged
  twice).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any, Final

from evertalk.importers.common import (
    DUPLICATES,
    THOUGHTS,
    Context,
    Draft,
    Emitter,
    echo_text,
    image_from_base64,
    jsonl_records,
    parse_time,
    string,
    tool_text,
)
from evertalk.importers.model import Conversation, ImageData, SourceKind

SOURCE: Final[SourceKind] = "claude-code"

RECORD_TYPES = frozenset(
    {
        "user",
        "assistant",
        "system",
        "summary",
        "file-history-snapshot",
        "queue-operation",
        "progress",
        "pr-link",
        "custom-title",
        "agent-name",
        "turn_end",
    }
)
"""Record types seen in real transcripts: enough of them in a file says it is one."""

SIDECHAIN = "subagent records (sidechains)"

_REMINDER = re.compile(r"\s*<system-reminder>.*?</system-reminder>\s*", re.DOTALL)
_TAG = re.compile(
    r"<(command-name|command-message|command-args|local-command-stdout|local-command-stderr|"
    r"local-command-caveat|bash-input|bash-stdout|bash-stderr)>(.*?)</\1>",
    re.DOTALL,
)
_INTERRUPTED = "[Request interrupted by user"
_ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")  # the terminal's colours in a command's output


def looks_like(record: dict[str, Any]) -> bool:
    """Whether a record is one of a Claude Code transcript."""
    if record.get("type") not in RECORD_TYPES:
        return False
    return any(name in record for name in ("sessionId", "parentUuid", "leafUuid", "messageId"))


@dataclass
class _Tree:
    """The `parentUuid` links, to tell a rewind: a prompt whose nearest conversation ancestor
    already had a prompt after it."""

    parents: dict[str, str | None] = field(default_factory=dict)
    spoken: set[str] = field(default_factory=set)  # records that yielded messages
    prompted: dict[str, datetime] = field(default_factory=dict)  # ancestor → first prompt's time

    def add(self, record: dict[str, Any]) -> None:
        uuid = string(record.get("uuid"))
        if uuid is not None and uuid not in self.parents:
            # a compaction boundary starts a new root but names the message it follows
            parent = string(record.get("parentUuid")) or string(record.get("logicalParentUuid"))
            self.parents[uuid] = parent

    def ancestor(self, uuid: str | None) -> str | None:
        parent = self.parents.get(uuid) if uuid is not None else None
        seen: set[str] = set()
        while parent is not None and parent not in self.spoken and parent not in seen:
            seen.add(parent)
            if parent not in self.parents:
                return parent  # a link to a record the file lacks: stop there
            parent = self.parents[parent]
        return parent

    def rewound(self, uuid: str | None, time: datetime) -> datetime | None:
        """For a prompt: the time of the prompt it replaces, if it starts a new branch."""
        ancestor = self.ancestor(uuid)
        if ancestor is None:
            return None  # a new root (a cleared session) is no rewind
        earlier = self.prompted.get(ancestor)
        if earlier is None:
            self.prompted[ancestor] = time
        return earlier


def read(path: Path, display: str, ctx: Context) -> list[Conversation]:
    draft = Draft(SOURCE, display, path.stem, ctx)
    tree = _Tree()
    names: dict[str, str] = {}  # tool_use id → tool name
    seen: set[str] = set()
    custom_title: str | None = None
    summaries: dict[str, str] = {}  # leafUuid → summary
    cwd: str | None = None
    session: str | None = None
    for line, record in jsonl_records(path, display, ctx):
        kind = record.get("type")
        tree.add(record)
        if kind == "custom-title":
            custom_title = string(record.get("customTitle")) or custom_title
        if kind == "summary":
            leaf, summary = string(record.get("leafUuid")), string(record.get("summary"))
            if leaf and summary:
                summaries[leaf] = summary
        if kind not in ("user", "assistant"):
            ctx.skip(f"Claude Code {kind if isinstance(kind, str) else 'untyped'} records")
            continue
        uuid = string(record.get("uuid"))
        if uuid is not None:
            if uuid in seen:
                ctx.skip(DUPLICATES)
                continue
            seen.add(uuid)
        if record.get("isSidechain") is True:
            ctx.skip(SIDECHAIN)
            continue
        if record.get("isMeta") is True:
            ctx.skip("meta records")
            continue
        if record.get("isCompactSummary") is True:
            ctx.skip("compaction summaries")
            continue
        if record.get("isVisibleInTranscriptOnly") is True:
            ctx.skip("records only for the transcript")
            continue
        message = record.get("message")
        if not isinstance(message, dict):
            ctx.problem(display, "a conversation record with no message", line, uuid)
            continue
        time = parse_time(record.get("timestamp"))
        if time is None:
            ctx.problem(display, "no valid timestamp", line, uuid)
            continue
        cwd = cwd or string(record.get("cwd"))
        session = string(record.get("sessionId")) or session
        key = f"{SOURCE}:{uuid}" if uuid is not None else f"{SOURCE}:{path.stem}:{line}"
        out = draft.record(key, f"{SOURCE} {display}:{line}", time)
        before = len(draft.messages)
        if kind == "user":
            _user(message, out, names, tree, uuid, time)
        else:
            _assistant(message, out, names)
        if uuid is not None and len(draft.messages) > before:
            tree.spoken.add(uuid)
    # older versions put at the top of a file the summaries of other sessions too
    own = [summary for leaf, summary in summaries.items() if leaf in tree.parents]
    draft.title = custom_title or (own[-1] if own else None)
    # the session the file ends in names it, whatever the file is called: a copy of it elsewhere
    # is the same session, and its heading is the same message
    draft.id = session or draft.id
    draft.heading = _heading(draft.id, cwd, draft.title)
    conversation = draft.finish()
    return [conversation] if conversation is not None else []


def _heading(session: str, cwd: str | None, title: str | None) -> str:
    heading = f"Imported from Claude Code: session {session}"
    if cwd:
        heading += f" in {cwd}"
    if title:
        heading += f", “{title}”"
    return heading


def _blocks(content: object) -> list[dict[str, Any]]:
    if isinstance(content, str):
        return [{"type": "text", "text": content}]
    if isinstance(content, list):
        return [
            {"type": "text", "text": b} if isinstance(b, str) else b
            for b in content
            if isinstance(b, dict | str)
        ]
    return []


def _user(
    message: dict[str, Any],
    out: Emitter,
    names: dict[str, str],
    tree: _Tree,
    uuid: str | None,
    time: datetime,
) -> None:
    texts: list[str] = []
    images: list[ImageData] = []

    def flush() -> None:
        if texts or images:
            _words(out, "\n\n".join(texts), tuple(images), tree, uuid, time)
        texts.clear()
        images.clear()

    for block in _blocks(message.get("content")):
        kind = block.get("type")
        if kind == "text":
            text = _unremind(string(block.get("text")) or "", out.draft.ctx)
            if text.strip():
                texts.append(text)
        elif kind == "image":
            image = _image(block, out.draft.ctx)
            if image is not None:
                images.append(image)
        elif kind == "tool_result":
            flush()
            _result(block, out, names)
        else:
            out.draft.ctx.skip(f"Claude Code {kind} blocks")
    flush()


def _words(
    out: Emitter,
    text: str,
    images: tuple[ImageData, ...],
    tree: _Tree,
    uuid: str | None,
    time: datetime,
) -> None:
    """What the user typed: a prompt, or one of the wrappers Claude Code puts around commands."""
    stripped = text.strip()
    if stripped.startswith(_INTERRUPTED):
        out.add("note", f"Claude Code: {stripped.strip('[]')}.", images)
        return
    tags = _TAG.findall(stripped)
    if tags and not _TAG.sub("", stripped).strip():
        note = _command_note(tags)
        if note is None:
            out.draft.ctx.skip("meta records")
        else:
            out.add("note", note, images)
        return
    earlier = tree.rewound(uuid, time)
    if earlier is not None:
        out.add_keyed(
            "rewind",
            "note",
            "Claude Code: the user rewound the session to before their message of "
            f"{earlier.isoformat(timespec='seconds')} and went on from there; what was said "
            "after that point left the session's context.",
        )
    out.add("user", text, images)


def _command_note(tags: list[tuple[str, str]]) -> str | None:
    found = {name: _ANSI.sub("", value).strip() for name, value in tags}
    if "command-name" in found:
        command = " ".join(filter(None, (found["command-name"], found.get("command-args"))))
        return f"Claude Code command: {command}"
    if "bash-input" in found:
        return f"The user ran a shell command in Claude Code: {found['bash-input']}"
    output = "\n".join(
        found[name]
        for name in ("local-command-stdout", "bash-stdout", "local-command-stderr", "bash-stderr")
        if found.get(name)
    )
    if output:
        return f"Claude Code command output:\n{output}"
    return None


def _assistant(message: dict[str, Any], out: Emitter, names: dict[str, str]) -> None:
    # the replies Claude Code makes up itself (an API error, an empty answer) are not the model's
    synthetic = message.get("model") == "<synthetic>"
    for block in _blocks(message.get("content")):
        kind = block.get("type")
        if kind == "text":
            out.add("note" if synthetic else "ever", string(block.get("text")) or "")
        elif kind in ("thinking", "redacted_thinking"):
            out.draft.ctx.skip(THOUGHTS)
        elif kind in ("tool_use", "server_tool_use"):
            name = string(block.get("name")) or "tool"
            tool_id = string(block.get("id"))
            if tool_id:
                names[tool_id] = name
            out.add("tool", tool_text(name, block.get("input", {})))
        elif kind == "web_search_tool_result":
            out.add("echo", echo_text("web_search", _search_results(block.get("content"))))
        else:
            out.draft.ctx.skip(f"Claude Code {kind} blocks")


def _result(block: dict[str, Any], out: Emitter, names: dict[str, str]) -> None:
    name = names.get(string(block.get("tool_use_id")) or "", "tool")
    texts: list[str] = []
    images: list[ImageData] = []
    for part in _blocks(block.get("content")):
        kind = part.get("type")
        if kind == "text":
            texts.append(string(part.get("text")) or "")
        elif kind == "image":
            image = _image(part, out.draft.ctx)
            if image is not None:
                images.append(image)
        else:
            out.draft.ctx.skip(f"Claude Code {kind} blocks")
    output = _unremind("\n".join(texts), out.draft.ctx)
    out.add("echo", echo_text(name, output, len(images)), tuple(images))


def _image(block: dict[str, Any], ctx: Context) -> ImageData | None:
    source = block.get("source")
    if not isinstance(source, dict) or source.get("type") != "base64":
        ctx.skip("images not in the file (links)")
        return None
    return image_from_base64(source.get("media_type"), source.get("data"), ctx)


def _unremind(text: str, ctx: Context) -> str:
    """The text without the reminders Claude Code appends for its model: they are neither the
    user's words nor the tool's output."""
    if "<system-reminder>" not in text:
        return text
    cleaned, count = _REMINDER.subn("\n", text)
    ctx.skip("system reminders", count)
    return cleaned.strip("\n")


def _search_results(content: object) -> str:
    if not isinstance(content, list):
        return ""
    lines = []
    for item in content:
        if isinstance(item, dict):
            title, url = string(item.get("title")) or "", string(item.get("url")) or ""
            lines.append(f"{title} {url}".strip())
    return "\n".join(lines)
