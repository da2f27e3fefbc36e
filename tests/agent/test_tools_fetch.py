"""The fetch tool against a real HTTP server on loopback: Markdown, redirects, status, clipping,
the bounded read, types it refuses; and the addresses it refuses (issue 25 §2)."""

from __future__ import annotations

import ipaddress
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest
from test_policy import ScriptedAsker

from evertalk.agent.policy import DENIED, Policy
from evertalk.agent.tools import Toolbox, ToolContext, ToolOutcome
from evertalk.agent.tools.base import ToolError
from evertalk.agent.tools.fetch import (
    MAX_BYTES,
    Address,
    fetch_page,
    private_reason,
)
from evertalk.agent.tools.sandbox import Sandbox
from evertalk.client.asks import request_line
from evertalk.config import ToolPolicies
from evertalk.memory.text import MESSAGE_LIMIT
from evertalk.prompts import TOOLS
from evertalk.protocol.replies import Ask

pytestmark = pytest.mark.anyio

LIMIT = MESSAGE_LIMIT - len("fetch: ")

ARTICLE = b"""<!doctype html><html><head><title>Tide tables</title></head><body>
<nav><a href="/">Home</a> | <a href="/about">About</a></nav>
<article><h1>Tide tables of the north coast</h1>
<p>The tide turns twice a day; the tables below say when, for each harbour of the coast, and
the <a href="https://tides.example/method">method behind them</a> is explained elsewhere.</p>
<h2>Why the times move</h2>
<p>The moon rises about fifty minutes later each day, and high water follows it round.</p>
<ul><li>Spring tides: at new and full moon</li><li>Neap tides: at the quarters</li></ul>
</article><footer>Harbour office</footer></body></html>"""


class Handler(BaseHTTPRequestHandler):
    """The pages of the tests, by path."""

    protocol_version = "HTTP/1.1"
    seen: list[dict[str, str]]  # set on the class per server: each request's headers

    def log_message(self, format: str, *args: Any) -> None:
        """Quiet."""

    def do_GET(self) -> None:
        type(self).seen.append(dict(self.headers))
        if self.path == "/article":
            self._send(200, ARTICLE, "text/html; charset=utf-8")
        elif self.path == "/moved":
            self._redirect("/article")
        elif self.path == "/twice":
            self._redirect(f"http://localhost:{self.server.server_address[1]}/moved")
        elif self.path == "/elsewhere":
            self._redirect(f"http://127.0.0.2:{self.server.server_address[1]}/article")
        elif self.path == "/circle":
            self._redirect("/circle")
        elif self.path == "/huge":
            paragraphs = b"".join(  # distinct: the extractor drops repeated paragraphs
                b"<p>"
                + (b"Paragraph %d: the tide comes in and goes out again. " % n) * 20
                + b"</p>"
                for n in range(400)
            )
            body = b"<html><body><article><h1>Long</h1>" + paragraphs + b"</article>"
            self._send(200, body + b"</body></html>", "text/html")
        elif self.path == "/endless":
            self._send(200, b"x" * (MAX_BYTES + 1_000_000), "text/plain")
        elif self.path == "/data.json":
            self._send(200, b'{"harbour": "Wick", "high_water": "06:12"}', "application/json")
        elif self.path == "/chart.png":
            self._send(200, b"\x89PNG\r\n\x1a\n" + bytes(200), "image/png")
        elif self.path == "/gone":
            self._send(404, b"<html><body><h1>Not here</h1></body></html>", "text/html")
        else:
            self._send(404, b"no such page", "text/plain")

    def _redirect(self, location: str) -> None:
        self.send_response(302)
        self.send_header("Location", location)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def _send(self, status: int, body: bytes, media_type: str) -> None:
        self.send_response(status)
        self.send_header("Content-Type", media_type)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


class Site:
    def __init__(self, server: ThreadingHTTPServer, handler: type[Handler]) -> None:
        self.server = server
        self.handler = handler

    @property
    def port(self) -> int:
        return int(self.server.server_address[1])

    def url(self, path: str) -> str:
        return f"http://127.0.0.1:{self.port}{path}"


@pytest.fixture
def site() -> Iterator[Site]:
    handler = type("SiteHandler", (Handler,), {"seen": []})
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield Site(server, handler)
    server.shutdown()
    server.server_close()
    thread.join()


@pytest.fixture
def private(ctx: ToolContext) -> ToolContext:
    """`tools.fetch_private = true`: the loopback server may be reached."""
    ctx.sandbox = Sandbox(fetch_private=True)
    return ctx


