"""`evertalk capture`: a hook for Claude Code, so that its sessions land in the chat as they
happen.

Claude Code runs the hook on `UserPromptSubmit` and `Stop` with one JSON object on standard
input: `session_id`, `transcript_path` (the session's JSON Lines file), `cwd`,
`hook_event_name`, and `prompt` (UserPromptSubmit) or `stop_hook_active` (Stop; of no concern
here: this hook never blocks a stop, so it cannot make Claude Code loop). The hook must never
hold Claude Code up nor fail it, so it only checks the payload, hands the transcript to a worker
that it starts detached, and exits 0 at once, having printed nothing: Claude Code would show
what a hook prints, or add it to the model's context. Anything wrong is one line in
`<home>/service.log`.

The worker reads the whole transcript as `evertalk import` reads it (the same messages, the same
keys) and appends through the service, which it starts when none runs, what this transcript has
not sent yet. A small private state file per transcript (`<home>/capture/`) remembers how far
it got, so that each hook sends only what is new; the service's key check is the safety net
when that state is lost, and is why a capture and an import of the same session never log a
message twice. Workers of one transcript take turns under a lock: one that finds the lock
taken leaves a mark and exits, and the holder reads the transcript again before it goes.
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator, Sequence
from datetime import datetime
from pathlib import Path
from stat import S_ISREG
from typing import TYPE_CHECKING, Any, Final, NamedTuple

from evertalk.protocol.paths import log_path
from evertalk.secret_env import for_own_processes

if TYPE_CHECKING:
    from evertalk.client.connection import Connection
    from evertalk.importers import Imported
    from evertalk.protocol.requests import OutsideMessage

PROMPT_EVENT: Final = "UserPromptSubmit"
PROMPT_WAIT: Final = 2.0
"""Seconds the worker of a `UserPromptSubmit` waits for the transcript to grow: the hook may
run before Claude Code has written the prompt, which would otherwise wait for the next hook."""
SERVICE_TRIES: Final = 3
STATE_FOLDER: Final = "capture"


class Refused(Exception):
    """What the capture cannot do, as its one line for the service log."""


def run_capture(home: Path) -> int:
    """The hook itself: check the payload on standard input, start the worker, exit 0."""
    home = home.expanduser().absolute()
    try:
        if sys.stdin is None or sys.stdin.isatty():
            print(
                "evertalk capture is a hook for Claude Code: it reads the hook's JSON on "
                "standard input (see the README for the settings)",
                file=sys.stderr,
            )
            return 0
        _hand_over(home, sys.stdin.buffer.read())
    except Refused as refusal:
        note(home, str(refusal))
    except Exception as error:  # the other agent's hook must never fail because of this one
        note(home, f"capture: {type(error).__name__}: {error}")
    return 0


class Job(NamedTuple):  # not a dataclass: that module alone would double the hook's imports
    """What the worker is given."""

    transcript: Path
    event: str
    size: int
    """The transcript's size when the hook ran; -1 when it did not exist yet."""


def _hand_over(home: Path, data: bytes) -> None:
    job = read_payload(data)
    _start_worker(home, job)


def read_payload(data: bytes) -> Job:
    """The job a hook's payload asks for; Refused when it names none."""
    try:
        payload = json.loads(data)
    except ValueError as error:  # undecodable bytes too
        raise Refused(f"capture: the hook's input is not JSON ({error})") from None
    if not isinstance(payload, dict):
        raise Refused("capture: the hook's input is not a JSON object")
    event = payload.get("hook_event_name")
    event = event if isinstance(event, str) else ""
    session = payload.get("session_id")
    which = (event or "a hook") + (f" of session {session}" if isinstance(session, str) else "")
    given = payload.get("transcript_path")
    if not isinstance(given, str) or not given.strip():
        raise Refused(f"capture: {which} names no transcript_path")
    transcript = Path(given).expanduser()
    cwd = payload.get("cwd")
    if not transcript.is_absolute() and isinstance(cwd, str):
        transcript = Path(cwd) / transcript
    try:
        found = transcript.stat()
    except FileNotFoundError:
        if event != PROMPT_EVENT:  # a new session's first prompt may come before its file
            raise Refused(f"capture: {which}: no transcript at {transcript}") from None
        return Job(transcript.absolute(), event, -1)
    if not S_ISREG(found.st_mode):  # a folder would be read as an import reads one: all of it
        raise Refused(f"capture: {which}: {transcript} is not a file")
    return Job(transcript.absolute(), event, found.st_size)


