"""What the service answers to each request of a client (after the handshake).

Each handler takes the service (as `context.Served`), the session that asked and the request,
decoded into its type (`protocol/requests.py`), and returns the reply (None: no reply). The
server copies the request's `rid` into the reply, so that a client with the event stream running
can tell its replies apart. The table `HANDLERS` is the list of requests; `docs/protocol.md`
describes each.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path
from typing import Final

import msgspec

from evertalk import __version__
from evertalk.agent.retry import NothingToRetry
from evertalk.agent.session import Agent
from evertalk.budget import OVER_BUDGET_FLAG, Day
from evertalk.chat import broken_error
from evertalk.ledger import ledger_path
from evertalk.memory.text import valid_unicode
from evertalk.protocol import events, replies, requests
from evertalk.protocol.paths import log
from evertalk.providers.base import Image
from evertalk.redaction import redact
from evertalk.service import commands, memory_requests
from evertalk.service.context import HandlerTable, Reply, Served
from evertalk.service.forget_requests import forget
from evertalk.service.session import Session, error_frame
from evertalk.service.undo_requests import undo
from evertalk.slash import MEMORY_MODEL, MODEL, RETRY, CommandError
from evertalk.store.errors import StoreError
from evertalk.store.records import MessageRecord
from evertalk.usage_cli import read_usage

RECORDS_MOST: Final = 2_000
"""Messages one `records` request returns at most."""
RECORDS_BYTES: Final = 8 * 1024 * 1024
"""… and bytes of their texts: the frame stays far under the wire's limit."""
DECISIONS: Final = frozenset({"once", "always", "deny"})


def send(service: Served, session: Session, request: requests.Send) -> Reply:
    agent = service.agent_open()
    key = request.key if isinstance(request.key, str) and request.key else None
    if key is not None and agent.holds_key(key):  # a client that sent it before it lost us
        return replies.Accepted(key=key, duplicate=True)
    refused = _over_budget(agent, request)
    if refused is not None:
        return refused
    workdir = _workdir(request, agent.runtime.config.workdir_path)
    images = [Image(image.media_type, image.data) for image in request.images]
    model = _model(request.model)
    held = agent.busy
    text = kept_text(request.text, agent.secrets)
    agent.submit(text, images, key=key, workdir=workdir, model=model)
    if request.now is True:
        agent.view_wait.start_now()
    service.sender = session
    # every window shows it, the sender's too, which then knows it is the one logged
    service.broadcast(events.MessageSent(text, session.name, held, len(images), key))
    return replies.Accepted(key=key, duplicate=False, held=held)


def kept_text(text: str, secrets: Sequence[str]) -> str:
    """A client's message as the chat keeps it, made once here at the edge: valid Unicode (a
    frame's JSON may carry a lone surrogate) with the known secrets replaced. The held file,
    the model, the `sent` and `delivered` events and the log all get this text, so that each
    window matches what it shows to what the log has."""
    return redact(valid_unicode(text), secrets)


def retry(service: Served, session: Session, request: requests.Retry) -> Reply:
    agent = service.agent_open()
    refused = _over_budget(agent, request)
    if refused is not None:
        return refused
    try:
        ids = agent.retry()
    except NothingToRetry as error:
        return error_frame("nothing_to_retry", str(error))
    service.sender = session
    return replies.Accepted(ids=ids, duplicate=False)


def _over_budget(agent: Agent, request: requests.Send | requests.Retry) -> Reply:
    """The refusal of a turn that would start with today's spending past the daily budget, for
    a client that asked for it (`-p` without --over-budget; the app asks its user first)."""
    daily = agent.runtime.config.budget_daily
    if request.within_budget is not True or daily is None:
        return None
    day = Day(agent.status().cost, daily)
    if not day.over:
        return None
    line = f"not sent: {day.over_line()}; {OVER_BUDGET_FLAG} sends it all the same"
    return error_frame("over_budget", line)


def start_now(service: Served, session: Session, request: requests.StartNow) -> Reply:
    service.agent_open().view_wait.start_now()
    return replies.Ok()


def cancel(service: Served, session: Session, request: requests.Cancel) -> Reply:
    service.agent_open().cancel()
    return replies.Ok()


def status(service: Served, session: Session, request: requests.GetStatus) -> Reply:
    agent = service.agent_open()
    found = agent.status()
    fields = {name: getattr(found, name) for name in found.__struct_fields__}
    if found.catching_up is not None:  # the figure alone, as the status carries it
        fields["catching_up"] = _behind(found.catching_up)
    return replies.Status(
        pid=os.getpid(),
        version=__version__,
        clients=service.clients,
        messages=agent.chat.t,
        **fields,
    )


def _behind(behind: events.Behind) -> events.Behind:
    """The untagged figure of a `CatchingUp` (a status or `compact` field, not an event)."""
    return events.Behind(behind.to_go, behind.eta_seconds, behind.view_tokens)


def answer(service: Served, session: Session, request: requests.Answer) -> Reply:
    if request.decision in DECISIONS:
        service.answer(str(request.id), request.decision)
    return None  # withdrawn meanwhile (the turn was cancelled), or answered elsewhere: quiet


def stop(service: Served, session: Session, request: requests.Stop) -> Reply:
    service.stop(f"asked by {session.name}", on_purpose=True)
    return None


def reopen(service: Served, session: Session, request: requests.Reopen) -> Reply:
    """New settings were saved (`/setup`): the service closes its agent and opens one on them,
    its clients still connected (each gets `reopened`). Not while a turn or a subagent works."""
    if service.busy():
        return error_frame("busy", "a turn or a subagent is working: try again once it ends")
    log(f"{session.name} saved new settings: reopening the chat on them")
    service.reopen()
    return replies.Ok()