async def fetch(ctx: ToolContext, url: object) -> ToolOutcome:
    return await Toolbox(Policy(ToolPolicies(fetch="allow")), None).run("fetch", {"url": url}, ctx)


# -- reading ------------------------------------------------------------------------------------


async def test_an_html_page_becomes_markdown(site: Site, private: ToolContext) -> None:
    outcome = await fetch(private, site.url("/article"))
    assert outcome.succeeded
    text = outcome.text
    assert text.startswith(f"URL: {site.url('/article')}\nStatus: 200 OK\nType: text/html\n")
    assert "# Tide tables of the north coast" in text
    assert "## Why the times move" in text
    assert "[method behind them](https://tides.example/method)" in text
    assert "- Spring tides: at new and full moon" in text
    assert "<p>" not in text and "<article>" not in text


async def test_redirects_are_followed_to_the_final_url(site: Site, private: ToolContext) -> None:
    outcome = await fetch(private, site.url("/twice"))  # to localhost, then to /article
    assert outcome.succeeded
    final = f"http://localhost:{site.port}/article"
    assert outcome.text.startswith(f"URL: {final}\nStatus: 200 OK\n")
    assert "# Tide tables of the north coast" in outcome.text
    hosts = [headers["Host"] for headers in site.handler.seen]
    assert hosts == [f"127.0.0.1:{site.port}", f"localhost:{site.port}", f"localhost:{site.port}"]


async def test_endless_redirects_stop(site: Site, private: ToolContext) -> None:
    outcome = await fetch(private, site.url("/circle"))
    assert outcome.is_error
    assert "redirected more than 5 times" in outcome.text


async def test_an_error_status_is_shown_and_marks_the_call_failed(
    site: Site, private: ToolContext
) -> None:
    outcome = await fetch(private, site.url("/gone"))
    assert not outcome.is_error and outcome.failed
    assert "Status: 404 Not Found" in outcome.text and "Not here" in outcome.text


async def test_json_is_returned_as_text(site: Site, private: ToolContext) -> None:
    outcome = await fetch(private, site.url("/data.json"))
    assert outcome.succeeded
    assert outcome.text.endswith('\n{"harbour": "Wick", "high_water": "06:12"}')
    assert "Type: application/json" in outcome.text


async def test_a_binary_type_is_refused_in_one_line(site: Site, private: ToolContext) -> None:
    outcome = await fetch(private, site.url("/chart.png"))
    assert outcome.is_error
    assert "image/png" in outcome.text and "\n" not in outcome.text
    assert "PNG" not in outcome.text


async def test_a_huge_page_is_clipped_like_tool_output(site: Site, private: ToolContext) -> None:
    outcome = await fetch(private, site.url("/huge"))
    assert outcome.succeeded
    assert len(outcome.text) <= LIMIT
    assert outcome.text.startswith(f"URL: {site.url('/huge')}\nStatus: 200 OK")
    assert "Paragraph 0:" in outcome.text and "Paragraph 399:" in outcome.text
    assert "Paragraph 200:" not in outcome.text  # the middle is left out, and the note says so
    assert "characters cut from the middle of this output ...]\n" in outcome.text
    assert len(outcome.log_text("fetch")) <= MESSAGE_LIMIT


async def test_the_read_is_bounded(site: Site, private: ToolContext) -> None:
    outcome = await fetch(private, site.url("/endless"))
    assert outcome.succeeded
    assert f"[only the first {MAX_BYTES:,} bytes were read]" in outcome.text
    assert len(outcome.text) <= LIMIT


async def test_every_request_is_marked_for_the_browse_page(
    site: Site, private: ToolContext
) -> None:
    await fetch(private, site.url("/article"))
    assert site.handler.seen[0].get("X-Evertalk-Fetch") == "1"


# -- refusing -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "url",
    [
        "http://127.0.0.1:9/",
        "http://localhost:9/",
        "http://10.1.2.3/",
        "http://192.168.1.1/admin",
        "http://172.16.0.1/",
        "http://169.254.169.254/latest/meta-data/",
        "http://[::1]:9/",
        "http://[fd00::1]/",
        "http://[::ffff:127.0.0.1]/",
        "http://0.0.0.0:9/",
    ],
)
async def test_private_addresses_are_refused(ctx: ToolContext, url: str) -> None:
    outcome = await fetch(ctx, url)
    assert outcome.is_error
    assert outcome.text.startswith("fetch refuses ") and "tools.fetch_private" in outcome.text
    assert "\n" not in outcome.text


