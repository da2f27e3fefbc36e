"""Reading the paths given to an import: files, folders, a ChatGPT export's zip; telling each
file's format from what it holds."""

from __future__ import annotations

import json
import os
import zipfile
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Literal

from evertalk.importers import chatgpt, claude_code, codex, plain
from evertalk.importers.common import DUPLICATES, Context, jsonl_records
from evertalk.importers.model import Conversation, Reading

Format = Literal["claude-code", "codex", "jsonl"]

PEEK = 50
"""Lines read to tell a JSON Lines file's format: the first ones may all be of kinds that every
format could have (an empty line, a torn one, a title)."""

_READERS = {"claude-code": claude_code.read, "codex": codex.read, "jsonl": plain.read}


def read_paths(paths: Iterable[str | os.PathLike[str]], *, headings: bool = True) -> Reading:
    """Read every conversation under `paths`.

    A file is read whatever its name, by what it holds: a Claude Code transcript, a Codex
    rollout, a ChatGPT `conversations.json` or its export's zip, or evertalk's own JSON Lines.
    A folder is walked for `*.jsonl` files and ChatGPT `conversations.json` files (zips in it
    are not opened: a folder may hold any zip). What cannot be read is a problem that names the
    file (and line); reading goes on. A message whose key was already read (a Claude Code
    session resumed into a new file repeats the records before it) is kept once.

    With `headings`, each conversation of another agent starts with a `note` naming it (the
    agent, the session or title, the folder), so that the chat says where its messages came from.
    """
    ctx = Context(Reading(), headings=headings)
    done: set[Path] = set()
    for given in paths:
        path = Path(given)
        if path.is_dir():
            for found in _walk(path, ctx):
                _once(found, ctx, done)
        elif path.exists():
            _once(path, ctx, done)
        else:
            ctx.problem(str(path), "no such file or folder")
    _drop_repeats(ctx)
    return ctx.reading


def _once(path: Path, ctx: Context, done: set[Path]) -> None:
    real = path.resolve()
    if real in done:
        return
    done.add(real)
    try:
        conversations = _read_file(path, ctx)
    except OSError as error:
        ctx.problem(str(path), f"cannot be read: {error.strerror or error}")
        return
    except (ValueError, TypeError, AttributeError, KeyError, IndexError, RecursionError) as error:
        # a shape no reader expected (a newer version of a format): one file lost, not the import
        ctx.problem(
            str(path),
            f"not read: a shape this importer does not know ({type(error).__name__}: {error})",
        )
        return
    ctx.reading.conversations.extend(conversations)


def _walk(folder: Path, ctx: Context) -> Iterator[Path]:
    for top, folders, names in os.walk(folder):
        folders.sort()
        for name in sorted(names):
            if name == "history.jsonl":
                # Claude Code's and Codex's indexes of past prompts: the sessions hold them whole
                ctx.skip("prompt history files")
            elif name.endswith(".jsonl") or chatgpt.EXPORT_NAME.fullmatch(name):
                yield Path(top, name)


def _read_file(path: Path, ctx: Context) -> list[Conversation]:
    display = str(path)
    with path.open("rb") as file:
        head = file.read(4096)
    if head.startswith(b"PK\x03\x04"):
        return _read_zip(path, display, ctx)
    if not head.strip():
        ctx.skip("empty files")
        return []
    data = _whole_json(path, head)
    if data is None:
        found = _jsonl_format(path, display)
        if found is not None:
            ctx.reading.files.append(display)
            return _READERS[found](path, display, ctx)
        data = _one_document(path)  # a single line of JSON may be a whole export
    if data is None or not _is_chatgpt(data):
        ctx.problem(display, f"not a format this importer reads ({_KNOWN})")
        return []
    ctx.reading.files.append(display)
    return chatgpt.read(data, display, chatgpt.FolderAssets(path.parent), ctx)


_KNOWN = "not a Claude Code transcript, a Codex rollout, a ChatGPT export or evertalk's JSON Lines"


def _whole_json(path: Path, head: bytes) -> bytes | None:
    """The file's bytes when it is one JSON document rather than JSON Lines: it starts with `[`,
    or with a `{` whose first line is not a whole object by itself. A damaged export that starts
    with `[` is one too, so that its reader names the damage."""
    start = head.lstrip()[:1]
    if start == b"[":
        return path.read_bytes()
    if start != b"{":
        return None
    with path.open("rb") as file:
        first = file.readline()
    try:
        if isinstance(json.loads(first), dict):
            return None
    except ValueError:
        pass
    return _one_document(path)  # else JSON Lines whose first line is damaged: its reader says so


def _one_document(path: Path) -> bytes | None:
    data = path.read_bytes()
    try:
        json.loads(data)
    except ValueError:
        return None
    return data


def _read_zip(path: Path, display: str, ctx: Context) -> list[Conversation]:
    try:
        with zipfile.ZipFile(path) as archive:
            names = [
                name
                for name in archive.namelist()
                if chatgpt.EXPORT_NAME.fullmatch(os.path.basename(name))
            ]
            if not names:
                ctx.problem(display, "a zip with no conversations.json: not a ChatGPT export")
                return []
            assets = chatgpt.ZipAssets(archive)
            conversations = []
            for name in sorted(names):
                member = f"{display}!{name}"
                ctx.reading.files.append(member)
                conversations += chatgpt.read(archive.read(name), member, assets, ctx)
            return conversations
    except (zipfile.BadZipFile, zipfile.LargeZipFile, NotImplementedError) as error:
        ctx.problem(display, f"a damaged or unsupported zip ({error})")
        return []


def _is_chatgpt(data: bytes) -> bool:
    try:
        return chatgpt.looks_like(json.loads(data))
    except ValueError:
        # a damaged export still names itself by its first keys; the reader says what is wrong
        return b'"mapping"' in data[:1_000_000]


def _jsonl_format(path: Path, display: str) -> Format | None:
    scratch = Context(Reading())  # a peek reports nothing: the reader will
    for seen, (_, record) in enumerate(jsonl_records(path, display, scratch)):
        if seen >= PEEK:
            break
        if claude_code.looks_like(record):
            return "claude-code"
        if codex.looks_like(record, first=seen == 0):
            return "codex"
        if plain.looks_like(record):
            return "jsonl"
    return None


def _drop_repeats(ctx: Context) -> None:
    seen: set[str] = set()
    kept: list[Conversation] = []
    for conversation in ctx.reading.conversations:
        messages = []
        for message in conversation.messages:
            if message.key in seen:
                ctx.skip(DUPLICATES)
            else:
                seen.add(message.key)
                messages.append(message)
        if len(messages) < len(conversation.messages):
            conversation = Conversation(
                conversation.source,
                conversation.file,
                conversation.id,
                conversation.title,
                tuple(messages),
            )
        heading = f"{conversation.source}:{conversation.id}:start"
        if any(m.key != heading for m in messages):
            kept.append(conversation)
    ctx.reading.conversations = kept
