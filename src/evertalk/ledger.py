"""The usage ledger: `<home>/usage.jsonl`, one JSON line per model call (SPEC §1.8).

A line holds `date` (ISO 8601 with the local offset), `role` (`turn`, `compaction` or
`subagent`), `provider`, `model`, the `input`, `output`, `cache_read` and `cache_write` tokens,
`cost` in USD (null where the price is unknown), `duration_ms`, and `node` (a compaction's node,
such as "40+8") or `turn` (the turn's id) when the caller gives one.

A call that failed once its response had begun (a cut stream, an error event, a deadline) gets
a record too, with `failed: true` and the tokens its response had reported by then (zero when
none): it was made, and may be billed, so the counts of calls (per node, per day) stay true.

A call cancelled once its stream had begun (Ctrl+C during a reply) is billed all the same: it
gets a `failed: true` record with what the stream had reported, and `estimated: true` when some
of its counts are estimated (the output streamed so far, or the whole prompt when the stream had
reported nothing yet).

More fields are written only when they say something, so that older lines read the same:
`reported: false` for a call whose server never said what it used (many local servers send no
usage in a stream): its zeros are unknown, not free; `estimated: true` (above); and `rejected` (a
short reason) for a compaction reply that a check refused, such as the grounding check (SPEC
§4.8).

This module imports no model SDK (`evertalk usage` must start fast), and not even the provider
types at run time: `record` takes anything with the four token counts of `Usage` (and its
`reported`, which is taken as true when missing).
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Callable, Iterable, Sequence
from dataclasses import asdict, dataclass, field
from datetime import UTC, date, datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

from evertalk.store.closing import Closing
from evertalk.store.secure import FILE_MODE, make_dir

if TYPE_CHECKING:
    from evertalk.providers.base import Usage

LEDGER_FILE: Final = "usage.jsonl"
ROLES: Final = ("turn", "compaction", "subagent")
REASON_LIMIT: Final = 200
"""Longest `rejected` reason kept, in characters: a line of the ledger is a figure, not a log."""


def ledger_path(home: Path) -> Path:
    return home / LEDGER_FILE


@dataclass(frozen=True)
class UsageRecord:
    """One model call, as one line of the ledger."""

    date: str
    role: str
    provider: str
    model: str
    input: int
    output: int
    cache_read: int
    cache_write: int
    cost: float | None
    duration_ms: int
    node: str | None = None
    turn: int | str | None = None
    failed: bool = False
    reported: bool = True  # False: the server said nothing of the call's tokens
    rejected: str | None = None  # why a check refused this compaction reply
    estimated: bool = False  # some counts are estimated (a call cancelled mid-stream)

    @property
    def day(self) -> str:
        """The calendar day where the call was made (the date's own offset), YYYY-MM-DD."""
        return datetime.fromisoformat(self.date).date().isoformat()

    def to_json(self) -> str:
        fields = asdict(self)
        for optional in ("node", "turn", "rejected"):
            if fields[optional] is None:
                del fields[optional]
        if not self.failed:  # written only when true: most calls succeed
            del fields["failed"]
        if self.reported:  # written only when false: lines before it were all reported
            del fields["reported"]
        if not self.estimated:
            del fields["estimated"]
        return json.dumps(fields, ensure_ascii=False, separators=(",", ":"), allow_nan=False)


class Ledger(Closing):
    """Appends records to the ledger at `path`; the file and its folder are made private (0600,
    0700) when created. Use as a context manager, or call `close()`.

    Writing is best effort: a failed write (a full disk, say) is counted in `failures` and kept in
    `last_error`, and never raised, so that accounting cannot break a turn or a compaction.
    """

    def __init__(self, path: Path, copy_to: Callable[[str], None] | None = None) -> None:
        self.path = path
        self.copy_to = copy_to
        """Where each record goes too, as its JSON (a chat shared through a database keeps
        every machine's calls there); best effort, as the file."""
        self.failures = 0
        self.last_error: str | None = None
        self._fd: int | None = None

    def record(
        self,
        *,
        role: str,
        provider: str,
        model: str,
        usage: Usage,
        cost: float | None,
        duration_ms: float,
        node: str | None = None,
        turn: int | str | None = None,
        date: datetime | None = None,
        failed: bool = False,
        rejected: str | None = None,
        estimated: bool = False,
    ) -> UsageRecord:
        """Append one call's line and return its record. `cost` is in USD, None when the price is
        unknown; `date` defaults to now, in local time with its offset; `failed` marks a call
        that failed after its response began (`usage` then holds what was known of it);
        `rejected` says why a check refused a compaction reply (kept to one short line);
        `estimated` marks counts that are estimates. A `usage` whose `reported` is false is
        written with `reported: false`."""
        if role not in ROLES:
            raise ValueError(f"role must be one of {', '.join(ROLES)}, not {role!r}")
        if cost is not None and not (math.isfinite(cost) and cost >= 0):
            raise ValueError(f"cost must be a finite amount >= 0 or None, not {cost!r}")
        when = date or datetime.now()
        if when.tzinfo is None:
            when = when.astimezone()  # a naive time is local: give it the local offset
        entry = UsageRecord(
            date=when.isoformat(timespec="milliseconds"),
            role=role,
            provider=provider,
            model=model,
            input=_tokens(usage.input),
            output=_tokens(usage.output),
            cache_read=_tokens(usage.cache_read),
            cache_write=_tokens(usage.cache_write),
            cost=None if cost is None else float(cost),
            duration_ms=max(0, round(duration_ms)),
            node=node,
            turn=turn,
            failed=failed,
            reported=bool(getattr(usage, "reported", True)),
            rejected=None if rejected is None else _reason(rejected),
            estimated=estimated,
        )
        line = (entry.to_json() + "\n").encode("utf-8")
        try:
            fd = self._open()
            # One write(2) of the whole line with O_APPEND: lines from several writers (the
            # compactor's tasks, a second process) land whole, one after another. There is no
            # userspace buffer to flush, and no fsync: this is accounting, not the chat. A crash
            # can lose the last lines the OS had not written out, which costs a few figures in
            # `evertalk usage`; an fsync per model call would cost latency on every call.
            written = os.write(fd, line)
            if written != len(line):
                raise OSError(f"short write ({written} of {len(line)} bytes)")
        except OSError as error:
            self.failures += 1
            self.last_error = f"{self.path}: {error.strerror or error}"
        self._copy(line)
        return entry

    def _copy(self, line: bytes) -> None:
        if self.copy_to is None:
            return
        try:
            self.copy_to(line.decode("utf-8").rstrip("\n"))
        except Exception as error:  # the database's ledger, down: the file has the record
            self.failures += 1
            self.last_error = f"the ledger's copy: {error}"

    def _open(self) -> int:
        if self._fd is None:
            make_dir(self.path.parent)
            flags = os.O_RDWR | os.O_APPEND | os.O_CLOEXEC  # read: the torn-line check
            try:
                fd = os.open(self.path, flags | os.O_CREAT | os.O_EXCL, FILE_MODE)
                os.fchmod(fd, FILE_MODE)  # the umask filtered O_CREAT's mode
            except FileExistsError:
                fd = os.open(self.path, flags)
                _end_torn_line(fd)
            self._fd = fd
        return self._fd

    def close(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None


def _tokens(value: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ValueError(f"token counts are whole numbers >= 0, not {value!r}")
    return value


def _reason(text: str) -> str:
    """One line, short; never empty, since an empty reason still marks a rejection."""
    line = " ".join(text.split()) or "no reason given"
    return line if len(line) <= REASON_LIMIT else line[: REASON_LIMIT - 1] + "…"


def _end_torn_line(fd: int) -> None:
    """After a crash mid-line, end that line first, so that the next record starts on its own
    line: the torn line is then one bad line that readers skip, not two."""
    size = os.fstat(fd).st_size
    if size and os.pread(fd, 1, size - 1) != b"\n":
        os.write(fd, b"\n")


# --- reading -------------------------------------------------------------------------------


@dataclass(frozen=True)
class LedgerContents:
    records: list[UsageRecord]
    skipped: int
    """Lines that were not records (torn by a crash, or damaged), left out."""


def read_records(path: Path) -> LedgerContents:
    """Every record of the ledger, skipping (and counting) the lines that are not one.

    Raises FileNotFoundError when there is no ledger yet, OSError when it cannot be read.
    """
    records: list[UsageRecord] = []
    skipped = 0
    with open(path, "rb") as file:
        for raw in file:
            if not raw.strip():
                continue
            parsed = parse_record(raw)
            if parsed is None:
                skipped += 1
            else:
                records.append(parsed)
    return LedgerContents(records, skipped)


def parse_record(raw: bytes) -> UsageRecord | None:
    """The record on one line, or None when the line is not one."""
    try:
        data = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError):
        return None
    if not isinstance(data, dict):
        return None
    try:
        date = _text(data, "date")
        datetime.fromisoformat(date)
        cost = data.get("cost")
        if cost is not None and not _is_amount(cost):
            return None
        node = data.get("node")
        turn = data.get("turn")
        failed = data.get("failed", False)
        reported = data.get("reported", True)
        rejected = data.get("rejected")
        estimated = data.get("estimated", False)
        if not isinstance(estimated, bool):
            return None
        if node is not None and not isinstance(node, str):
            return None
        if not isinstance(failed, bool) or not isinstance(reported, bool):
            return None
        if rejected is not None and not isinstance(rejected, str):
            return None
        if turn is not None and (isinstance(turn, bool) or not isinstance(turn, int | str)):
            return None
        return UsageRecord(
            date=date,
            role=_text(data, "role"),
            provider=_text(data, "provider"),
            model=_text(data, "model"),
            input=_count(data, "input"),
            output=_count(data, "output"),
            cache_read=_count(data, "cache_read"),
            cache_write=_count(data, "cache_write"),
            cost=None if cost is None else float(cost),
            duration_ms=_count(data, "duration_ms"),
            node=node,
            turn=turn,
            failed=failed,
            reported=reported,
            rejected=rejected,
            estimated=estimated,
        )
    except (KeyError, TypeError, ValueError):
        return None


def _text(data: dict[str, Any], name: str) -> str:
    value = data[name]
    if not isinstance(value, str):
        raise TypeError(name)
    return value


def _count(data: dict[str, Any], name: str) -> int:
    value = data[name]
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise TypeError(name)
    return value


def _is_amount(value: object) -> bool:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return False
    return math.isfinite(value) and value >= 0


# --- following ------------------------------------------------------------------------------

TAIL_CHUNK: Final = 64 * 1024
"""Bytes read at a time when looking back from the ledger's end for the day's first line."""
EARLIEST_OFFSET: Final = timedelta(hours=14)
"""How far ahead of UTC a zone's clock may be (Kiribati's +14:00): where a day begins first."""


class LedgerTally:
    """The cost of the calls appended to the ledger from `offset` on (of `day` and `role`
    alone, when given), read as the ledger grows: each `read` parses only the whole lines
    written since the last. The figures the status bar and a window's exit line show come from
    here, not from a process's memory, so that a service started again shows what was spent
    all the same."""

    def __init__(
        self, path: Path, offset: int = 0, day: str | None = None, role: str | None = None
    ) -> None:
        self.path = path
        self.offset = offset
        self.day = day
        self.role = role
        self.cost = 0.0
        self.calls = 0

    @classmethod
    def from_now(cls, path: Path, role: str | None = None) -> LedgerTally:
        """The calls from now on (of `role` alone, when given): what a window opened now
        spends while it is open, or the summaries of an import started now."""
        try:
            return cls(path, path.stat().st_size, role=role)
        except OSError:
            return cls(path, role=role)

    def read(self) -> float:
        """The cost so far, with the lines appended since the last read (a line still being
        written waits for the next). A ledger that cannot be read leaves the figure as it was."""
        try:
            with open(self.path, "rb") as file:
                file.seek(self.offset)
                data = file.read()
        except OSError:
            return self.cost
        whole = data.rfind(b"\n") + 1
        for raw in data[:whole].splitlines():
            record = parse_record(raw) if raw.strip() else None
            if record is None or self.role not in (None, record.role):
                continue
            if self.day is None or record.day == self.day:
                self.cost += record.cost or 0.0
                self.calls += 1
        self.offset += whole
        return self.cost


class DaySpending:
    """What the ledger says was spent today (the local calendar day), every model call of the
    chat's home counted: the cost the status bar shows. At the first look, and at each new day,
    the day's first line is found by reading back from the ledger's end."""

    def __init__(self, path: Path, today: Callable[[], str] | None = None) -> None:
        self.path = path
        self.today = today or (lambda: date.today().isoformat())
        self._tally: LedgerTally | None = None

    def cost(self) -> float:
        day = self.today()
        if self._tally is None or self._tally.day != day:
            self._tally = LedgerTally(self.path, _day_start(self.path, day), day)
        return self._tally.read()


def _day_start(path: Path, day: str) -> int:
    """Where the lines of `day` and after begin: after the last line made before `day` began
    anywhere (`day_began`), read back from the end a chunk at a time (the lines are appended in
    time order). Not after the last line of an earlier day: a process in a zone behind writes
    lines of its own earlier day after lines of `day`, and those of `day` before it count."""
    began = day_began(day)
    try:
        file = open(path, "rb")  # noqa: SIM115 (closed below; the loop returns from inside)
    except OSError:
        return 0
    with file:
        end = file.seek(0, os.SEEK_END)
        tail = b""
        while end > 0:
            start = max(0, end - TAIL_CHUNK)
            file.seek(start)
            tail = file.read(end - start) + tail
            end = start
            lines = tail.split(b"\n")
            # the first piece may be part of a line that begins in the chunk before
            complete = lines if start == 0 else lines[1:]
            newline = start + len(tail)  # then the newline before each piece, from the last
            for raw in reversed(complete):
                newline -= len(raw) + 1
                record = parse_record(raw) if raw.strip() else None
                if record is not None and datetime.fromisoformat(record.date) < began:
                    return newline + len(raw) + 2  # after the earlier day's line and its newline
            tail = lines[0] if start > 0 else b""
    return 0


def day_began(day: str) -> datetime:
    """When `day` began in the zone furthest ahead of UTC (+14:00), a minute earlier for lines
    written at the same moment in another order: no line made before this is of `day`."""
    start = datetime.fromisoformat(day).replace(tzinfo=UTC)
    return start - EARLIEST_OFFSET - timedelta(minutes=1)


# --- summing up ------------------------------------------------------------------------------


@dataclass(frozen=True)
class Totals:
    """Sums over a group of calls. `cost` adds the known costs; `unpriced` counts the calls
    whose cost is unknown, so a cost with unpriced calls is a lower bound. `unreported` counts
    the calls whose server reported no usage: token sums with such calls are lower bounds too,
    and unknown when every call is one."""

    calls: int = 0
    input: int = 0
    output: int = 0
    cache_read: int = 0
    cache_write: int = 0
    cost: float = 0.0
    unpriced: int = 0
    unreported: int = 0

    @property
    def prompt(self) -> int:
        """All prompt tokens: uncached, read from the cache, written to it."""
        return self.input + self.cache_read + self.cache_write

    @property
    def cache_read_share(self) -> float | None:
        """cache_read / (input + cache_read + cache_write); None without prompt tokens."""
        return self.cache_read / self.prompt if self.prompt else None

    @classmethod
    def of(cls, records: Sequence[UsageRecord]) -> Totals:
        """The sums over `records`, the costs added in their order."""
        costs = [record.cost for record in records if record.cost is not None]
        return cls(
            calls=len(records),
            input=sum(record.input for record in records),
            output=sum(record.output for record in records),
            cache_read=sum(record.cache_read for record in records),
            cache_write=sum(record.cache_write for record in records),
            cost=sum(costs, 0.0),
            unpriced=len(records) - len(costs),
            unreported=sum(not record.reported for record in records),
        )

    def as_dict(self) -> dict[str, Any]:
        # Rounded to a millionth of a cent: sums of floats carry noise in the last digits.
        cost = round(self.cost, 8)
        return {**asdict(self), "cost": cost, "cache_read_share": self.cache_read_share}


@dataclass(frozen=True)
class Rejections:
    """A compactor model's replies that a check refused, out of its compaction calls."""

    calls: int = 0
    rejected: int = 0

    @property
    def rate(self) -> float | None:
        return self.rejected / self.calls if self.calls else None

    def as_dict(self) -> dict[str, Any]:
        return {**asdict(self), "rate": self.rate}


@dataclass(frozen=True)
class Summary:
    """The ledger summed up: by day (oldest first), by role, by model (keyed `provider/model`)."""

    total: Totals
    by_day: dict[str, Totals] = field(default_factory=dict)
    by_role: dict[str, Totals] = field(default_factory=dict)
    by_model: dict[str, Totals] = field(default_factory=dict)
    compaction_calls: int = 0
    built_nodes: int = 0
    """Distinct nodes named by compaction calls that did not fail and whose reply was not
    rejected (the others still count in `compaction_calls`: they were made)."""
    rejections: dict[str, Rejections] = field(default_factory=dict)
    """Per compactor model (keyed `provider/model`): its compaction calls and rejected replies."""

    @property
    def cache_read_share(self) -> float | None:
        return self.total.cache_read_share

    @property
    def calls_per_node(self) -> float | None:
        """Compaction calls per built node; None before the first node."""
        return self.compaction_calls / self.built_nodes if self.built_nodes else None

    def as_dict(self) -> dict[str, Any]:
        def table(groups: dict[str, Totals]) -> dict[str, Any]:
            return {key: totals.as_dict() for key, totals in groups.items()}

        return {
            "total": self.total.as_dict(),
            "by_day": table(self.by_day),
            "by_role": table(self.by_role),
            "by_model": table(self.by_model),
            "cache_read_share": self.cache_read_share,
            "compaction_calls": self.compaction_calls,
            "built_nodes": self.built_nodes,
            "calls_per_node": self.calls_per_node,
            "rejections": {key: value.as_dict() for key, value in self.rejections.items()},
        }


def summarize(records: Iterable[UsageRecord]) -> Summary:
    every: list[UsageRecord] = []
    days: dict[str, list[UsageRecord]] = {}
    roles: dict[str, list[UsageRecord]] = {}
    models: dict[str, list[UsageRecord]] = {}
    compactions = 0
    nodes: set[str] = set()
    rejections: dict[str, list[int]] = {}  # model: [calls, rejected]
    for record in records:
        model = f"{record.provider}/{record.model}"
        every.append(record)
        days.setdefault(record.day, []).append(record)
        roles.setdefault(record.role, []).append(record)
        models.setdefault(model, []).append(record)
        if record.role == "compaction":
            compactions += 1
            counts = rejections.setdefault(model, [0, 0])
            counts[0] += 1
            counts[1] += record.rejected is not None
            if record.node is not None and not record.failed and record.rejected is None:
                nodes.add(record.node)  # a node a model answered, its reply not refused

    def role_order(role: str) -> tuple[int, str]:
        return (ROLES.index(role) if role in ROLES else len(ROLES), role)

    return Summary(
        total=Totals.of(every),
        by_day={day: Totals.of(days[day]) for day in sorted(days)},
        by_role={role: Totals.of(roles[role]) for role in sorted(roles, key=role_order)},
        by_model={model: Totals.of(models[model]) for model in sorted(models)},
        compaction_calls=compactions,
        built_nodes=len(nodes),
        rejections={model: Rejections(*rejections[model]) for model in sorted(rejections)},
    )
