"""Ways to reach a fake: in-process through an httpx2 transport, or over loopback with uvicorn.

In-process: `async_client(app)` / `sync_client(app)` give httpx2 clients whose transport runs the
ASGI app and streams its body as the app sends it. (httpx2's own `ASGITransport` waits for the
whole response before returning it, so nothing would stream; `MockTransport` knows no ASGI.)
A response the app leaves incomplete (a cut stream) raises `httpx2.RemoteProtocolError` while the
body is read, as the socket transport does when a server drops the connection mid-body.

Loopback: `with serve(app) as url:` runs uvicorn on 127.0.0.1 on a free port in a thread
(starting takes ~10 ms, stopping ~0.2 s; `SwitchApp` lets one server serve many fakes).

`anthropic_async(target)` / `openai_async(target)` build SDK clients for either: `target` is an
ASGI app (in-process) or a base URL from `serve` (loopback).
"""

from __future__ import annotations

import asyncio
import contextlib
import math
import queue
import socket
import threading
import time
from collections.abc import AsyncIterator, Iterator, MutableMapping
from typing import Any

import anthropic
import anyio
import anyio.from_thread
import httpx2
import openai
import uvicorn
from anyio.streams.memory import MemoryObjectReceiveStream
from starlette.types import ASGIApp, Receive, Scope, Send

IN_PROCESS_URL = "http://fake.test"

Message = MutableMapping[str, Any]


def _scope(request: httpx2.Request) -> dict[str, Any]:
    url = request.url
    return {
        "type": "http",
        "asgi": {"version": "3.0", "spec_version": "2.4"},
        "http_version": "1.1",
        "method": request.method,
        "scheme": url.scheme,
        "path": url.path,
        "raw_path": url.raw_path.split(b"?")[0],
        "query_string": url.query,
        "root_path": "",
        "headers": [(k.lower(), v) for k, v in request.headers.raw],
        "server": (url.host, url.port or (443 if url.scheme == "https" else 80)),
        "client": ("127.0.0.1", 50000),
    }


def _incomplete() -> httpx2.RemoteProtocolError:
    return httpx2.RemoteProtocolError(
        "peer closed connection without sending complete message body (incomplete chunked read)"
    )


class StreamingASGITransport(httpx2.AsyncBaseTransport):
    """Runs the app in an asyncio task per request; body chunks reach the client as sent."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        body = await request.aread()
        sender, receiver = anyio.create_memory_object_stream[Message | BaseException](math.inf)
        closed = anyio.Event()
        asked = False

        async def receive() -> Message:
            nonlocal asked
            if not asked:
                asked = True
                return {"type": "http.request", "body": body, "more_body": False}
            await closed.wait()
            return {"type": "http.disconnect"}

        async def send(message: Message) -> None:
            with contextlib.suppress(anyio.BrokenResourceError, anyio.ClosedResourceError):
                sender.send_nowait(message)

        async def run() -> None:
            with sender:
                try:
                    await self.app(_scope(request), receive, send)
                except Exception as exc:
                    with contextlib.suppress(anyio.BrokenResourceError):
                        sender.send_nowait(exc)

        task = asyncio.get_running_loop().create_task(run())
        try:
            first = await receiver.receive()
        except anyio.EndOfStream:
            raise httpx2.RemoteProtocolError("server disconnected without a response") from None
        except BaseException:
            task.cancel()
            raise
        if isinstance(first, BaseException):
            raise first
        stream = _AsyncBody(receiver, task, closed)
        return httpx2.Response(first["status"], headers=first.get("headers", []), stream=stream)


class _AsyncBody(httpx2.AsyncByteStream):
    def __init__(
        self,
        receiver: MemoryObjectReceiveStream[Message | BaseException],
        task: asyncio.Task[None],
        closed: anyio.Event,
    ) -> None:
        self.receiver = receiver
        self.task = task
        self.closed = closed

    async def __aiter__(self) -> AsyncIterator[bytes]:
        while True:
            try:
                message = await self.receiver.receive()
            except (anyio.EndOfStream, anyio.ClosedResourceError):
                raise _incomplete() from None
            if isinstance(message, BaseException):
                raise httpx2.ReadError(f"fake app failed: {message!r}") from message
            if message["type"] == "http.response.body":
                if chunk := message.get("body", b""):
                    yield chunk
                if not message.get("more_body", False):
                    return

    async def aclose(self) -> None:
        self.closed.set()
        self.receiver.close()
        if not self.task.done():
            self.task.cancel()
        with contextlib.suppress(asyncio.CancelledError, Exception):
            await self.task


class SyncASGITransport(httpx2.BaseTransport):
    """The same for `httpx2.Client`: the app runs on an event loop in a thread of its own."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app
        self._portal_cm: contextlib.AbstractContextManager[anyio.from_thread.BlockingPortal] | None
        self._portal_cm = None
        self._lock = threading.Lock()

    @property
    def _portal(self) -> anyio.from_thread.BlockingPortal:
        with self._lock:
            if self._portal_cm is None:
                self._portal_cm = anyio.from_thread.start_blocking_portal()
                self._portal_obj = self._portal_cm.__enter__()
            return self._portal_obj

    def handle_request(self, request: httpx2.Request) -> httpx2.Response:
        body = request.read()
        messages: queue.Queue[Message | BaseException | None] = queue.Queue()
        closed = self._portal.call(anyio.Event)
        scope = _scope(request)

        async def run() -> None:
            asked = False

            async def receive() -> Message:
                nonlocal asked
                if not asked:
                    asked = True
                    return {"type": "http.request", "body": body, "more_body": False}
                await closed.wait()
                return {"type": "http.disconnect"}

            async def send(message: Message) -> None:
                messages.put(message)

            try:
                await self.app(scope, receive, send)
            except Exception as exc:
                messages.put(exc)
            finally:
                messages.put(None)

        future = self._portal.start_task_soon(run)
        first = messages.get()
        if first is None:
            raise httpx2.RemoteProtocolError("server disconnected without a response")
        if isinstance(first, BaseException):
            raise first
        stream = _SyncBody(messages, lambda: self._portal.call(closed.set), future.cancel)
        return httpx2.Response(first["status"], headers=first.get("headers", []), stream=stream)

    def close(self) -> None:
        with self._lock:
            if self._portal_cm is not None:
                self._portal_cm.__exit__(None, None, None)
                self._portal_cm = None


