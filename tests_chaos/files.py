"""The checker on one machine's files: a home, its service and three windows that follow it
through stops, repairs, kill -9 and forgets (no tests of its own: test_chaos.py runs it).

A schedule, drawn from a seed, mixes notes appended by a capture client, turns run with `-p`,
and what a person or a crash does to the service under the windows: `evertalk service stop`
(a window's next request starts another), kill -9, a message damaged on disk and
`evertalk memory repair` run, a note forgotten. Then every note not acknowledged is sent again
under its key, and the laws are checked:

- every acknowledged note is logged once (a forgotten one as its marker), and the ids are dense;
- every window shows exactly the log's messages, by id and text, the forgotten ones as their
  marker and the repaired one as the repair's note;
- no forgotten text is left in a window or in any file under the home.
"""

from __future__ import annotations

import contextlib
import os
import signal
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

from harness import Machine, Report, Step, Window, note_text, schedule, turn_text, wait_for

from agent.test_turn_support import is_compaction, write_config
from evertalk.client.connection import ServiceError, connect
from evertalk.protocol import replies, requests
from fakes import AnthropicFake, Script, serve, summarizer
from fakes import chat as answer
from home_scan import files_holding
from served_home import run, start

KINDS = ("note", "note", "note", "turn", "kill", "stop", "repair", "forget", "pause")
"""What a step of a file schedule may be, as often as it is listed."""

WINDOWS = 3


class Home:
    """The home, its windows and what the schedule did to it."""

    def __init__(self, root: Path, model_url: str) -> None:
        self.machine = Machine("home", root / "home")
        write_config(self.machine.home, base_url=model_url, settle=0)
        self.windows: list[Window] = []
        self.turns: list[object] = []
        self.forgotten: dict[int, str] = {}  # id: the text forgotten
        self.repaired: set[int] = set()
        self.repaired_notes: set[int] = set()  # the notes whose message a repair replaced
        self.acked: set[int] = set()

    def log(self) -> list[replies.RecordItem]:
        """The log as the service reads it. A service that a window started while a message
        was damaged, before the repair, fails to open, and says so: the next one opens."""
        deadline = time.monotonic() + 60
        while True:
            try:
                with connect(self.machine.home, "checker", start=True) as conn:
                    t = conn.request(requests.GetStatus(), replies.Status).messages
                    found = conn.request(requests.GetRecords(start=0, end=t), replies.Records)
                return list(found.records)
            except ServiceError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.5)

    def close(self) -> None:
        for window in self.windows:
            window.close()
        for process in self.turns:
            with contextlib.suppress(Exception):
                process.kill()  # type: ignore[attr-defined]
        run(self.machine.home, "service", "stop", timeout=120)


def id_of_note(records: list[replies.RecordItem], n: int) -> int | None:
    return next((r.id for r in records if r.key == f"note-{n}"), None)


def forget(home: Home, report: Report) -> None:
    """Forget the oldest acknowledged note not yet forgotten or damaged."""
    records = home.log()
    for n in sorted(home.acked):
        i = id_of_note(records, n)
        if i is not None and i not in home.forgotten and i not in home.repaired:
            with connect(home.machine.home, "forget", start=True) as conn:
                conn.request(requests.Forget(range=str(i), reason="chaos"), replies.Forgotten)
            home.forgotten[i] = note_text(n)
            report.faults["note forgotten"] += 1
            return


def damage_and_repair(home: Home, report: Report) -> None:
    """Make an acknowledged note unreadable on disk under the running service, as a failing
    disk would (same length, so the rest of its file reads as before), and run `evertalk
    memory repair`. Never the last line of a file: SPEC §1.4 takes a bad last line for a
    torn write, whose append never returned, and drops it."""
    records = home.log()
    for n in sorted(home.acked):
        i = id_of_note(records, n)
        if i is None or i in home.forgotten or i in home.repaired:
            continue
        if _damage(home.machine.home / "chat" / "main", note_text(n)[:40].encode()):
            break
    else:
        return
    result = run(home.machine.home, "memory", "repair", timeout=120)
    if result.returncode != 0:
        report.violations.append(f"memory repair failed: {result.stderr.strip()[:200]}")
    home.repaired.add(i)
    home.repaired_notes.add(n)
    report.faults["message damaged and repaired"] += 1


