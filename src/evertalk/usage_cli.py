"""`evertalk usage`: what the model calls cost, from the usage ledger (SPEC §1.8).

Reads `<home>/usage.jsonl` only; imports no model SDK.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from evertalk.ledger import LedgerContents, Summary, Totals, ledger_path, read_records, summarize

COLUMNS = ("calls", "input", "output", "cache read", "cache write", "read share", "cost")


def run_usage_command(args: argparse.Namespace, home: Path) -> int:
    path = ledger_path(home)
    try:
        contents = read_records(path)
    except FileNotFoundError:
        contents = None
    except OSError as error:
        print(f"evertalk: cannot read {path}: {error.strerror or error}", file=sys.stderr)
        return 1
    if contents is not None and contents.skipped:
        print(
            f"warning: {path}: skipped {contents.skipped:,} unreadable "
            f"line{'s' if contents.skipped != 1 else ''}",
            file=sys.stderr,
        )
    summary = summarize(contents.records if contents is not None else [])
    if getattr(args, "json", False):
        print(json.dumps(as_json(summary, path, contents)))
    elif contents is None or not contents.records:
        print(f"No model calls yet: {path} gets a line for each one.")
    else:
        print(format_summary(summary))
    return 0


def as_json(summary: Summary, path: Path, contents: LedgerContents | None) -> dict[str, object]:
    return {
        "ledger": str(path),
        "skipped": contents.skipped if contents is not None else 0,
        **summary.as_dict(),
    }


def format_summary(summary: Summary) -> str:
    sections = [
        ("by day", summary.by_day),
        ("by role", summary.by_role),
        ("by model", summary.by_model),
    ]
    labels = [f"  {key}" for _, groups in sections for key in groups]
    width = max(len(label) for label in [*labels, "by model", "total"])
    header_widths = [max(len(name), 6) for name in COLUMNS]

    def row(label: str, totals: Totals | None) -> str:
        if totals is None:
            cells = [*COLUMNS[:-1], COLUMNS[-1] + " "]  # costs end in a mark or a space
        else:
            cells = [
                f"{totals.calls:,}",
                tokens(totals.input),
                tokens(totals.output),
                tokens(totals.cache_read),
                tokens(totals.cache_write),
                share(totals.cache_read_share),
                money(totals),
            ]
        padded = "  ".join(
            cell.rjust(size) for cell, size in zip(cells, header_widths, strict=True)
        )
        return f"{label.ljust(width)}  {padded}"

    lines: list[str] = []
    for title, groups in sections:
        lines.append(title if lines else row(title, None))  # the first one holds the header
        lines.extend(row(f"  {key}", totals) for key, totals in groups.items())
    lines.append(row("total", summary.total))
    lines.append("")
    read_share = share(summary.cache_read_share)
    lines.append(
        f"cache read share                 {read_share} of {tokens(summary.total.prompt)} "
        "prompt tokens"
    )
    per_node = summary.calls_per_node
    if per_node is None:
        lines.append("compaction calls per built node  - (no compactions yet)")
    else:
        lines.append(
            f"compaction calls per built node  {per_node:.2f} "
            f"({summary.compaction_calls:,} calls, {summary.built_nodes:,} nodes)"
        )
    unpriced = summary.total.unpriced
    if unpriced and unpriced == summary.total.calls:
        lines.append("? no known price for these models: what they cost is not counted")
    elif unpriced:
        lines.append(
            f"* leaves out {unpriced:,} call{'s' if unpriced != 1 else ''} with no known price"
        )
    return "\n".join(lines)


def tokens(count: int) -> str:
    """Exact below 100,000; then 123.4k, 12.3M, 1.2B."""
    if count < 100_000:
        return f"{count:,}"
    for unit, size in (("B", 1e9), ("M", 1e6), ("k", 1e3)):
        if count >= size:
            return f"{count / size:,.1f}{unit}"
    raise AssertionError(count)  # pragma: no cover


def share(value: float | None) -> str:
    return "-" if value is None else f"{value:.1%}"


def money(totals: Totals) -> str:
    """Dollars; `*` marks a sum that leaves out calls with no known price, `?` no price at all."""
    if totals.calls and totals.unpriced == totals.calls:
        return "? "
    text = "<$0.01" if 0 < totals.cost < 0.005 else f"${totals.cost:,.2f}"
    return text + ("*" if totals.unpriced else " ")
