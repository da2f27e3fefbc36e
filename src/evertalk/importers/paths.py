"""Reading the paths given to an import: files, folders, a ChatGPT export's zip; telling each
file's format from what it holds."""

from __future__ import annotations

import codecs
import os
import zipfile
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Literal

from evertalk.importers import chatgpt, claude_code, codex, plain
from evertalk.importers.common import (
    DUPLICATES,
    MAX_DOCUMENT_BYTES,
    MAX_LINE_BYTES,
    MAX_MESSAGE_CHARS,
    UNKNOWN_FORMAT,
    Context,
    byte_size,
    jsonl_records,
)
from evertalk.importers.model import Conversation, Reading

Format = Literal["claude-code", "codex", "jsonl"]

PEEK = 50
"""Lines read to tell a JSON Lines file's format: the first ones may all be of kinds that every
format could have (an empty line, a torn one, a title)."""

_READERS = {"claude-code": claude_code.read, "codex": codex.read, "jsonl": plain.read}


def read_paths(
    paths: Iterable[str | os.PathLike[str]],
    *,
    headings: bool = True,
    document_limit: int = MAX_DOCUMENT_BYTES,
    line_limit: int = MAX_LINE_BYTES,
    message_limit: int = MAX_MESSAGE_CHARS,
) -> Reading:
    """Read every conversation under `paths`.

    A file is read whatever its name, by what it holds: a Claude Code transcript, a Codex
    rollout, a ChatGPT `conversations.json` or its export's zip, or evertalk's own JSON Lines.
    A folder is walked for `*.jsonl` files and ChatGPT `conversations.json` files (zips in it
    are not opened: a folder may hold any zip). What cannot be read is a problem that names the
    file (and line); reading goes on. A message whose key was already read (a Claude Code
    session resumed into a new file repeats the records before it) is kept once.

    With `headings`, each conversation of another agent starts with a `note` naming it (the
    agent, the session or title, the folder), so that the chat says where its messages came from.

    A JSON document over `document_limit` bytes (as a zip's directory declares it, before
    anything is unpacked) and a line of JSON Lines over `line_limit` are problems, not read; so
    is a message over `message_limit` characters, the rest of its file read.
    """
    ctx = Context(
        Reading(),
        headings=headings,
        document_limit=document_limit,
        line_limit=line_limit,
        message_limit=message_limit,
    )
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
    if head.removeprefix(codecs.BOM_UTF8).lstrip()[:1] == b"[":
        # one JSON document, not lines: a ChatGPT export, or nothing this package reads
        return _read_export(path, display, ctx)
    found = _jsonl_format(path, display, ctx)
    if found is None:
        ctx.problem(display, f"not a format this importer reads ({UNKNOWN_FORMAT})")
        return []
    ctx.reading.files.append(display)
    return _READERS[found](path, display, ctx)


def _read_export(path: Path, display: str, ctx: Context) -> list[Conversation]:
    if _too_big(path.stat().st_size, display, ctx):
        return []
    ctx.reading.files.append(display)
    with path.open("rb") as stream:
        return chatgpt.read(stream, display, chatgpt.FolderAssets(path.parent), ctx)


def _too_big(size: int, display: str, ctx: Context) -> bool:
    if size <= ctx.document_limit:
        return False
    ctx.problem(
        display,
        f"{byte_size(size)} of JSON, over the {byte_size(ctx.document_limit)} an import reads; "
        "nothing was read from it",
    )
    return True


def _read_zip(path: Path, display: str, ctx: Context) -> list[Conversation]:
    try:
        with zipfile.ZipFile(path) as archive:
            members = [
                info
                for info in archive.infolist()
                if chatgpt.EXPORT_NAME.fullmatch(os.path.basename(info.filename))
            ]
            if not members:
                ctx.problem(display, "a zip with no conversations.json: not a ChatGPT export")
                return []
            assets = chatgpt.ZipAssets(archive)
            conversations = []
            for info in sorted(members, key=lambda found: found.filename):
                member = f"{display}!{info.filename}"
                # the size the zip declares bounds what unpacking gives, so it is checked first
                if _too_big(info.file_size, member, ctx):
                    continue
                ctx.reading.files.append(member)
                with archive.open(info) as stream:
                    conversations += chatgpt.read(stream, member, assets, ctx)
            return conversations
    except (zipfile.BadZipFile, zipfile.LargeZipFile, NotImplementedError) as error:
        ctx.problem(display, f"a damaged or unsupported zip ({error})")
        return []


def _jsonl_format(path: Path, display: str, ctx: Context) -> Format | None:
    scratch = Context(Reading(), line_limit=ctx.line_limit)  # a peek reports nothing
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
