"""A ChatGPT data export: `conversations.json`, alone or in the export's zip.

The file is one JSON list of conversations, each with `title`, `create_time` (a Unix time in
seconds), `conversation_id` (or `id`), `current_node`, and `mapping`: node id → `{message,
parent, children}`, a tree, since editing a message or regenerating a reply starts a branch.
A message has `author.role` (`system`, `user`, `assistant`, `tool`) and `author.name` (the tool's
name), `create_time` (sometimes null), `recipient` (`all`, or the tool an assistant message
calls), `metadata` and `content`: `{content_type, parts}` for `text` and `multimodal_text` (parts
are strings or objects such as `image_asset_pointer`, `audio_transcription`), `{content_type,
text}` for `code`, `execution_output` and others, `thoughts` and `reasoning_recap` for reasoning.
Images are not in the JSON: a pointer (`file-service://file-<id>`, `sediment://file_<id>`) names
a file of the export, `file-<id>-<name>.<ext>` or `file_<id>-<name>.<ext>`, sometimes `.dat`.

How it maps: the branch that ends at `current_node` (the conversation as the user last saw it)
is read; messages on other branches are counted. User text → `user`, assistant text → `ever`, an
assistant message to a tool → `tool` (its JSON, or its code), a tool's message → `echo` (a
search's or a browse's results, which the export keeps in the message's metadata, as their
titles, addresses and snippets; with none, the queries it ran), images found in the export kept.
The citation marks of a reply become links to the sources they cite (`chatgpt_search`). Left out
and counted: system messages, messages hidden from the conversation (custom instructions, memory
context), thoughts, audio and video. A list of conversations with a `mapping` is what this
reader knows; a `conversations.json` of anything else (another service's export) is a problem
naming its shape rather than a guess. The list is read one conversation at a time, so that a big
export costs little more memory than its messages.
"""

from __future__ import annotations

import json
import os
import re
import zipfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any, Final, Protocol

from evertalk.image_files import MAX_IMAGE_BYTES
from evertalk.importers.chatgpt_search import (
    Sources,
    call_queries,
    cited,
    search_results,
    searched,
)
from evertalk.importers.common import (
    OVERSIZED_IMAGES,
    THOUGHTS,
    Context,
    Draft,
    Emitter,
    echo_text,
    image_from_bytes,
    parse_time,
    string,
    tool_text,
)
from evertalk.importers.json_stream import Damaged, NotAList, list_items
from evertalk.importers.model import Conversation, ImageData, SourceKind

SOURCE: Final[SourceKind] = "chatgpt"

EXPORT_NAME = re.compile(r"conversations(-\d+)?\.json")
"""The name of the file in the export that holds the conversations."""

_ASSET = re.compile(r"(file[-_][A-Za-z0-9]+)")
_HIDDEN = "messages hidden from the conversation"


class Assets(Protocol):
    """The export's other files, where its images are."""

    def find(self, pointer: str) -> bytes | int | None:
        """The file's bytes; its size instead when it is too big to be an image the chat keeps
        (it is not read); None when the export does not have it."""


@dataclass
class ZipAssets:
    archive: zipfile.ZipFile
    _index: dict[str, str] | None = None

    def find(self, pointer: str) -> bytes | int | None:
        if self._index is None:
            self._index = _index(name for name in self.archive.namelist() if name[-1:] != "/")
        member = self._index.get(_asset_id(pointer))
        if member is None:
            return None
        try:
            size = self.archive.getinfo(member).file_size
            if size > MAX_IMAGE_BYTES:
                return size  # what the zip claims: a member may be a bomb
            return self.archive.read(member)
        except (OSError, zipfile.BadZipFile, ValueError):
            return None


@dataclass
class FolderAssets:
    root: Path
    _index: dict[str, str] = field(default_factory=dict)
    _walked: bool = False

    def find(self, pointer: str) -> bytes | int | None:
        if not self._walked:
            self._walked = True
            found = (
                os.path.join(top, name) for top, _, names in os.walk(self.root) for name in names
            )
            self._index = _index(sorted(found))
        path = self._index.get(_asset_id(pointer))
        if path is None:
            return None
        try:
            size = os.stat(path).st_size
            return size if size > MAX_IMAGE_BYTES else Path(path).read_bytes()
        except OSError:
            return None


def _index(names: Any) -> dict[str, str]:
    index: dict[str, str] = {}
    for name in names:
        match = _ASSET.match(os.path.basename(name))
        if match is not None:
            index.setdefault(match.group(1), name)
    return index


def _asset_id(pointer: str) -> str:
    found = _ASSET.search(pointer.rpartition("://")[2])
    return found.group(1) if found is not None else pointer


