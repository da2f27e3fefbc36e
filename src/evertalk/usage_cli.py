"""`evertalk usage`: what the model calls cost, from the usage ledger (SPEC §1.8).

When a service runs for the home, it reads `<home>/usage.jsonl` (the `usage` request), since
it is the one writing to it; otherwise the command reads the file itself, and starts no service
for that. Either way the output is the same. Imports no model SDK.
"""

from __future__ import annotations

import argparse
import json
import select
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

from evertalk.budget import Day, today
from evertalk.ledger import Summary, Totals, ledger_path, read_records, summarize
from evertalk.terminal_text import escape_controls

COLUMNS = ("calls", "input", "output", "cache read", "cache write", "read share", "cost")
CLIENT: Final = "usage"
ANSWER_SECONDS: Final = 10.0
"""How long the command waits for a running service's answer before it reads the file itself."""


@dataclass(frozen=True)
class UsageReport:
    """The ledger summed up, as the command prints it, whoever read it. The ledger's path is not
    in it: the command names the file as its own home names it."""

    summary: dict[str, Any]  # `Summary.as_dict`
    table: str | None  # the table and the lines under it; None before the first call
    skipped: int = 0  # unreadable lines
    error: str | None = None  # why the ledger could not be read

    def as_frame(self) -> dict[str, Any]:
        return {
            "summary": self.summary,
            "table": self.table,
            "skipped": self.skipped,
            "error": self.error,
        }


def read_usage(path: Path) -> UsageReport:
    try:
        contents = read_records(path)
    except FileNotFoundError:
        contents = None
    except OSError as error:
        return UsageReport({}, None, error=error.strerror or str(error))
    records = contents.records if contents is not None else []
    summary = summarize(records)
    table = format_summary(summary) if records else None
    skipped = contents.skipped if contents is not None else 0
    return UsageReport(summary.as_dict(), table, skipped)


def run_usage_command(args: argparse.Namespace, home: Path) -> int:
    path = ledger_path(home)
    report = _asked(home) or read_usage(path)
    if report.error is not None:
        print(f"evertalk: cannot read {path}: {report.error}", file=sys.stderr)
        return 1
    if report.skipped:
        print(
            f"warning: {path}: skipped {report.skipped:,} unreadable "
            f"line{'s' if report.skipped != 1 else ''}",
            file=sys.stderr,
        )
    day = _today(home)
    if getattr(args, "json", False):
        budget = {"daily": day.daily, "today": round(day.spent, 6)} if day is not None else None
        print(
            json.dumps(
                {"ledger": str(path), "skipped": report.skipped, **report.summary, "budget": budget}
            )
        )
        return 0
    if report.table is None:
        print(f"No model calls yet: {path} gets a line for each one.")
    else:
        print(escape_controls(report.table))  # a model's name is text from elsewhere
    if day is not None and day.daily is not None:
        print(day.usage_line())
    return 0


def _today(home: Path) -> Day | None:
    """Today's spending against `[budget] daily`; None when the settings cannot be read (the
    table is still worth showing)."""
    from evertalk.config import ConfigError, load_config

    try:
        return today(home, load_config(home).budget_daily)
    except ConfigError:
        return None


def _asked(home: Path) -> UsageReport | None:
    """The running service's report; None when no service runs, or it cannot give one (an
    older one, one stopping, one that does not answer in time): the file is read here then."""
    from evertalk.client.connection import ServiceError, connect
    from evertalk.protocol.replies import Error, Stopping, Usage
    from evertalk.protocol.requests import GetUsage

    try:
        connection = connect(home, CLIENT)
    except ServiceError:
        return None
    with connection:
        try:
            connection.send(GetUsage())
            deadline = time.monotonic() + ANSWER_SECONDS
            while True:
                wait = deadline - time.monotonic()
                if not connection.pending and (
                    wait <= 0 or not select.select([connection.sock], [], [], wait)[0]
                ):
                    return None
                frame = connection.receive()
                if isinstance(frame, Usage):
                    return UsageReport(frame.summary, frame.table, frame.skipped, frame.error)
                if isinstance(frame, Error | Stopping):
                    return None
        except ServiceError:  # it went away meanwhile, or sent what is no frame
            return None


LABEL_WIDTH = 33
"""Width of the labels of the lines under the table (`cache read share`, …)."""

TOKEN_COLUMNS = frozenset({"input", "output", "cache read", "cache write"})


