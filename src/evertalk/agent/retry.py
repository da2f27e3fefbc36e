"""Trying a failed turn again without logging its message twice (`Agent.retry`, the app's
`/retry`, `evertalk -p --retry`).

A turn whose model call fails for good leaves its message in the log, with what the turn did
before it failed (tool calls, results) and an `echo` saying why it stopped. Sending the message
again would log it twice; a retry instead runs a new turn for the message already logged.

Which message: the last unanswered one, read from the end of the log. The last `user` or `work`
message is unanswered when no `ever` reply follows it: only the tool calls, results and notes
of a turn that failed, and the part of a reply that a cancel cut off (marked `REPLY_CUT`).
Once a reply is logged, a new turn would say it again; a new message goes on from there instead.
A long message is taken whole (all its pages), with its images.

What the retried turn sees: the current view, then the header and the message again (SPEC
§6.2). The view before the message (SPEC §6.4: a message that opens a turn never appears in the
view it follows) cannot be had back: the message's line may have merged since, and the failed
turn's own lines follow it. Nor should it be: those lines say what that turn already did (a
command it ran, a file it wrote) and why it stopped, which a blind second turn would do again.
The message then appears twice, once as a line of the view and once whole after the header,
which marks it as the one to answer.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from evertalk.agent.tools.memory import load_images
from evertalk.agent.turn import REPLY_CUT, Held
from evertalk.chat import Chat
from evertalk.store.records import MessageRecord

NO_MESSAGE = "nothing to retry: there is no message to answer again"
ANSWERED = "nothing to retry: the last message has a reply (send a new one to go on)"
BUSY = "a turn is running (or about to): it answers the messages sent so far"

LEFT_BY_A_FAILED_TURN = frozenset({"tool", "echo", "note"})
"""What may follow an unanswered message: a failed turn's tool calls and results, notes."""


class NothingToRetry(Exception):
    """No turn to try again (every message has a reply, or a turn runs): one line."""


@dataclass(frozen=True)
class Retried(Held):
    """A message already logged, held to open a turn again: `ids` are its ids in the log (it
    is never logged a second time)."""

    ids: tuple[int, ...] = ()


def turn_id(held: Sequence[Held], ids: Sequence[int], t: int) -> int:
    """The id of a turn opened by `held`, logged as `ids`, T now being `t`: the id its log keys
    (`turn-<id>-<step>-<n>`) and ledger records carry. It is the first id its opening logged, or,
    for a retried message alone, T: the id of the turn's first own message. A retried turn must
    not take the keys of the turn that failed: its messages would be taken for re-sent ones, and
    never logged."""
    logged_before = {i for message in held if isinstance(message, Retried) for i in message.ids}
    return next((i for i in ids if i not in logged_before), t)


def find_unanswered(chat: Chat, images: Path) -> Retried:
    """The last unanswered message, whole, its images read from `images`; NothingToRetry
    when there is none."""
    return _whole(chat, _last_unanswered(chat), images)


def has_unanswered(chat: Chat) -> bool:
    """Whether the last message has no reply (a retry would find it)."""
    try:
        _last_unanswered(chat)
    except NothingToRetry:
        return False
    return True


def _last_unanswered(chat: Chat) -> MessageRecord:
    """The last (or only) page of the last unanswered message, read from the end of the log
    back over what a failed turn leaves; NothingToRetry at a reply, or with no message."""
    i = chat.t - 1
    while i >= 0:
        record = chat.record(i)
        if record.kind == "ever" and _cut_off(record.text):  # over all its pages
            i = record.i - (record.page.part if record.page is not None else 0) - 1
            continue
        if record.kind == "ever":
            raise NothingToRetry(ANSWERED)
        if record.kind in ("user", "work"):
            return record
        if record.kind not in LEFT_BY_A_FAILED_TURN:
            break
        i -= 1
    raise NothingToRetry(NO_MESSAGE)


def _cut_off(text: str) -> bool:
    """Whether a reply was logged as it stood when a cancel cut it off."""
    return text.rpartition("\n")[2].startswith(REPLY_CUT)


def _whole(chat: Chat, last: MessageRecord, images: Path) -> Retried:
    """The message whose last page is `last`: a long one was logged as consecutive pages, its
    images on the first."""
    first = last.i - last.page.part if last.page is not None else last.i
    pages = [*chat.records(first, last.i), last]
    # an image whose file is gone stays behind: the words are what the turn is for
    loaded, _ = load_images(images, pages[0].images or ())
    return Retried(
        "user" if last.kind == "user" else "work",
        "".join(page.text for page in pages),
        agent=last.agent,
        images=tuple(image for _, image in loaded),
        ids=tuple(page.i for page in pages),
    )
