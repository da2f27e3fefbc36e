"""The `fetch` tool: a web page as readable Markdown, or a text document as it is.

Where a call may lead is checked on the addresses, not the names: the host is resolved, and every
address must be public (`private_reason`) unless `tools.fetch_private = true`; the connection then
goes to the address that was checked (the name is kept for the Host header and TLS), so that a
name that resolves differently the second time cannot swap a private address in. Redirects are
followed here, a few at most, each hop checked the same way. No proxy from the environment is
used: it would make the connection elsewhere than the address checked.

`tools.shell_network = "deny"` keeps the tools off the network: then fetch refuses every call.
The body read is bounded (`MAX_BYTES`) and so is the whole call (`TIMEOUT`); HTML goes through an
extraction library to Markdown (in a worker thread: the service's loop serves other clients
meanwhile), other text is returned as it is, and binary types are refused.
Every request carries `MARK_HEADER`, by which evertalk's own browse page refuses it.
"""

from __future__ import annotations

import ipaddress
import socket
from collections.abc import Callable
from dataclasses import dataclass
from typing import Final

import anyio
import anyio.to_thread
import httpx2

from evertalk.agent.policy import NO_NETWORK
from evertalk.agent.tools.base import Args, RunState, ToolContext, ToolError, ToolOutcome
from evertalk.fetch_mark import MARK_HEADER
from evertalk.providers.base import Text

MAX_BYTES: Final = 5_000_000
"""The most of a body read; a longer one is cut there (and the result says so)."""
MAX_REDIRECTS: Final = 5
TIMEOUT: Final = 30.0
"""Seconds a whole call may take, redirects and reading included."""
USER_AGENT: Final = "evertalk-fetch/1"
HTML_TYPES: Final = ("text/html", "application/xhtml+xml")
TEXT_TYPES: Final = (
    "application/json",
    "application/xml",
    "application/javascript",
    "application/x-ndjson",
    "application/yaml",
    "application/toml",
)
REDIRECTS: Final = frozenset({301, 302, 303, 307, 308})

Address = ipaddress.IPv4Address | ipaddress.IPv6Address
Rule = Callable[[Address], str | None]
"""Why an address must not be reached, or None: `private_reason` unless `tools.fetch_private`."""

_NAT64: Final = ipaddress.IPv6Network("64:ff9b::/96")


def parse_fetch(tool_input: object) -> FetchCall:
    args = Args("fetch", tool_input, ("url",))
    url = args.string("url", nonempty=True).strip()
    check_url(url)
    return FetchCall(url)


def check_url(url: str) -> httpx2.URL:
    """The URL parsed, or a ToolError: only http and https, with a host."""
    try:
        parsed = httpx2.URL(url)
    except (httpx2.InvalidURL, TypeError, ValueError) as error:
        raise ToolError(f"`url` is not a valid URL: {error}") from None
    if parsed.scheme not in ("http", "https"):
        raise ToolError(f"fetch reads http:// and https:// URLs only, not {url[:100]!r}")
    if not parsed.host:
        raise ToolError(f"`url` has no host: {url[:100]!r}")
    return parsed


def private_reason(address: Address) -> str | None:
    """Why `address` is not on the public internet (loopback, private, link-local, the cloud
    metadata address…), or None when it is. An IPv4 address inside IPv6 is judged as IPv4."""
    if isinstance(address, ipaddress.IPv6Address):
        embedded = address.ipv4_mapped or (
            ipaddress.IPv4Address(int(address) & 0xFFFFFFFF) if address in _NAT64 else None
        )
        if embedded is not None:
            return private_reason(embedded)
    if address.is_loopback:
        return "a loopback address"
    if address.is_unspecified:
        return "the unspecified address"
    if address.is_link_local:
        return "a link-local address (the cloud metadata address is one)"
    if address.is_multicast:
        return "a multicast address"
    if address.is_private or not address.is_global:
        return "a private address"
    return None


async def resolve(host: str, port: int) -> list[Address]:
    """The addresses of `host` (an IP literal is its own), in the resolver's order."""
    literal = host[1:-1] if host.startswith("[") else host
    try:
        return [ipaddress.ip_address(literal)]
    except ValueError:
        pass
    try:
        infos = await anyio.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except (socket.gaierror, UnicodeError) as error:
        raise ToolError(f"cannot resolve {host}: {error}") from None
    found: list[Address] = []
    for _family, _type, _proto, _name, sockaddr in infos:
        address = ipaddress.ip_address(str(sockaddr[0]).partition("%")[0])
        if address not in found:
            found.append(address)
    if not found:
        raise ToolError(f"cannot resolve {host}: no address")
    return found


def anywhere(address: Address) -> str | None:
    """The rule with `tools.fetch_private = true`: every address may be reached."""
    return None


async def checked_address(url: httpx2.URL, refuse: Rule) -> Address:
    """The address to connect to for `url`; a ToolError when `refuse` has a reason against any
    of the host's addresses (a name with one private address is refused whole)."""
    port = url.port or (443 if url.scheme == "https" else 80)
    addresses = await resolve(url.raw_host.decode("ascii"), port)
    for address in addresses:
        why = refuse(address)
        if why is not None:
            raise ToolError(
                f"fetch refuses {url.host} ({address}, {why}): set tools.fetch_private = "
                "true in config.toml to reach the local network"
            )
    return addresses[0]


@dataclass(frozen=True)
class Page:
    """What the last hop gave: where it was, its status, type and (bounded) body."""

    url: str
    status: int
    reason: str
    media_type: str
    charset: str | None
    body: bytes
    cut: bool


