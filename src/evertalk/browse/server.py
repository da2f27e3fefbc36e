"""The browse page's HTTP server: 127.0.0.1 only, read-only, every path behind a random token.

Every URL starts with `/<token>/`, so that the page's own relative requests carry it and no
other page or local user can read the chat: a request without the token, or with a wrong one,
gets 403. The Host header must name 127.0.0.1 and the port, which stops DNS rebinding (a site
whose name resolves to 127.0.0.1 would send its own name). A request marked by evertalk's own
`fetch` tool (`mark.MARK_HEADER`) is refused: the model reads its memory through its memory
tools, and must not reach this page's token-guarded view. Only GET is served; the answers
forbid any script, style or request from another origin.
"""

from __future__ import annotations

import json
import secrets
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from importlib import resources
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

from evertalk.browse.data import BadRequest, ChatData, file_stamp
from evertalk.browse.jobs import Background
from evertalk.fetch_mark import MARK_HEADER
from evertalk.store.errors import StoreError

POLICY = (
    "default-src 'self'; img-src 'self' data:; style-src 'self'; script-src 'self'; "
    "connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
)
ASSETS = {
    "": ("page.html", "text/html; charset=utf-8"),
    "page.js": ("page.js", "text/javascript; charset=utf-8"),
    "page.css": ("page.css", "text/css; charset=utf-8"),
}


def asset(name: str) -> bytes:
    return resources.files("evertalk.browse").joinpath(name).read_bytes()


class BrowseServer(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, data: ChatData, ledger: Path, port: int = 0) -> None:
        super().__init__(("127.0.0.1", port), BrowseHandler)
        self.data = data
        self.token = secrets.token_urlsafe(24)
        self.hosts = {f"127.0.0.1:{self.port}", f"localhost:{self.port}"}
        chat_dir = data.chat_dir
        self.sawtooth = Background(["sawtooth", str(chat_dir)], data.t)
        self.usage = Background(["usage", str(ledger)], lambda: file_stamp(ledger))
        # the usage starts now; the sawtooth (seconds of CPU at a million messages) when the
        # page first asks for it, once its lines are shown, so that the first paint does not
        # share the machine with it
        self.usage.get()

    @property
    def port(self) -> int:
        return int(self.server_address[1])

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/{self.token}/"


class BrowseHandler(BaseHTTPRequestHandler):
    server: BrowseServer
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: Any) -> None:
        """Quiet: a log line would carry the token to the terminal's scrollback."""

    def do_GET(self) -> None:
        route = self._route()
        if route is None:
            return
        path, query = route
        try:
            self._serve(path, query)
        except BadRequest as error:
            self._json({"error": str(error)}, HTTPStatus.BAD_REQUEST)
        except StoreError as error:
            self._json({"error": str(error)}, HTTPStatus.INTERNAL_SERVER_ERROR)

    def _refuse(self) -> None:
        self._send(HTTPStatus.METHOD_NOT_ALLOWED, b"read-only\n", "text/plain; charset=utf-8")

    do_POST = do_PUT = do_DELETE = do_PATCH = _refuse

    def _route(self) -> tuple[str, dict[str, list[str]]] | None:
        """The path after the token and the query, or None once refused."""
        if self.headers.get("Host", "") not in self.server.hosts:
            self._send(HTTPStatus.FORBIDDEN, b"wrong host\n", "text/plain; charset=utf-8")
            return None
        if MARK_HEADER in self.headers:  # the model's fetch tool: the chat is not for it
            self._send(HTTPStatus.FORBIDDEN, b"not for fetch\n", "text/plain; charset=utf-8")
            return None
        parts = urlsplit(self.path)
        token, _, rest = parts.path.lstrip("/").partition("/")
        if not secrets.compare_digest(token.encode(), self.server.token.encode()):
            self._send(HTTPStatus.FORBIDDEN, b"forbidden\n", "text/plain; charset=utf-8")
            return None
        return rest, parse_qs(parts.query)

    def _serve(self, path: str, query: dict[str, list[str]]) -> None:
        server, data = self.server, self.server.data
        if path in ASSETS:
            name, media_type = ASSETS[path]
            self._send(HTTPStatus.OK, asset(name), media_type)
        elif path == "api/view":
            self._json(data.view())
        elif path == "api/zoom":
            self._json(data.zoom(_number(query, "id"), _number(query, "n")))
        elif path == "api/date":
            self._json(data.date(_number(query, "id")))
        elif path == "api/status":
            self._json(data.status())
        elif path == "api/sawtooth":
            self._json(server.sawtooth.get() or {"ready": False})
        elif path == "api/usage":
            self._json(server.usage.get() or {"ready": False})
        elif path == "api/image":
            media_type, body = data.image(query.get("name", [""])[0])
            self._send(HTTPStatus.OK, body, media_type)
        else:
            self._send(HTTPStatus.NOT_FOUND, b"not found\n", "text/plain; charset=utf-8")

    def _json(self, value: dict[str, Any], status: HTTPStatus = HTTPStatus.OK) -> None:
        self._send(status, json.dumps(value).encode(), "application/json")

    def _send(self, status: HTTPStatus, body: bytes, media_type: str) -> None:
        self.send_response(status)
        self.send_header("Content-Type", media_type)
        self.send_header("Content-Length", str(len(body)))
        self.send_header("Content-Security-Policy", POLICY)
        self.send_header("X-Content-Type-Options", "nosniff")
        self.send_header("Referrer-Policy", "no-referrer")
        self.send_header("Cache-Control", "no-store")
        self.end_headers()
        self.wfile.write(body)


def _number(query: dict[str, list[str]], name: str) -> int:
    values = query.get(name)
    try:
        return int(values[0]) if values else _missing(name)
    except ValueError:
        raise BadRequest(f"{name} must be a whole number") from None


def _missing(name: str) -> int:
    raise BadRequest(f"{name} is missing")