def format_summary(summary: Summary) -> str:
    sections = [
        ("by day", summary.by_day),
        ("by role", summary.by_role),
        ("by model", summary.by_model),
    ]
    labels = [f"  {key}" for _, groups in sections for key in groups]
    width = max(len(label) for label in [*labels, "by model", "total"])
    # token sums end in a mark or a space once a call went unreported, as costs always do
    marked = summary.total.unreported > 0
    header_widths = [max(len(heading(name, marked)), 6) for name in COLUMNS]

    def row(label: str, totals: Totals | None) -> str:
        if totals is None:
            cells = [heading(name, marked) for name in COLUMNS]
        else:
            counts = (totals.input, totals.output, totals.cache_read, totals.cache_write)
            cells = [
                f"{totals.calls:,}",
                *(token_cell(count, totals, marked) for count in counts),
                share(totals.cache_read_share),
                money(totals),
            ]
        padded = "  ".join(
            cell.rjust(size) for cell, size in zip(cells, header_widths, strict=True)
        )
        # the room kept for a mark after an unmarked cost lines the figures up; at the end of
        # the line it is only a trailing space
        return f"{label.ljust(width)}  {padded}".rstrip()

    lines: list[str] = []
    for title, groups in sections:
        lines.append(title if lines else row(title, None))  # the first one holds the header
        lines.extend(row(f"  {key}", totals) for key, totals in groups.items())
    lines.append(row("total", summary.total))
    lines.append("")
    lines += _figures(summary)
    lines += _footnotes(summary.total)
    return "\n".join(lines)


def _figures(summary: Summary) -> list[str]:
    """The lines under the table: cache reuse, usage not reported, compaction figures."""
    total = summary.total
    lines: list[str] = []
    if total.calls and total.unreported == total.calls:
        lines.append(f"{'cache read share':<{LABEL_WIDTH}}- (no call had its usage reported)")
    else:
        prompt = tokens(total.prompt) + ("+" if total.unreported else "")
        read_share = share(summary.cache_read_share)
        lines.append(f"{'cache read share':<{LABEL_WIDTH}}{read_share} of {prompt} prompt tokens")
    if total.unreported:
        lines.append(
            f"{'usage not reported':<{LABEL_WIDTH}}{total.unreported:,} of {total.calls:,} "
            "calls (their tokens are unknown, not 0)"
        )
    per_node = summary.calls_per_node
    if per_node is None:
        lines.append(f"{'compaction calls per built node':<{LABEL_WIDTH}}- (no compactions yet)")
    else:
        lines.append(
            f"{'compaction calls per built node':<{LABEL_WIDTH}}{per_node:.2f} "
            f"({summary.compaction_calls:,} calls, {summary.built_nodes:,} nodes)"
        )
    for model, counts in summary.rejections.items():
        lines.append(
            f"{'rejected compaction replies':<{LABEL_WIDTH}}{share(counts.rate)} "
            f"({counts.rejected:,} of {counts.calls:,} calls) {model}"
        )
    return lines


def _footnotes(total: Totals) -> list[str]:
    """What the marks of the table mean, for the marks it holds."""
    lines: list[str] = []
    if total.unreported:
        lines.append("+ token sums leave out calls whose usage was not reported; ? none was")
    unpriced = total.unpriced
    if unpriced and unpriced == total.calls:
        lines.append("? no known price for these models: what they cost is not counted")
    elif unpriced:
        lines.append(
            f"* leaves out {unpriced:,} call{'s' if unpriced != 1 else ''} with no known price"
        )
    return lines


def heading(name: str, marked: bool) -> str:
    """A column's heading, ending in a space where its cells end in a mark or a space."""
    return name + " " if name == "cost" or (marked and name in TOKEN_COLUMNS) else name


def token_cell(count: int, totals: Totals, marked: bool) -> str:
    """A token sum: `?` when no call of the group reported its usage (the zeros are unknown),
    a `+` after it when some did not (it is a lower bound)."""
    if not marked:
        return tokens(count)
    if not totals.unreported:
        return tokens(count) + " "
    if totals.unreported == totals.calls and count == 0:
        return "? "
    return tokens(count) + "+"


TOKEN_UNITS: Final = (("k", 1e3), ("M", 1e6), ("B", 1e9))


def tokens(count: int) -> str:
    """A token count in the one form every token figure takes: as it is below 1,000, then
    with one decimal and a unit (55.4k, 183.7k, 12.3M, 1.2B), so that a column never mixes
    183.7k with 55,382."""
    if count < 1_000:
        return str(count)
    for unit, size in TOKEN_UNITS:
        scaled = round(count / size, 1)
        if scaled < 1_000 or unit == TOKEN_UNITS[-1][0]:  # 999,960 is 1.0M, not 1000.0k
            return f"{scaled:,.1f}{unit}"
    raise AssertionError(count)  # pragma: no cover - the last unit always returns


def share(value: float | None) -> str:
    return "-" if value is None else f"{value:.1%}"


def money(totals: Totals) -> str:
    """Dollars; `*` marks a sum that leaves out calls with no known price, `?` no price at all."""
    if totals.calls and totals.unpriced == totals.calls:
        return "? "
    text = "<$0.01" if 0 < totals.cost < 0.005 else f"${totals.cost:,.2f}"
    return text + ("*" if totals.unpriced else " ")