def read(stream: IO[bytes], display: str, assets: Assets, ctx: Context) -> list[Conversation]:
    """The conversations of an export, read one at a time from `stream`. A document that is not a
    list of conversations with a message tree is no export (another service's
    `conversations.json`); one damaged midway keeps the conversations before the damage."""
    conversations = []
    try:
        for index, item in enumerate(list_items(stream, longest=ctx.message_limit)):
            if index == 0 and not _is_conversation(item):
                ctx.problem(display, not_an_export(f"a list of {_shape(item)}"))
                return []
            if not isinstance(item, dict):
                ctx.problem(display, "not a conversation object", record=f"conversation {index}")
                continue
            conversation = _conversation(item, index, display, assets, ctx)
            if conversation is not None:
                conversations.append(conversation)
    except NotAList as error:
        ctx.problem(display, not_an_export(f"a document that starts with {error.start!r}"))
    except UnicodeDecodeError:
        ctx.problem(display, "not valid UTF-8")
    except Damaged as error:
        ctx.problem(display, f"not valid JSON: {error.why}", error.line)
    except RecursionError:
        ctx.problem(display, "not read: nested too deeply")
    return conversations


def not_an_export(shape: str) -> str:
    """The problem of a JSON document that is no ChatGPT export."""
    return (
        f"not a format this importer reads ({shape}; a ChatGPT export is a list of "
        "conversations, each with a message tree, `mapping`)"
    )


def _is_conversation(item: object) -> bool:
    return isinstance(item, dict) and isinstance(item.get("mapping"), dict)


def _shape(item: object) -> str:
    if isinstance(item, dict):
        keys = sorted(map(str, item))
        return f"objects with {', '.join(keys[:6])}" + (", …" if len(keys) > 6 else "")
    return f"{type(item).__name__} items"


def _conversation(
    item: dict[str, Any], index: int, display: str, assets: Assets, ctx: Context
) -> Conversation | None:
    conversation_id = string(item.get("conversation_id")) or string(item.get("id")) or str(index)
    title = string(item.get("title"))
    mapping = item.get("mapping")
    if not isinstance(mapping, dict):
        ctx.problem(
            display,
            "no message tree (`mapping`): a newer export format than this importer knows",
            record=f"conversation {conversation_id}",
        )
        return None
    branch = _branch(mapping, item.get("current_node"))
    on_branch = set(branch)
    ctx.skip(
        "messages on other branches (edits, regenerations)",
        sum(
            1
            for node_id, node in mapping.items()
            if node_id not in on_branch
            and isinstance(node, dict)
            and isinstance(node.get("message"), dict)
        ),
    )
    draft = Draft(SOURCE, display, conversation_id, ctx, title=title)
    draft.heading = f"Imported from ChatGPT: conversation “{title or conversation_id}”"
    last = parse_time(item.get("create_time")) or parse_time(item.get("update_time"))
    sources: Sources = {}
    asked: dict[str, list[str]] = {}  # by tool: the queries of the last call to it
    for node_id in branch:
        message = mapping[node_id].get("message")
        if not isinstance(message, dict):
            continue  # the root has none
        time = parse_time(message.get("create_time")) or last
        if time is None:
            ctx.problem(display, "a message with no time", record=f"{conversation_id}/{node_id}")
            continue
        last = time
        key = f"{SOURCE}:{conversation_id}:{node_id}"
        out = draft.record(key, f"{SOURCE} {display} {conversation_id}/{node_id}", time)
        _message(message, out, assets, (sources, asked))
    return draft.finish()


def _branch(mapping: dict[str, Any], current: object) -> list[str]:
    """The node ids from the root to `current_node`, or to the newest leaf when it is missing."""
    node = current if isinstance(current, str) and current in mapping else _newest_leaf(mapping)
    branch: list[str] = []
    seen: set[str] = set()
    while isinstance(node, str) and isinstance(mapping.get(node), dict) and node not in seen:
        seen.add(node)
        branch.append(node)
        node = mapping[node].get("parent")
    branch.reverse()
    return branch


def _newest_leaf(mapping: dict[str, Any]) -> str | None:
    """Where the conversation was last: the newest message (some have no time), then down its
    newest replies (the last child is the latest branch)."""
    best: tuple[float, str] | None = None
    for node_id, node in mapping.items():
        message = node.get("message") if isinstance(node, dict) else None
        created = message.get("create_time") if isinstance(message, dict) else None
        when = float(created) if isinstance(created, int | float) else float("-inf")
        if best is None or when >= best[0]:
            best = (when, node_id)
    if best is None:
        return None
    current = best[1]
    seen: set[str] = set()
    while current not in seen:
        seen.add(current)
        node = mapping[current]
        children = node.get("children") if isinstance(node, dict) else None
        last = children[-1] if isinstance(children, list) and children else None
        if not isinstance(last, str) or not isinstance(mapping.get(last), dict):
            break
        current = last
    return current


