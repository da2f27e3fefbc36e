"""A turn that lost the chat's turn lock (a chat shared through a database, `sharing.py`): it
stops, and what it took is held again, to be answered once this machine holds the turn again.

A message the lost turn logged is held as `Retried`, so that it is never logged a second time;
one it took but could not log (the database refused it) is held as it was; a stop report it
logged is left out, as it opens no turn.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from evertalk.agent.held_queue import Quiet
from evertalk.agent.retry import Retried
from evertalk.agent.turn import Held

LOST_LOCK = "this machine lost the chat's turn lock (its database session ended)"
"""Why a turn stopped when its lock was lost: its `turn stopped` line and its warning say so."""


def hold_again(taken: Sequence[Held], ids_of: Callable[[str], list[int] | None]) -> list[Held]:
    """What a lost turn took, in order, as it is to be held again; `ids_of(key)` reads the ids
    a key was logged with (None: not logged)."""
    again: list[Held] = []
    for held in taken:
        ids = None if isinstance(held, Retried) or held.key is None else ids_of(held.key)
        if ids is None:
            again.append(held)
        elif not isinstance(held, Quiet):
            again.append(
                Retried(
                    held.kind,
                    held.text,
                    agent=held.agent,
                    images=held.images,
                    key=held.key,  # a mid-turn delivery sent again is still logged once
                    workdir=held.workdir,
                    model=held.model,
                    ids=tuple(ids),
                )
            )
    return again
