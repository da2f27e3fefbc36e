"""What the service answers to each request of a client (after the handshake).

Each handler takes the service, the session that asked and the request's frame, and returns the
reply frame (None: no reply). A request may carry an `rid`, which its reply (or error) repeats,
so that a client with the event stream running can tell its replies apart. The table `HANDLERS`
is the list of requests; `docs/protocol.md` describes each.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

from evertalk import __version__
from evertalk.agent.retry import NothingToRetry
from evertalk.chat import broken_error
from evertalk.ledger import ledger_path
from evertalk.protocol import events, wire
from evertalk.providers.base import Image
from evertalk.redaction import redact
from evertalk.service import commands
from evertalk.service.forget_requests import forget
from evertalk.service.paths import log
from evertalk.service.session import Session, error_frame
from evertalk.service.undo_requests import undo
from evertalk.slash import MEMORY_MODEL, MODEL, RETRY, CommandError
from evertalk.store.errors import StoreError
from evertalk.store.records import MessageRecord
from evertalk.usage_cli import read_usage

if TYPE_CHECKING:
    from evertalk.service.server import Service


Reply = dict[str, Any] | None
Handler = Callable[["Service", Session, dict[str, Any]], Reply]

RECORDS_MOST: Final = 2_000
"""Messages one `records` request returns at most."""
RECORDS_BYTES: Final = 8 * 1024 * 1024
"""… and bytes of their texts: the frame stays far under the wire's limit."""
DECISIONS: Final = frozenset({"once", "always", "deny"})


def send(service: Service, session: Session, frame: dict[str, Any]) -> Reply:
    agent = service.agent_open()
    key = frame.get("key")
    if not isinstance(key, str) or not key:
        key = None
    if key is not None and agent.holds_key(key):  # a client that sent it before it lost us
        return {"type": "accepted", "key": key, "duplicate": True}
    text = frame["text"]
    if not isinstance(text, str):
        raise TypeError("text is not a string")
    workdir = _workdir(frame, agent.runtime.config.workdir_path)
    images = [_image(item) for item in frame.get("images") or []]
    model = _model(frame.get("model"))
    held = agent.busy
    agent.submit(text, images, key=key, workdir=workdir, model=model)
    service.sender = session
    # every window shows it, the sender's too, which then knows it is the one logged
    shown = redact(text, agent.secrets)  # as the log will have it
    service.broadcast(events.MessageSent(shown, session.name, held, len(images)))
    return {"type": "accepted", "key": key, "duplicate": False, "held": held}


def retry(service: Service, session: Session, frame: dict[str, Any]) -> Reply:
    try:
        ids = service.agent_open().retry()
    except NothingToRetry as error:
        return error_frame("nothing_to_retry", str(error))
    service.sender = session
    return {"type": "accepted", "ids": ids, "duplicate": False}


def cancel(service: Service, session: Session, frame: dict[str, Any]) -> Reply:
    service.agent_open().cancel()
    return {"type": "ok"}


def status(service: Service, session: Session, frame: dict[str, Any]) -> Reply:
    agent = service.agent_open()
    return {
        "type": "status",
        "pid": os.getpid(),
        "version": __version__,
        "clients": len(service.sessions),
        "messages": agent.chat.t,
        **dataclasses.asdict(agent.status()),
    }


def answer(service: Service, session: Session, frame: dict[str, Any]) -> Reply:
    decision = frame.get("decision")
    if decision in DECISIONS:
        service.answer(str(frame.get("id")), decision)
    return None  # withdrawn meanwhile (the turn was cancelled), or answered elsewhere: quiet


def stop(service: Service, session: Session, frame: dict[str, Any]) -> Reply:
    service.stop(f"asked by {session.name}", on_purpose=True)
    return None


def reopen(service: Service, session: Session, frame: dict[str, Any]) -> Reply:
    """New settings were saved (`/setup`): the service closes its agent and opens one on them,
    its clients still connected (each gets `reopened`). Not while a turn or a subagent works."""
    if service.busy():
        return error_frame("busy", "a turn or a subagent is working: try again once it ends")
    log(f"{session.name} saved new settings: reopening the chat on them")
    service.reopen()
    return {"type": "ok"}


def command(service: Service, session: Session, frame: dict[str, Any]) -> Reply:
    """A slash command that needs the chat: its texts, one per row the client shows."""
    name, args = frame["name"], frame.get("args") or []
    found = next((c for c in commands.SERVED if c.name == name), None)
    if found is None or not isinstance(args, list):
        known = ", ".join(c.name for c in commands.SERVED)
        raise ValueError(f"not a command the service runs: {name!r} (it runs {known})")
    agent = service.agent_open()
    try:
        texts = commands.run(agent, service.home, found, tuple(str(arg) for arg in args))
    except CommandError as error:
        return error_frame("command", str(error))
    if found is RETRY:
        service.sender = session
    if found in (MODEL, MEMORY_MODEL) and args:
        service.settings_saved()  # they wrote config.toml themselves: nothing to restart for
    return {"type": "output", "texts": texts}


