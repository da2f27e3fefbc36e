"""`evertalk memory browse`: the memory in the browser, served on 127.0.0.1 (the default) or
written as one HTML file with `--out FILE`.

Served is the default because a long chat cannot fit in one file: the page asks for each
zoom when it is opened, so every message stays one click away however long the chat is, and
the page follows a chat the service is writing. The file holds what fits (see export.py).
"""

from __future__ import annotations

import argparse
import sys
import webbrowser
from pathlib import Path

from evertalk.browse.data import ChatData
from evertalk.ledger import ledger_path
from evertalk.store.errors import StoreError
from evertalk.store_setting import files_problem
from evertalk.terminal_text import escape_controls, fail


def run_browse(args: argparse.Namespace, home: Path) -> int:
    if not 0 <= args.port <= 65535:
        return fail(f"--port must be between 0 and 65535, not {args.port}")
    chat_dir = home / "chat"
    problem = files_problem(home, "memory browse")
    if problem is not None:
        return fail(problem)
    try:
        data = ChatData(chat_dir)
    except StoreError as error:
        return fail(str(error))
    try:
        for warning in data.warnings:
            print(escape_controls(f"evertalk: warning: {warning}"), file=sys.stderr)
        if args.out is not None:
            return _write(data, ledger_path(home), args.out)
        return _serve(data, ledger_path(home), args.port, opening=not args.no_open)
    finally:
        data.close()


def _write(data: ChatData, ledger: Path, out: Path) -> int:
    from evertalk.browse.export import EXPORT_BYTES, write_page

    try:
        size, zooms = write_page(data, ledger, out)
    except (OSError, StoreError) as error:
        return fail(f"cannot write {out}: {getattr(error, 'strerror', None) or error}")
    print(
        f"wrote {out} ({size:,} bytes): the view, the status, the sawtooth, the usage and "
        f"{zooms:,} zooms beneath the view (up to {EXPORT_BYTES // 1_000_000} MB of them)"
    )
    return 0


def _serve(data: ChatData, ledger: Path, port: int, *, opening: bool) -> int:
    from evertalk.browse.server import BrowseServer

    try:
        server = BrowseServer(data, ledger, port)
    except OSError as error:
        return fail(f"cannot listen on 127.0.0.1:{port}: {error.strerror or error}")
    with server:
        try:
            print(f"evertalk: the memory is at {server.url} (Ctrl+C stops)", flush=True)
            if opening:
                webbrowser.open(server.url)
            server.serve_forever()
        except KeyboardInterrupt:
            print("\nevertalk: stopped serving the memory", flush=True)
    return 0