def _message(
    message: dict[str, Any],
    out: Emitter,
    assets: Assets,
    searches: tuple[Sources, dict[str, list[str]]],
) -> None:
    """`searches`: the results seen so far, and the queries of each tool's last call."""
    ctx = out.draft.ctx
    sources, asked = searches
    author = message.get("author")
    role = author.get("role") if isinstance(author, dict) else None
    name = string(author.get("name")) if isinstance(author, dict) else None
    metadata = message.get("metadata")
    metadata = metadata if isinstance(metadata, dict) else {}
    content = message.get("content")
    content = content if isinstance(content, dict) else {}
    kind = content.get("content_type")
    if kind in ("thoughts", "reasoning_recap"):
        ctx.skip(THOUGHTS)
        return
    if metadata.get("is_visually_hidden_from_conversation") or kind in (
        "user_editable_context",
        "model_editable_context",
    ):
        ctx.skip(_HIDDEN)
        return
    if role == "system":
        ctx.skip("system messages")
        return
    read = _content(content, ctx, assets)
    if read is None:
        ctx.skip(f"ChatGPT {kind if isinstance(kind, str) else 'untyped'} messages")
        return
    text, images, pointers = read
    text = _with_attachments(text, metadata, pointers)
    found = search_results(metadata, sources)
    if role == "tool" and not text.strip():
        text = found or searched(metadata, asked.pop(name or "", []))
    if role == "user":
        out.add("user", text, images)
    elif role == "assistant":
        recipient = string(message.get("recipient")) or "all"
        if recipient == "all":
            out.add("ever", cited(text, metadata, sources), images)
        else:
            asked[recipient] = call_queries(text)
            out.add("tool", tool_text(recipient, _call_input(text, kind)))
    elif role == "tool":
        out.add("echo", echo_text(name or "tool", text, len(images)), images)
    else:
        ctx.skip(f"ChatGPT {role if isinstance(role, str) else 'unsigned'} messages")


def _content(
    content: dict[str, Any], ctx: Context, assets: Assets
) -> tuple[str, tuple[ImageData, ...], list[str]] | None:
    """The text, images and image pointers of a message's content; None for a type not known."""
    kind = content.get("content_type")
    if kind == "tether_quote":
        fields = (content.get(name) for name in ("title", "url", "text"))
        return "\n".join(f for f in fields if isinstance(f, str) and f), (), []
    if kind == "tether_browsing_display":
        return string(content.get("result")) or string(content.get("summary")) or "", (), []
    parts = content.get("parts")
    if isinstance(parts, list):
        return _parts(parts, ctx, assets)
    text = content.get("text")
    if isinstance(text, str):
        return text, (), []
    return None


def _parts(
    parts: list[Any], ctx: Context, assets: Assets
) -> tuple[str, tuple[ImageData, ...], list[str]]:
    texts: list[str] = []
    images: list[ImageData] = []
    pointers: list[str] = []
    for part in parts:
        if isinstance(part, str):
            if part:
                texts.append(part)
            continue
        if not isinstance(part, dict):
            continue
        kind = part.get("content_type")
        pointer = string(part.get("asset_pointer"))
        if kind == "image_asset_pointer" and pointer:
            pointers.append(_asset_id(pointer))
            data = assets.find(pointer)
            image = image_from_bytes(data, ctx) if isinstance(data, bytes) else None
            if data is None:
                ctx.skip("images not in the export")
                texts.append("[image not in the export]")
            elif isinstance(data, int):
                ctx.skip(OVERSIZED_IMAGES)
                texts.append("[image left out]")
            elif image is None:
                texts.append("[image left out]")
            else:
                images.append(image)
        elif kind in (
            "audio_asset_pointer",
            "real_time_user_audio_video_asset_pointer",
            "video_container_asset_pointer",
        ):
            ctx.skip("audio and video")
        elif isinstance(part.get("text"), str):
            texts.append(part["text"])
        else:
            ctx.skip(f"ChatGPT {kind if isinstance(kind, str) else 'untyped'} parts")
    return "\n".join(texts), tuple(images), pointers


def _with_attachments(text: str, metadata: dict[str, Any], pointers: list[str]) -> str:
    """The text, with a line naming each attached file that is not one of its images."""
    attachments = metadata.get("attachments")
    names = [
        name
        for item in (attachments if isinstance(attachments, list) else ())
        if isinstance(item, dict)
        and (name := string(item.get("name")))
        and string(item.get("id")) not in pointers
    ]
    lines = [f"[attached: {name}]" for name in names]
    return "\n".join([text, *lines]) if text and lines else text or "\n".join(lines)


def _call_input(text: str, kind: object) -> object:
    try:
        value = json.loads(text)
    except ValueError:
        value = None
    if isinstance(value, dict):
        return value
    return {"code": text} if kind == "code" else {"input": text}