class _SyncBody(httpx2.SyncByteStream):
    def __init__(self, messages: queue.Queue[Any], disconnect: Any, cancel: Any) -> None:
        self.messages = messages
        self.disconnect = disconnect
        self.cancel = cancel

    def __iter__(self) -> Iterator[bytes]:
        while True:
            message = self.messages.get()
            if message is None:
                raise _incomplete()
            if isinstance(message, BaseException):
                raise httpx2.ReadError(f"fake app failed: {message!r}") from message
            if message["type"] == "http.response.body":
                if chunk := message.get("body", b""):
                    yield chunk
                if not message.get("more_body", False):
                    return

    def close(self) -> None:
        with contextlib.suppress(Exception):
            self.disconnect()
        self.cancel()


def async_client(app: ASGIApp, base_url: str = IN_PROCESS_URL) -> httpx2.AsyncClient:
    return httpx2.AsyncClient(transport=StreamingASGITransport(app), base_url=base_url)


def sync_client(app: ASGIApp, base_url: str = IN_PROCESS_URL) -> httpx2.Client:
    return httpx2.Client(transport=SyncASGITransport(app), base_url=base_url)


def raw_client(target: ASGIApp | str) -> httpx2.AsyncClient:
    """A plain httpx2 client for a fake, to send what the SDKs would refuse to send."""
    if isinstance(target, str):
        return httpx2.AsyncClient(base_url=target)
    return async_client(target)


class LoopbackServer:
    """uvicorn serving `app` on 127.0.0.1 (a free port) in a daemon thread."""

    def __init__(self, app: ASGIApp, *, host: str = "127.0.0.1", log_level: str = "warning"):
        self.host = host
        self._socket = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self._socket.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self._socket.bind((host, 0))
        self.port: int = self._socket.getsockname()[1]
        config = uvicorn.Config(
            app,
            lifespan="off",
            log_level=log_level,
            http="h11",
            loop="asyncio",
            timeout_graceful_shutdown=1,
        )
        self.server = uvicorn.Server(config)
        self._thread = threading.Thread(
            target=self.server.run, kwargs={"sockets": [self._socket]}, daemon=True
        )

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"

    def start(self, timeout: float = 10.0) -> str:
        self._thread.start()
        deadline = time.monotonic() + timeout
        while not self.server.started:
            if not self._thread.is_alive() or time.monotonic() > deadline:
                raise RuntimeError("the loopback server did not start")
            time.sleep(0.005)
        return self.url

    def stop(self, timeout: float = 10.0) -> None:
        self.server.should_exit = True
        self._thread.join(timeout)
        if self._thread.is_alive():
            self.server.force_exit = True
            self._thread.join(timeout)
        self._socket.close()


class InFlight:
    """Wraps a fake: counts the requests inside it, +1 when one arrives, -1 once its reply has
    been sent in full (or failed). `peak` is the most there ever were at once."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app
        self.now = 0
        self.peak = 0

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        self.now += 1
        self.peak = max(self.peak, self.now)
        try:
            await self.app(scope, receive, send)
        finally:
            self.now -= 1


class SwitchApp:
    """An ASGI app that forwards to whichever app is `current`: one loopback server (started
    once, e.g. per test session) can then serve a fresh fake per test."""

    def __init__(self, current: ASGIApp | None = None) -> None:
        self.current = current

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if self.current is None:
            raise RuntimeError("SwitchApp: no app to forward to")
        await self.current(scope, receive, send)


@contextlib.contextmanager
def serve(app: ASGIApp, *, log_level: str = "warning") -> Iterator[str]:
    """Serves `app` on loopback for the duration; yields its base URL (no path)."""
    server = LoopbackServer(app, log_level=log_level)
    try:
        yield server.start()
    finally:
        server.stop()


def anthropic_async(
    target: ASGIApp | str, *, api_key: str = "test-key", **options: Any
) -> anthropic.AsyncAnthropic:
    """An SDK client for a fake: in-process for an app, over HTTP for a base URL."""
    if isinstance(target, str):
        return anthropic.AsyncAnthropic(api_key=api_key, base_url=target, **options)
    client = async_client(target)
    return anthropic.AsyncAnthropic(
        api_key=api_key, base_url=IN_PROCESS_URL, http_client=client, **options
    )


def openai_async(
    target: ASGIApp | str, *, api_key: str = "test-key", **options: Any
) -> openai.AsyncOpenAI:
    """The same for OpenAI; the `/v1` of the base URL is added here."""
    if isinstance(target, str):
        return openai.AsyncOpenAI(api_key=api_key, base_url=f"{target}/v1", **options)
    client = async_client(target)
    return openai.AsyncOpenAI(
        api_key=api_key, base_url=f"{IN_PROCESS_URL}/v1", http_client=client, **options
    )
