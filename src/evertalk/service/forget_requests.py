"""The `forget` request (SPEC §12): the service owns the chat's files, so a forget or a redaction
asked while it runs is its work. `memory forget`, `memory redact` and the app's `/forget` send
it; no tool of the model and no MCP request does.

`{"type": "forget", "range": "A-B", "reason": …}` or `{"type": "forget", "redact": TEXT,
"regex": bool}`, with `"preview": true` for the preview's lines alone. Applied, the chat is
closed and opened again (the nodes dropped are queued again), and every client gets `reopened`.

A turn running then is cancelled first, its stop logged with the reason (`before_forget`): each
of its calls was sent the whole view, so each covers whatever is forgotten, and its reply could
repeat the text. The compactor's calls in flight are cancelled before the files change: those
over the changed messages so that no line made from the old text is stored, the others since
the reopen would end them anyway (a line landing in between would find the chat closed to
writes); the new agent sends them again. Not while a subagent works: the reopen would end it and
lose its work (stop it first), as it would at `/setup`.
"""

from __future__ import annotations

from evertalk.forget_cli import (
    ForgetError,
    describe,
    forget_plan,
    nothing,
    parse_range,
    places_of,
    redact_plan,
)
from evertalk.protocol import replies, requests
from evertalk.protocol.paths import log
from evertalk.service.context import Reply, Served
from evertalk.service.session import Session, error_frame
from evertalk.store.chat_dir import ChatStore
from evertalk.store.errors import StoreError
from evertalk.store.forget import Plan, apply

STOPS_TURN = "a forget changed the memory it was sent"
"""Why a turn a forget cancelled stopped, as its log says."""


async def before_forget(service: Served, request: requests.Request) -> None:
    """Before a forget is applied: the running turn cancelled and ended (see the module's
    text). The request's handler runs right after, with no wait between: no turn starts."""
    if not isinstance(request, requests.Forget) or request.preview:
        return
    agent = service.agent
    if agent is None or agent.subagents.running or not _may_apply(request, agent.chat.t):
        return  # the handler refuses it: the turn goes on
    await agent.stop_turn(STOPS_TURN)


def _may_apply(request: requests.Forget, t: int) -> bool:
    """Whether a forget may change anything: not a range that is not there."""
    if isinstance(request.redact, str):
        return bool(request.redact)
    words = request.range
    try:
        last = parse_range(words)[1] if isinstance(words, str) else t
    except ForgetError:
        return False
    return last < t


def forget(service: Served, session: Session, request: requests.Forget) -> Reply:
    agent = service.agent_open()
    if not request.preview and agent.subagents.running:
        return error_frame("busy", "a subagent is working: stop it first, or wait until it ends")
    try:
        store = agent.chat.files  # forgetting in a database is not built yet
        plan = _plan(store, request)
    except (ForgetError, StoreError) as error:
        return error_frame("bad_request", f"forget: {error}")
    places = places_of(plan, store.path)
    if request.preview:
        found = len(plan.changes) + len(plan.dropped) + sum(len(paths) for _, paths in places)
        return replies.ForgetPreview(lines=describe(plan, store.path, places), changes=found)
    if nothing(plan, places):
        return replies.Forgotten(messages=0, summaries=0)
    if agent.turning:  # `before_forget` ended it, and none starts before this runs
        return error_frame("busy", "a turn is working: try again")
    agent.compactor.cancel_in_flight()
    apply(store, plan)
    log(f"{session.name} forgot {len(plan.changes)} messages: reopening the chat")
    service.reopen()
    return replies.Forgotten(messages=len(plan.changes), summaries=len(plan.dropped))


def _plan(store: ChatStore, request: requests.Forget) -> Plan:
    text = request.redact
    if isinstance(text, str):
        return redact_plan(store, text, regex=request.regex is True)
    words = request.range
    if not isinstance(words, str):
        raise ForgetError("say which messages: 'range' (A or A-B) or 'redact'")
    first, last = parse_range(words)
    reason = request.reason
    return forget_plan(store, first, last, reason if isinstance(reason, str) else None)
