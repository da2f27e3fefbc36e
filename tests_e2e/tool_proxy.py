"""A loopback proxy between evertalk and the llama-cpp-python server that forces one tool call.

SmolLM2-135M never chooses a tool by itself, and evertalk sends `tool_choice` "auto" for a turn
(the model decides). The server does offer a way: a `tool_choice` that
names a function makes it constrain the reply to that function's JSON arguments (a grammar made
from the tool's schema) and return it as a tool call. So the proxy adds
`"tool_choice": {"type": "function", "function": {"name": TOOL}}` to the first chat request
that offers tools with `tool_choice` "auto" (a turn's first call; compactions send "none"), and
passes every other request through untouched: the round trip that follows (the tool's result
sent back, the model's answer) is evertalk's own.

Each exchange is recorded (what was sent, the status, whether a stream ended with a finish
reason, the body of an error), for the test's assertions and its report.
"""

from __future__ import annotations

import http.client
import json
import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import urlsplit

_HOP_BY_HOP = frozenset(
    {"connection", "keep-alive", "transfer-encoding", "content-length", "proxy-connection"}
)


@dataclass
class Exchange:
    """One request through the proxy and how the server answered it."""

    path: str
    forced: bool = False
    tool_choice: Any = None
    roles: list[str] = field(default_factory=list)
    null_content: bool = False
    """An assistant message with `"content": null` was sent (llama-cpp-python refuses it)."""
    tool_results: int = 0
    status: int | None = None
    finish_reasons: list[str] = field(default_factory=list)
    error_body: str | None = None

    def as_dict(self) -> dict[str, Any]:
        return {
            "path": self.path,
            "forced": self.forced,
            "tool_choice": self.tool_choice,
            "roles": self.roles,
            "null_content": self.null_content,
            "tool_results": self.tool_results,
            "status": self.status,
            "finish_reasons": self.finish_reasons,
            "error_body": self.error_body,
        }


class ToolForcingProxy:
    """Listens on 127.0.0.1 (a free port) and forwards to `upstream` (the server's base URL,
    ending in /v1). `base_url` is the address to give evertalk instead."""

    def __init__(self, upstream: str, tool: str) -> None:
        parts = urlsplit(upstream)
        if parts.hostname is None or parts.port is None:
            raise ValueError(f"upstream needs a host and a port: {upstream}")
        self.upstream_host = parts.hostname
        self.upstream_port = parts.port
        self.upstream_prefix = parts.path.rstrip("/")
        self.tool = tool
        self.exchanges: list[Exchange] = []
        self._forced = False
        self._lock = threading.Lock()
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler_class())
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    @property
    def base_url(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host!s}:{port}{self.upstream_prefix}"

    def __enter__(self) -> ToolForcingProxy:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=10)

    def chat_exchanges(self) -> list[Exchange]:
        with self._lock:
            return [e for e in self.exchanges if e.path.endswith("/chat/completions")]

    # --- the request's body --------------------------------------------------------------

    def _rewrite(self, body: bytes, exchange: Exchange) -> bytes:
        try:
            request = json.loads(body)
        except ValueError:
            return body
        if not isinstance(request, dict):
            return body
        messages = request.get("messages")
        if isinstance(messages, list):
            for message in messages:
                if not isinstance(message, dict):
                    continue
                exchange.roles.append(str(message.get("role")))
                if message.get("role") == "tool":
                    exchange.tool_results += 1
                if (
                    message.get("role") == "assistant"
                    and "content" in message
                    and message["content"] is None
                ):
                    exchange.null_content = True
        with self._lock:
            chosen = request.get("tool_choice", "auto")  # a turn's: "auto" (or left out)
            force = not self._forced and bool(request.get("tools")) and chosen == "auto"
            if force:
                self._forced = True
        if force:
            request["tool_choice"] = {"type": "function", "function": {"name": self.tool}}
            exchange.forced = True
            body = json.dumps(request).encode("utf-8")
        exchange.tool_choice = request.get("tool_choice")
        return body

    # --- the handler -----------------------------------------------------------------------

    def _handler_class(self) -> type[BaseHTTPRequestHandler]:
        proxy = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.0"  # one exchange per connection: the body ends at close

            def log_message(self, format: str, *args: Any) -> None:
                pass

            def do_GET(self) -> None:
                proxy._forward(self, b"")

            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                proxy._forward(self, self.rfile.read(length))

        return Handler

    def _forward(self, handler: BaseHTTPRequestHandler, body: bytes) -> None:
        exchange = Exchange(path=handler.path)
        with self._lock:
            self.exchanges.append(exchange)
        if handler.command == "POST" and handler.path.endswith("/chat/completions"):
            body = self._rewrite(body, exchange)
        headers = {
            k: v
            for k, v in handler.headers.items()
            if k.lower() not in _HOP_BY_HOP and k.lower() != "host"
        }
        headers["Content-Length"] = str(len(body))
        upstream = http.client.HTTPConnection(self.upstream_host, self.upstream_port, timeout=900)
        try:
            upstream.request(handler.command, handler.path, body=body or None, headers=headers)
            response = upstream.getresponse()
            exchange.status = response.status
            handler.send_response(response.status, response.reason)
            for key, value in response.getheaders():
                if key.lower() not in _HOP_BY_HOP:
                    handler.send_header(key, value)
            handler.send_header("Connection", "close")
            handler.end_headers()
            seen = bytearray()
            while chunk := response.read1(65536):
                seen += chunk
                handler.wfile.write(chunk)
                handler.wfile.flush()
            self._note_reply(exchange, bytes(seen))
        except (OSError, http.client.HTTPException) as error:
            exchange.error_body = f"proxy: {type(error).__name__}: {error}"
        finally:
            upstream.close()

    @staticmethod
    def _note_reply(exchange: Exchange, seen: bytes) -> None:
        text = seen.decode("utf-8", errors="replace")
        if exchange.status is not None and exchange.status >= 400:
            exchange.error_body = text[:2000]
            return
        for line in text.splitlines():
            payload = line.removeprefix("data:").strip()
            if not payload.startswith("{"):
                continue
            try:
                chunk = json.loads(payload)
            except ValueError:
                continue
            for choice in chunk.get("choices") or []:
                reason = choice.get("finish_reason") if isinstance(choice, dict) else None
                if reason:
                    exchange.finish_reasons.append(str(reason))