async def test_the_loopback_server_itself_is_refused_without_the_setting(
    site: Site, ctx: ToolContext
) -> None:
    outcome = await fetch(ctx, site.url("/article"))
    assert outcome.is_error and "a loopback address" in outcome.text
    assert site.handler.seen == []  # refused before connecting


async def test_a_redirect_to_a_refused_address_is_refused(site: Site) -> None:
    """Each hop is checked: the first (127.0.0.1, allowed by the rule of this test) redirects
    to 127.0.0.2, which the rule refuses, as the default rule would refuse a public site's
    redirect to a private address."""

    def only_first(address: Address) -> str | None:
        return None if address == ipaddress.ip_address("127.0.0.1") else "not the first"

    with pytest.raises(
        ToolError, match=r"fetch refuses 127\.0\.0\.2 \(127\.0\.0\.2, not the first"
    ):
        await fetch_page(site.url("/elsewhere"), only_first)
    assert len(site.handler.seen) == 1


async def test_a_network_deny_refuses_before_asking() -> None:
    asker = ScriptedAsker("always")
    policy = Policy(ToolPolicies(shell_network="deny"), interactive=True)
    refusal = await policy.check("fetch", {"url": "https://example.com/"}, asker)
    assert refusal == 'fetch is off: tools.shell_network is "deny" in config.toml'
    assert asker.asked == []


async def test_a_network_deny_refuses_every_fetch(site: Site, ctx: ToolContext) -> None:
    ctx.sandbox = Sandbox(network="deny", fetch_private=True)
    outcome = await fetch(ctx, site.url("/article"))
    assert outcome.is_error
    assert outcome.text == 'fetch is off: tools.shell_network is "deny" in config.toml'
    assert site.handler.seen == []


@pytest.mark.parametrize(
    ("url", "expected"),
    [
        ("file:///etc/passwd", "http:// and https:// URLs only"),
        ("ftp://example.com/x", "http:// and https:// URLs only"),
        ("http://", "has no host"),
        ("", "must not be empty"),
        (5, "must be a string"),
    ],
)
async def test_bad_urls_are_one_line(ctx: ToolContext, url: object, expected: str) -> None:
    outcome = await fetch(ctx, url)
    assert outcome.is_error and expected in outcome.text


@pytest.mark.parametrize(
    ("address", "private"),
    [
        ("127.0.0.1", True),
        ("127.8.9.10", True),
        ("10.0.0.1", True),
        ("172.31.255.255", True),
        ("192.168.0.10", True),
        ("169.254.169.254", True),
        ("100.64.0.1", True),  # shared address space (carrier NAT)
        ("0.0.0.0", True),
        ("224.0.0.1", True),
        ("::1", True),
        ("::", True),
        ("fe80::1", True),
        ("fd12:3456::1", True),
        ("::ffff:10.0.0.1", True),
        ("64:ff9b::7f00:1", True),  # NAT64 of 127.0.0.1
        ("8.8.8.8", False),
        ("93.184.215.14", False),
        ("2606:4700:4700::1111", False),
        ("::ffff:8.8.8.8", False),
    ],
)
def test_private_reason(address: str, private: bool) -> None:
    assert (private_reason(ipaddress.ip_address(address)) is not None) == private


# -- asking -------------------------------------------------------------------------------------


async def test_fetch_asks_by_default(ctx: ToolContext) -> None:
    headless = await Toolbox(Policy(ToolPolicies()), None).run(
        "fetch", {"url": "https://example.com/"}, ctx
    )
    assert headless.is_error and headless.text.startswith(DENIED)
    assert "--allow fetch" in headless.text


async def test_always_covers_the_host(ctx: ToolContext) -> None:
    asker = ScriptedAsker("always", "deny")
    policy = Policy(ToolPolicies(), interactive=True)
    assert await policy.permit("fetch", {"url": "https://docs.example/a"}, asker)
    assert await policy.permit("fetch", {"url": "https://docs.example/b"}, asker)
    assert not await policy.permit("fetch", {"url": "https://other.example/a"}, asker)
    assert [tool for tool, _ in asker.asked] == ["fetch", "fetch"]


def test_the_question_names_the_url() -> None:
    frame = Ask(
        id="q", tool="fetch", input={"url": "https://docs.example/a"}, agent=None, outside=False
    )
    assert request_line(frame) == "Ever wants to fetch https://docs.example/a"


def test_fetch_is_offered() -> None:
    assert "fetch" in [tool.name for tool in TOOLS]
