"""evertalk's own import format: JSON Lines, one message per line,

    {"role": "user", "text": "...", "time": "2025-06-01T10:00:00+02:00", "id": "..."}

`role` is `user`, `assistant`, `tool` or `note`; `assistant` becomes `ever`, the others keep
their name. `time` names its zone (UTC when it does not); `id` is optional, a string or a number
unique within the file. The text is kept as
given (a `tool` line's text is not reformatted). Other keys are ignored.

Keys are `jsonl:<file name without extension>:<id>`; a line without an id gets one made of its
role, text and time, with `#n` for the n-th repeat of the same line, so that lines added or
removed elsewhere in the file do not change it.
"""

from __future__ import annotations

import hashlib
import json
from collections import Counter
from datetime import datetime
from pathlib import Path
from typing import Any, Final, Literal

from evertalk.importers.common import Context, Draft, compact_json, jsonl_records, parse_time
from evertalk.importers.model import Conversation, Kind, SourceKind

SOURCE: Final[SourceKind] = "jsonl"

Role = Literal["user", "assistant", "tool", "note"]

ROLES: Final[dict[str, Kind]] = {
    "user": "user",
    "assistant": "ever",
    "tool": "tool",
    "note": "note",
}


def looks_like(record: dict[str, Any]) -> bool:
    return "role" in record and "text" in record and "type" not in record


def record_line(role: Role, text: str, time: datetime, source_id: str | None = None) -> str:
    """One line of the format, newline included, for whatever writes such a file."""
    record: dict[str, str] = {"role": role, "text": text, "time": time.isoformat()}
    if source_id is not None:
        record["id"] = source_id
    return json.dumps(record, ensure_ascii=False) + "\n"


def read(path: Path, display: str, ctx: Context) -> list[Conversation]:
    draft = Draft(SOURCE, display, path.stem, ctx)
    repeats: Counter[str] = Counter()
    for line, record in jsonl_records(path, display, ctx):
        role = record.get("role")
        kind = ROLES.get(role) if isinstance(role, str) else None
        if kind is None:
            ctx.problem(display, f"unknown role {role!r} (user, assistant, tool or note)", line)
            continue
        text = record.get("text")
        if not isinstance(text, str):
            ctx.problem(display, "no text", line)
            continue
        time = parse_time(record.get("time"))
        if time is None:
            ctx.problem(display, "no valid time (ISO 8601)", line)
            continue
        source_id = _source_id(record.get("id"))
        if source_id is not None:
            key = f"{SOURCE}:{path.stem}:{source_id}"
        else:
            made = compact_json([role, text, time.isoformat()]).encode("utf-8", "surrogatepass")
            key = f"{SOURCE}:{path.stem}:{hashlib.sha256(made).hexdigest()[:20]}"
            repeats[key] += 1
            if repeats[key] > 1:
                key += f"#{repeats[key] - 1}"
        reference = f"{SOURCE} {display}:{line}" + (f" {source_id}" if source_id else "")
        draft.record(key, reference, time).add(kind, text)
    conversation = draft.finish()
    return [conversation] if conversation is not None else []


def _source_id(value: object) -> str | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return str(value)
    return value if isinstance(value, str) and value else None
