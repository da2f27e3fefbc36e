"""An MCP server for the tests, spoken to over stdio: `echo`, `pid` (which process answers),
`picture` (a PNG and a line of text), `crash` (the server exits during the call) and `hang`
(never answers). Run as `python flaky_server.py`."""

from __future__ import annotations

import base64
import os
import struct
import zlib

import anyio
from mcp.server import MCPServer
from mcp_types import ImageContent, TextContent

server = MCPServer("flaky")


def png(width: int = 2, height: int = 2) -> bytes:
    """A small red PNG, made here: the tests carry no image files."""

    def chunk(kind: bytes, data: bytes) -> bytes:
        body = kind + data
        return struct.pack(">I", len(data)) + body + struct.pack(">I", zlib.crc32(body))

    rows = b"".join(b"\x00" + b"\xff\x00\x00" * width for _ in range(height))
    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    return (
        b"\x89PNG\r\n\x1a\n"
        + chunk(b"IHDR", header)
        + chunk(b"IDAT", zlib.compress(rows))
        + chunk(b"IEND", b"")
    )


@server.tool()
def echo(text: str) -> str:
    """Say the text back."""
    return text


@server.tool()
def pid() -> str:
    """The id of the server's process."""
    return str(os.getpid())


@server.tool()
def picture() -> list[TextContent | ImageContent]:
    """A red square, with its caption."""
    data = base64.b64encode(png()).decode("ascii")
    return [TextContent(text="a red square"), ImageContent(data=data, mime_type="image/png")]


@server.tool()
def crash() -> str:
    """Exit while the call waits for its answer."""
    os._exit(3)


@server.tool()
async def hang() -> str:
    """Never answer."""
    await anyio.sleep_forever()
    return "unreachable"


if __name__ == "__main__":
    server.run()