def records(service: Service, session: Session, frame: dict[str, Any]) -> Reply:
    """Messages of the log, oldest first: those from `start` to `end`; or, with `last`, the
    last ones (of `kind` only, when given) among the `scan` before `end`."""
    chat = service.agent_open().chat
    t = chat.t
    end = min(t, _count(frame.get("end", t)))
    kind = frame.get("kind")
    found: list[MessageRecord] = []
    size = 0
    try:
        if "last" in frame:
            last = min(_count(frame["last"]), RECORDS_MOST)
            low = max(0, end - _count(frame.get("scan", last)))
            for i in range(end - 1, low - 1, -1):
                if len(found) >= last or size > RECORDS_BYTES:
                    break
                record = chat.store.read_message(i)
                if kind is None or record.kind == kind:
                    found.append(record)
                    size += len(record.text.encode("utf-8", "surrogatepass"))
            found.reverse()
        else:
            start = _count(frame["start"])
            for i in range(start, min(end, start + RECORDS_MOST)):
                if size > RECORDS_BYTES:
                    break
                record = chat.store.read_message(i)
                found.append(record)
                size += len(record.text.encode("utf-8", "surrogatepass"))
    except StoreError as error:
        return error_frame("store", str(error))
    return {"type": "records", "t": t, "records": [wire.record_item(r) for r in found]}


def compact(service: Service, session: Session, frame: dict[str, Any]) -> Reply:
    """`memory compact`: where the compactor is, with failed nodes retried on a timer while a
    client asks (nobody may send a message meanwhile). Once everything is built, a batch of
    merges that waited for the summaries goes on at once."""
    agent = service.agent_open()
    compactor = agent.compactor
    service.compaction_awaited(session, compactor)
    left = compactor.unbuilt()
    merged_from = None
    if left == 0:
        before = agent.chat.core.view.size
        if agent.chat.resume_batch() and agent.chat.core.view.size != before:
            merged_from = before
    behind = agent.status().catching_up
    broken = agent.chat.broken
    return {
        "type": "compact",
        "left": left,
        "built": compactor.built,
        "calls": compactor.calls,
        "cost": round(compactor.cost, 6),
        "rate": compactor.rate(),
        "error": compactor.last_error if compactor.failed_at else None,
        "setup_error": str(compactor.setup_error) if compactor.setup_error else None,
        "broken": str(broken_error(broken)) if broken is not None else None,
        "view_bytes": agent.chat.core.view.size,
        "merged_from": merged_from,
        "catching_up": dataclasses.asdict(behind) if behind is not None else None,
    }


def usage(service: Service, session: Session, frame: dict[str, Any]) -> Reply:
    """`evertalk usage`: the ledger summed up, as the command prints it. The ledger's path is
    left for the client to name, as it names the home."""
    path = ledger_path(service.home)
    return {"type": "usage", "ledger": str(path), **read_usage(path).as_frame()}


HANDLERS: Final[dict[str, Handler]] = {
    "send": send,
    "retry": retry,
    "cancel": cancel,
    "status": status,
    "answer": answer,
    "stop": stop,
    "reopen": reopen,
    "command": command,
    "records": records,
    "compact": compact,
    "usage": usage,
    "forget": forget,
    "undo": undo,
}


def _count(value: object) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ValueError(f"{value!r} is not a count")
    return value


def _model(value: object) -> str | None:
    """The model one message's turn runs on (`-p --model`), or None for the turn model; held
    to the rule config.toml's `model` follows, as a request can carry any JSON."""
    if value is None:
        return None
    if not isinstance(value, str) or not value.strip() or value != value.strip():
        raise ValueError("'model' is not a model name (a string, not blank, no outer spaces)")
    return value


def _workdir(frame: dict[str, Any], configured: Path | None) -> Path | None:
    """Where the tools of a message's turn work: the client's `--workdir`, else `workdir` of
    config.toml, else the folder the client runs in (as `-p` decides on its own)."""
    for value in (frame.get("workdir"), configured, frame.get("cwd")):
        if isinstance(value, str | Path) and os.path.isabs(value):
            return Path(value)
    return None


def _image(item: object) -> Image:
    if not isinstance(item, dict):
        raise TypeError("an image is an object")
    return Image(str(item["media_type"]), str(item["data"]))