def command(service: Served, session: Session, request: requests.Command) -> Reply:
    """A slash command that needs the chat: its texts, one per row the client shows."""
    found = next((c for c in commands.SERVED if c.name == request.name), None)
    if found is None:
        known = ", ".join(c.name for c in commands.SERVED)
        raise ValueError(f"not a command the service runs: {request.name!r} (it runs {known})")
    agent = service.agent_open()
    args = tuple(str(arg) for arg in request.args)
    try:
        texts = commands.run(agent, service.home, found, args)
    except CommandError as error:
        return error_frame("command", str(error))
    if found is RETRY:
        service.sender = session
    if found in (MODEL, MEMORY_MODEL) and args:
        service.settings_saved()  # they wrote config.toml themselves: nothing to restart for
    return replies.Output(texts=texts)


def records(service: Served, session: Session, request: requests.GetRecords) -> Reply:
    """Messages of the log, oldest first: those from `start` to `end`; or, with `last`, the
    last ones (of `kind` only, when given) among the `scan` before `end`."""
    chat = service.agent_open().chat
    t = chat.t
    end = t if request.end is msgspec.UNSET else min(t, request.end)
    found: list[MessageRecord] = []
    size = 0
    try:
        if request.last is not msgspec.UNSET:
            last = min(request.last, RECORDS_MOST)
            low = max(0, end - (last if request.scan is msgspec.UNSET else request.scan))
            for i in range(end - 1, low - 1, -1):
                if len(found) >= last or size > RECORDS_BYTES:
                    break
                record = chat.record(i)
                if request.kind is None or record.kind == request.kind:
                    found.append(record)
                    size += len(record.text.encode("utf-8", "surrogatepass"))
            found.reverse()
        else:
            if request.start is msgspec.UNSET:
                raise KeyError("start")
            start = request.start
            for i in range(start, min(end, start + RECORDS_MOST)):
                if size > RECORDS_BYTES:
                    break
                record = chat.record(i)
                found.append(record)
                size += len(record.text.encode("utf-8", "surrogatepass"))
    except StoreError as error:
        return error_frame("store", str(error))
    return replies.Records(t=t, records=[record_item(r) for r in found])


def record_item(record: MessageRecord) -> replies.RecordItem:
    """A message of the log as a `records` reply carries it (`failed` only when true)."""
    return replies.RecordItem(
        id=record.i,
        kind=record.kind,
        text=record.text,
        key=record.key,
        date=record.date,
        images=list(record.images or ()),
        failed=bool(record.failed),
    )


def compact(service: Served, session: Session, request: requests.GetCompact) -> Reply:
    """`memory compact`: where the compactor is, with failed nodes retried on a timer while a
    client asks (nobody may send a message meanwhile). Once everything is built, a batch of
    merges that waited for the summaries goes on at once."""
    agent = service.agent_open()
    compactor = agent.compactor
    service.compaction_awaited(session, compactor)
    left = compactor.unbuilt()
    merged_from = None
    if left == 0:
        before = agent.chat.view_size
        if agent.chat.resume_batch() and agent.chat.view_size != before:
            merged_from = before
    behind = agent.status().catching_up
    broken = agent.chat.broken
    return replies.Compact(
        left=left,
        built=compactor.built,
        calls=compactor.calls,
        cost=round(compactor.cost, 6),
        rate=compactor.rate(),
        error=compactor.last_error if compactor.failed_at else None,
        setup_error=str(compactor.setup_error) if compactor.setup_error else None,
        broken=str(broken_error(broken)) if broken is not None else None,
        view_bytes=agent.chat.view_size,
        merged_from=merged_from,
        catching_up=_behind(behind) if behind is not None else None,
    )


def usage(service: Served, session: Session, request: requests.GetUsage) -> Reply:
    """`evertalk usage`: the ledger summed up, as the command prints it. The ledger's path is
    left for the client to name, as it names the home."""
    path = ledger_path(service.home)
    report = read_usage(path)
    return replies.Usage(
        ledger=str(path),
        summary=report.summary,
        table=report.table,
        skipped=report.skipped,
        error=report.error,
    )


HANDLERS: Final[HandlerTable] = {
    requests.Send: send,
    requests.Retry: retry,
    requests.Cancel: cancel,
    requests.StartNow: start_now,
    requests.GetStatus: status,
    requests.Answer: answer,
    requests.Stop: stop,
    requests.Reopen: reopen,
    requests.Command: command,
    requests.GetRecords: records,
    requests.GetCompact: compact,
    requests.GetUsage: usage,
    requests.Forget: forget,
    requests.Undo: undo,
    **memory_requests.HANDLERS,
}


def _model(value: object) -> str | None:
    """The model one message's turn runs on (`-p --model`), or None for the turn model; held
    to the rule config.toml's `model` follows, as a request can carry any JSON."""
    if value is None:
        return None
    if not isinstance(value, str) or not value.strip() or value != value.strip():
        raise ValueError("'model' is not a model name (a string, not blank, no outer spaces)")
    return value


def _workdir(request: requests.Send, configured: Path | None) -> Path | None:
    """Where the tools of a message's turn work: the client's `--workdir`, else `workdir` of
    config.toml, else the folder the client runs in (as `-p` decides on its own)."""
    for value in (request.workdir, configured, request.cwd):
        if isinstance(value, str | Path) and os.path.isabs(value):
            return Path(value)
    return None