@dataclass(frozen=True)
class FetchCall:
    url: str

    async def run(self, ctx: ToolContext, limit: int, state: RunState) -> ToolOutcome:
        if ctx.sandbox.network == "deny":
            raise ToolError(NO_NETWORK)  # the policy refuses first; a subagent's too
        try:
            with anyio.fail_after(TIMEOUT):
                rule = anywhere if ctx.sandbox.fetch_private else private_reason
                page = await fetch_page(self.url, rule)
                # extraction is CPU work (a second or so for megabytes): off the event loop
                text = await anyio.to_thread.run_sync(render, page, abandon_on_cancel=True)
        except TimeoutError:
            raise ToolError(f"fetch of {self.url[:200]} took over {TIMEOUT:.0f} s") from None
        except httpx2.HTTPError as error:
            why = str(error) or type(error).__name__
            raise ToolError(f"fetch of {self.url[:200]} failed: {why}") from None
        return ToolOutcome([Text(text)], failed=page.status >= 400)


async def fetch_page(url: str, refuse: Rule) -> Page:
    """GET `url`, following redirects here (each hop's address checked by `refuse`), and read
    the body."""
    current = check_url(url)
    async with httpx2.AsyncClient(
        trust_env=False, follow_redirects=False, timeout=httpx2.Timeout(TIMEOUT)
    ) as client:
        for _hop in range(MAX_REDIRECTS + 1):
            address = await checked_address(current, refuse)
            request = build_request(client, current, address)
            response = await client.send(request, stream=True)
            try:
                location = response.headers.get("location")
                if response.status_code in REDIRECTS and location:
                    current = check_url(str(current.join(location)))
                    continue
                body, cut = await read_bounded(response)
            finally:
                await response.aclose()
            media_type, charset = content_type(response.headers.get("content-type", ""))
            return Page(
                str(current),
                response.status_code,
                response.reason_phrase,
                media_type,
                charset,
                body,
                cut,
            )
    raise ToolError(f"fetch of {url[:200]} was redirected more than {MAX_REDIRECTS} times")


def build_request(client: httpx2.AsyncClient, url: httpx2.URL, address: Address) -> httpx2.Request:
    """A GET to `address`, naming the host as the URL does (Host header, TLS server name)."""
    name = url.raw_host.decode("ascii")  # an international name in its IDNA form
    host = f"[{name}]" if ":" in name else name
    if url.port not in (None, 443 if url.scheme == "https" else 80):
        host += f":{url.port}"
    headers = {
        "Host": host,
        "User-Agent": USER_AGENT,
        "Accept": "text/html,application/xhtml+xml,text/*;q=0.9,application/json;q=0.8,*/*;q=0.1",
        MARK_HEADER: "1",
    }
    extensions = {"sni_hostname": name} if url.scheme == "https" else {}
    return client.build_request(
        "GET", url.copy_with(host=str(address)), headers=headers, extensions=extensions
    )


async def read_bounded(response: httpx2.Response) -> tuple[bytes, bool]:
    """Up to `MAX_BYTES` of the (decompressed) body, and whether there was more."""
    parts: list[bytes] = []
    size = 0
    async for chunk in response.aiter_bytes():
        parts.append(chunk)
        size += len(chunk)
        if size > MAX_BYTES:
            return b"".join(parts)[:MAX_BYTES], True
    return b"".join(parts), False


def content_type(header: str) -> tuple[str, str | None]:
    """(`text/html`, `utf-8`) from `text/html; charset=UTF-8`."""
    media_type, _, rest = header.partition(";")
    charset = None
    for parameter in rest.split(";"):
        name, _, value = parameter.partition("=")
        if name.strip().lower() == "charset" and value.strip():
            charset = value.strip().strip('"').lower()
    return media_type.strip().lower(), charset


def is_text(media_type: str) -> bool:
    return (
        media_type.startswith("text/")
        or media_type in TEXT_TYPES
        or media_type.endswith(("+json", "+xml"))
    )


def render(page: Page) -> str:
    """The result: the final URL, the status and type, then the page as Markdown or text."""
    shown_type = page.media_type or "no type given"
    head = f"URL: {page.url}\nStatus: {page.status} {page.reason}".rstrip()
    head += f"\nType: {shown_type}\n"
    if page.media_type and not (page.media_type in HTML_TYPES or is_text(page.media_type)):
        raise ToolError(
            f"fetch of {page.url[:200]} gave {page.media_type} (status {page.status}), which is "
            "not text: fetch returns web pages and text only"
        )
    if page.cut:
        head += f"[only the first {MAX_BYTES:,} bytes were read]\n"
    if page.media_type in HTML_TYPES or (not page.media_type and looks_like_html(page.body)):
        return head + "\n" + markdown(page.body, page.url)
    return head + "\n" + decode(page.body, page.charset)


def looks_like_html(body: bytes) -> bool:
    start = body[:512].lstrip().lower()
    return start.startswith((b"<!doctype html", b"<html"))


def decode(body: bytes, charset: str | None) -> str:
    try:
        return body.decode(charset or "utf-8", errors="replace")
    except LookupError:  # a charset Python does not know
        return body.decode("utf-8", errors="replace")


def markdown(body: bytes, url: str) -> str:
    """The page's main content as Markdown (headings, lists, links kept)."""
    import trafilatura  # slow to import: only when a page is fetched

    text = trafilatura.extract(
        body,
        url=url,
        output_format="markdown",
        include_links=True,
        include_formatting=True,
        include_tables=True,
        include_images=False,
        include_comments=False,
        favor_recall=True,
    )
    return text or "(the page has no readable text)"
