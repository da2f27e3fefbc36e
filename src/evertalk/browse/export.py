"""`evertalk memory browse --out FILE`: the page as one self-contained HTML file, for sharing.

The file holds the page's script and style inline, and the answers the page would ask the
server for, keyed by the same paths: the view, the status, the sawtooth, the usage, and the
zoom of the lines beneath the view's lines, breadth first from the newest, level by level,
until EXPORT_BYTES of them are in. A drill-down past that says "not included in this file"
(the served page has no such bound: it asks for each zoom when it is opened). Images are not
included. Its Content-Security-Policy allows only its own inline script and style, by hash,
and no request at all.
"""

from __future__ import annotations

import base64
import hashlib
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from evertalk.browse.data import ChatData
from evertalk.browse.jobs import sawtooth_json, usage_json
from evertalk.browse.server import asset
from evertalk.store.secure import write_atomic

EXPORT_BYTES = 4_000_000
"""The zoom answers a file holds, in bytes of JSON: about 12,000 lines of 300 bytes."""


def zoom_path(start: int, count: int) -> str:
    return f"api/zoom?id={start}&n={count}"


def embedded_answers(
    data: ChatData, chat_dir: Path, ledger: Path, room: int = EXPORT_BYTES
) -> tuple[dict[str, Any], int]:
    """The answers the file holds, and how many zooms of them."""
    view = data.view()
    answers: dict[str, Any] = {
        "api/view": view,
        "api/status": data.status(),
        "api/sawtooth": sawtooth_json(chat_dir),
        "api/usage": usage_json(ledger),
    }
    zooms = 0
    for path, answer in _zooms(data, view["lines"], room):
        answers[path] = answer
        zooms += path.startswith("api/zoom")
    return answers, zooms


def _zooms(
    data: ChatData, lines: list[dict[str, Any]], room: int
) -> Iterator[tuple[str, dict[str, Any]]]:
    """Zoom answers under the view's lines, one level of depth at a time, newest first, while
    they fit in `room` bytes; a message's date comes with it (`api/date`)."""
    level = [(line["id"], line["n"]) for line in reversed(lines)]
    while level:
        below: list[tuple[int, int]] = []
        for start, count in level:
            answer = data.zoom(start, count)
            room -= len(json.dumps(answer))
            if room < 0:
                return
            yield zoom_path(start, count), answer
            if count == 1:
                message = answer["message"]
                yield f"api/date?id={start}", {"id": start, "date": message["date"]}
            else:
                below += [(child["id"], child["n"]) for child in reversed(answer["children"])]
        level = below


def document(answers: dict[str, Any]) -> str:
    """The page with its assets inline and `answers` embedded."""
    page = asset("page.html").decode()
    style = asset("page.css").decode()
    script = asset("page.js").decode()
    # "<" as \u003c: no text of the chat can end the script element early
    payload = json.dumps(answers).replace("<", "\\u003c")
    policy = (
        "default-src 'none'; img-src data:; "
        f"style-src '{_hash(style)}'; script-src '{_hash(script)}'; base-uri 'none'; "
        "form-action 'none'"
    )
    head = f'<meta http-equiv="Content-Security-Policy" content="{policy}">\n<style>{style}</style>'
    body = (
        f'<script type="application/json" id="embedded">{payload}</script>\n'
        f"<script>{script}</script>"
    )
    page = page.replace('<link rel="stylesheet" href="page.css">', head)
    return page.replace('<script src="page.js"></script>', body)


def _hash(text: str) -> str:
    digest = hashlib.sha256(text.encode()).digest()
    return "sha256-" + base64.b64encode(digest).decode()


def write_page(
    data: ChatData, ledger: Path, out: Path, room: int = EXPORT_BYTES
) -> tuple[int, int]:
    """Write the file (0600); returns its size in bytes and the zooms it holds."""
    answers, zooms = embedded_answers(data, data.chat_dir, ledger, room)
    body = document(answers).encode()
    write_atomic(out, body)
    return len(body), zooms