def _damage(folder: Path, marker: bytes) -> bool:
    """Put a quote inside the line that holds `marker`, if a line follows it; whether done."""
    for path in sorted(folder.glob("*.jsonl")):
        data = path.read_bytes()
        at = data.find(marker)
        end = data.find(b"\n", at)
        if at < 0 or end < 0 or end + 1 >= len(data):
            continue
        with path.open("r+b") as file:
            file.seek(at + len(marker) - 1)
            file.write(b'"')  # the line is no longer JSON
            file.flush()
            os.fsync(file.fileno())
        return True
    return False


def apply(home: Home, step: Step, report: Report) -> None:
    machine = home.machine
    if step.kind == "note":
        report.notes += 1
        if machine.append(step.n):
            home.acked.add(step.n)
    elif step.kind == "turn":
        report.turns += 1
        home.turns.append(start(machine.home, "-p", turn_text(step.n)))
    elif step.kind == "kill":
        pid = machine.pid()
        if pid is not None:
            os.kill(pid, signal.SIGKILL)
            report.faults["kill -9 of the service"] += 1
    elif step.kind == "stop":
        run(machine.home, "service", "stop", timeout=120)
        report.faults["service stopped"] += 1
    elif step.kind == "repair":
        damage_and_repair(home, report)
    elif step.kind == "forget":
        forget(home, report)
    else:
        time.sleep(step.seconds)


def quiesce(home: Home, steps: list[Step], report: Report) -> None:
    for process in home.turns:
        with contextlib.suppress(Exception):
            process.wait(timeout=120)  # type: ignore[attr-defined]
    for n in sorted({s.n for s in steps if s.kind == "note"} - home.acked):
        if home.machine.append(n, timeout=60):
            home.acked.add(n)
        else:
            report.violations.append(f"note {n} was never acknowledged after the faults")


def check(home: Home, report: Report) -> None:
    records = home.log()
    ids = [r.id for r in records]
    if ids != list(range(len(ids))):
        report.violations.append(f"the ids are not dense: {ids[:5]}…")
    keys = Counter(r.key for r in records if r.key and r.key.startswith("note-"))
    for n in sorted(home.acked - home.repaired_notes):
        if keys[f"note-{n}"] != 1:
            report.violations.append(f"note {n} is logged {keys[f'note-{n}']} times")
    log = {r.id: r.text for r in records}
    gone = list(home.forgotten.values())
    for i, text in home.forgotten.items():
        if log.get(i) == text:
            report.violations.append(f"message {i} is still in the log after its forget")

    def windows_agree() -> bool:
        return all(window.shown == log for window in home.windows)

    if not wait_for(windows_agree, 30):
        for k, window in enumerate(home.windows):
            report.violations += differences(f"window {k}", window.shown, log, window.reconnects)
    for k, window in enumerate(home.windows):
        if any(text in gone for text in window.shown.values()):
            report.violations.append(f"window {k} still shows forgotten text")
    for name in files_holding(home.machine.home, *gone):
        report.violations.append(f"forgotten text left in {name}")


def differences(name: str, shown: dict[int, str], log: dict[int, str], again: int) -> list[str]:
    missing = sorted(set(log) - set(shown))
    extra = sorted(set(shown) - set(log))
    other = sorted(i for i in set(shown) & set(log) if shown[i] != log[i])
    return [
        f"{name} ({again} reconnects): {len(missing)} missing {missing[:5]}, "
        f"{len(extra)} not in the log {extra[:5]}, {len(other)} with other text {other[:5]}"
    ]


@contextlib.contextmanager
def home_for(root: Path) -> Iterator[Home]:
    script = Script().route(is_compaction, summarizer(120))
    script.route(lambda call: not is_compaction(call), answer("ok"))
    with serve(AnthropicFake(script).app) as model_url:
        home = Home(root, model_url)
        try:
            yield home
        finally:
            home.close()


def run_file_schedule(root: Path, seed: int, steps: int) -> Report:
    """Run the seed's schedule on a new home and check it; what was done and found."""
    began = time.monotonic()
    report = Report(seed)
    drawn = schedule(seed, steps, KINDS, machines=1)
    with home_for(root) as home:
        home.machine.append(-1)  # the service started, and the chat made, before the windows
        home.windows = [Window(home.machine.home) for _ in range(WINDOWS)]
        for step in drawn:
            apply(home, step, report)
        quiesce(home, drawn, report)
        check(home, report)
    report.seconds = time.monotonic() - began
    return report
