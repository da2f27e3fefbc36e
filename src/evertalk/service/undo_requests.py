"""The `undo` request: the service owns the tools, so it keeps what their writes replaced
(`agent/tools/checkpoints.py`) and puts it back (`agent/undo.py`). `evertalk undo` and the app's
`/undo` send it.

`{"type": "undo", "turn": N or null, "preview": true}` answers `undo_preview`: the turn chosen
(the last one with changes not undone, when `turn` is null), the preview's lines (the files, what
happens to each, a unified diff from the file as it is to the file restored) and how many files
change. Without `preview` the files are restored (each checked again first) and the chat gets a
`note` saying what was undone, so that Ever knows; `undone` lists the files. Not while a turn or
a subagent works: it could write the same files meanwhile.
"""

from __future__ import annotations

import uuid

from evertalk.agent.session import Outside
from evertalk.agent.undo import UndoError, apply, plan
from evertalk.chat import Chat
from evertalk.protocol import events, replies, requests
from evertalk.protocol.paths import log
from evertalk.service.context import Reply, Served
from evertalk.service.session import Session, error_frame
from evertalk.store.errors import StoreError


def undo(service: Served, session: Session, request: requests.Undo) -> Reply:
    agent = service.agent_open()
    turn = request.turn
    if turn is not None and (isinstance(turn, bool) or not isinstance(turn, int)):
        raise ValueError(f"'turn' is a turn's number, not {turn!r}")
    if not request.preview and (agent.turning or agent.subagents.running):
        return error_frame("busy", "a turn or a subagent is working: undo once it ends")
    try:
        planned = plan(agent.checkpoints, turn)
    except UndoError as error:
        return error_frame("nothing_to_undo", str(error))
    if request.preview:
        return replies.UndoPreview(
            turn=planned.turn,
            lines=planned.lines(_opened_by(agent.chat, planned.turn)),
            changes=len(planned.changes),
            refused=[f.shown for f in planned.refused],
        )
    done = apply(agent.checkpoints, planned)
    log(f"{session.name} undid turn {done.turn}: {len(done.restored) + len(done.removed)} files")
    reply = replies.Undone(
        turn=done.turn,
        restored=done.restored,
        removed=done.removed,
        refused=done.refused,
        lines=done.lines(),
    )
    note = done.note()
    try:
        ids, _ = agent.record([Outside("note", note, key=f"undo-{done.turn}-{uuid.uuid4().hex}")])
    except StoreError as error:  # the files are back all the same: say what the chat missed
        reply.lines.append(f"The chat could not be told ({error}).")
        return reply
    service.broadcast(events.Recorded(session.name, len(ids), "note", note))
    return reply


def _opened_by(chat: Chat, turn: int) -> str:
    """The start of the message that opened the turn (its id is the turn's), quoted."""
    try:
        record = chat.record(turn)
    except (StoreError, IndexError, ValueError):
        return ""
    if record.kind not in ("user", "work"):
        return ""
    words = " ".join(record.text.split())
    return f"“{words[:60]}…”" if len(words) > 60 else f"“{words}”"