def _start_worker(home: Path, job: Job) -> None:
    """The worker, detached: its own session (Claude Code's Ctrl+C and its end leave it be),
    none of the hook's pipes (Claude Code would wait for them to close), errors to the log."""
    home.mkdir(mode=0o700, parents=True, exist_ok=True)
    command = [sys.executable, "-m", "evertalk.capture_cli", "--home", str(home)]
    command += ["--event", job.event, "--size", str(job.size), "--", str(job.transcript)]
    log = os.open(log_path(home), os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    try:
        subprocess.Popen(
            command,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=log,
            start_new_session=True,
            cwd=home,
            env=for_own_processes(),  # it may start the service, which needs the keys
        )
    finally:
        os.close(log)


def note(home: Path, line: str) -> None:
    """One line in the service's log, as the service writes its own; never an error itself."""
    stamp = datetime.now().astimezone().isoformat(timespec="seconds")
    text = " ".join(line.split())
    with contextlib.suppress(OSError):
        home.mkdir(mode=0o700, parents=True, exist_ok=True)
        descriptor = os.open(log_path(home), os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
        try:
            os.write(descriptor, f"{stamp} [{os.getpid()}] {text}\n".encode())
        finally:
            os.close(descriptor)


# The worker


class Places(NamedTuple):
    """One transcript's files under `<home>/capture/`."""

    state: Path
    lock: Path
    again: Path
    """There while a hook came that the lock's holder has not read for yet."""


def work(home: Path, job: Job) -> None:
    """Append what the transcript has that this capture did not send yet."""
    if job.event == PROMPT_EVENT:
        _await_growth(job.transcript, job.size)
        if not job.transcript.exists():
            return  # no prompt was written after all: the Stop hook finds the session
    places = _places(home, job.transcript)
    while True:
        lock = _try_lock(places.lock)
        if lock is None:
            places.again.touch(mode=0o600)
            lock = _try_lock(places.lock)
            if lock is None:
                return  # the holder finds the mark once it lets go, and reads again
        try:
            places.again.unlink(missing_ok=True)
            _capture(home, job.transcript, places.state)
        finally:
            os.close(lock)
        if not places.again.exists():
            return


def _await_growth(transcript: Path, size: int) -> None:
    deadline = time.monotonic() + PROMPT_WAIT
    while time.monotonic() < deadline:
        try:
            if transcript.stat().st_size > size:
                return
        except FileNotFoundError:
            pass
        time.sleep(0.05)


def _places(home: Path, transcript: Path) -> Places:
    folder = home / STATE_FOLDER
    folder.mkdir(mode=0o700, parents=True, exist_ok=True)
    folder.chmod(0o700)  # the states name the user's projects
    name = hashlib.sha256(os.fsencode(transcript)).hexdigest()[:32]
    return Places(folder / f"{name}.json", folder / f"{name}.lock", folder / f"{name}.again")


def _try_lock(path: Path) -> int | None:
    """A descriptor holding the lock, or None when another worker holds it."""
    import fcntl

    descriptor = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(descriptor, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(descriptor)
        return None
    return descriptor


def _capture(home: Path, transcript: Path, state_file: Path) -> None:
    state = _load(state_file, transcript)
    try:
        found = transcript.stat()
    except FileNotFoundError:
        raise Refused(f"capture: the transcript {transcript} is gone") from None
    if not S_ISREG(found.st_mode):
        raise Refused(f"capture: {transcript} is not a file")
    # taken before the reading, so that what is written during it makes the next hook read
    seen = [found.st_size, found.st_mtime_ns]
    if state.get("seen") == seen:
        return  # not written to since everything in it was sent
    messages = _messages(transcript)
    start = _resume_at(state, messages)
    if start < len(messages):
        _send(home, transcript, state_file, messages, start)
    _save(state_file, transcript, messages, len(messages), seen)


def _messages(transcript: Path) -> list[Imported]:
    from evertalk.importers import read_paths

    reading = read_paths([transcript])
    if not reading.files:
        if reading.problems:
            raise Refused(f"capture: {reading.problems[0]}")
        return []  # empty so far
    if any(c.source != "claude-code" for c in reading.conversations):
        raise Refused(f"capture: {transcript} is not a Claude Code transcript")
    return reading.by_conversation()


def _resume_at(state: dict[str, Any], messages: list[Imported]) -> int:
    """How many of the messages were sent before: none when the state does not match them (a
    lost or stale state, a transcript rewritten), and then the keys keep them from doubling."""
    sent, last = state.get("sent"), state.get("last")
    if isinstance(sent, int) and 0 < sent <= len(messages) and messages[sent - 1].key == last:
        return sent
    return 0


def _send(
    home: Path, transcript: Path, state_file: Path, messages: list[Imported], start: int
) -> None:
    from evertalk.client.connection import ServiceError, ServiceGone, connect
    from evertalk.import_cli import BATCH, BATCH_BYTES, outside_message

    for attempt in range(1, SERVICE_TRIES + 1):
        try:
            connection = connect(home, "capture", start=True)
        except ServiceError as error:
            raise Refused(f"capture: {transcript}: {error}") from None
        try:
            with connection:
                for batch in _batches(messages[start:], BATCH, BATCH_BYTES):
                    _append(connection, [outside_message(message) for message in batch])
                    start += len(batch)
                    # a worker killed midway goes on from here next time
                    _save(state_file, transcript, messages, start, None)
                return
        except ServiceGone:
            if attempt == SERVICE_TRIES:
                raise Refused(
                    f"capture: the service went away {SERVICE_TRIES} times while {transcript} "
                    "was sent; the next hook sends the rest"
                ) from None


def _batches(messages: list[Imported], most: int, most_bytes: int) -> Iterator[list[Imported]]:
    batch: list[Imported] = []
    size = 0
    for message in messages:
        weight = len(message.text) + sum(len(data) for _, data in message.images)
        if batch and (len(batch) >= most or size + weight > most_bytes):
            yield batch
            batch, size = [], 0
        batch.append(message)
        size += weight
    if batch:
        yield batch


def _append(connection: Connection, messages: list[OutsideMessage]) -> None:
    """Send one batch: the service logs it at once, a turn of Ever's running or not."""
    from evertalk.client.connection import BadFrame, RequestFailed
    from evertalk.protocol.replies import Appended
    from evertalk.protocol.requests import Append

    try:
        connection.request(Append(messages=messages), Appended)
    except RequestFailed as error:
        raise Refused(f"capture: the service refused the messages: {error}") from None
    except BadFrame as error:
        raise Refused(f"capture: {error}") from None


def _load(state_file: Path, transcript: Path) -> dict[str, Any]:
    try:
        state = json.loads(state_file.read_bytes())
    except (OSError, ValueError):
        return {}
    if not isinstance(state, dict) or state.get("transcript") != str(transcript):
        return {}
    return state


def _save(
    state_file: Path,
    transcript: Path,
    messages: list[Imported],
    sent: int,
    seen: list[int] | None,
) -> None:
    """Written aside, then put in place, so that a worker killed meanwhile leaves the state
    before or after, never a torn one: a state read as none costs a resend, which the keys
    catch, but never a message."""
    state = {
        "transcript": str(transcript),
        "sent": sent,
        "last": messages[sent - 1].key if sent else None,
        "seen": seen,  # only once all is sent: what a hook may skip reading
    }
    scratch = state_file.with_name(f"{state_file.name}.{os.getpid()}")
    descriptor = os.open(scratch, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        os.write(descriptor, json.dumps(state).encode())
    finally:
        os.close(descriptor)
    os.replace(scratch, state_file)


def _worker_main(argv: Sequence[str]) -> int:
    parser = argparse.ArgumentParser(prog="evertalk.capture_cli")
    parser.add_argument("--home", type=Path, required=True)
    parser.add_argument("--event", default="")
    parser.add_argument("--size", type=int, default=-1)
    parser.add_argument("transcript", type=Path)
    args = parser.parse_args(argv)
    job = Job(args.transcript, args.event, args.size)
    try:
        work(args.home, job)
    except Refused as refusal:
        note(args.home, str(refusal))
    except Exception as error:
        note(args.home, f"capture: {job.transcript}: {type(error).__name__}: {error}")
    return 0


if __name__ == "__main__":
    from evertalk.secret_env import seal

    seal()
    raise SystemExit(_worker_main(sys.argv[1:]))
