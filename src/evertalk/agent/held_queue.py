"""The messages held for a turn, in order, and their durable copy (`chat/held.jsonl`, SPEC §6.4).

A message is written to the file before it is held, so that what a client was told is
accepted survives a crash; the file is emptied once the log has all of it. The agent decides
when a turn takes them; this queue only keeps them.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace
from datetime import datetime
from pathlib import Path

from evertalk.agent.images import ImageStore
from evertalk.agent.retry import Retried
from evertalk.agent.tools.memory import load_images
from evertalk.agent.turn import Held, explain
from evertalk.store.errors import StoreError
from evertalk.store.held import HeldEntry, HeldFile


@dataclass(frozen=True)
class Quiet(Held):
    """A held stop report: it rides with a turn but must not start one."""


class HeldQueue:
    """What waits for a turn: `add` makes a message durable, then holds it; `take` hands all
    of them to a turn; `settle` empties the file once the log has them."""

    def __init__(self, folder: Path, images: ImageStore, clock: Callable[[], datetime]) -> None:
        self._messages: list[Held] = []
        self._file = HeldFile(folder)
        self._images = images
        self._clock = clock

    def __bool__(self) -> bool:
        return bool(self._messages)

    def __len__(self) -> int:
        return len(self._messages)

    def __iter__(self) -> Iterator[Held]:
        return iter(list(self._messages))

    def add(self, held: Held, *, strict: bool = True) -> Held:
        """Hold a message, written to the file first (with a key of its own if it has none:
        the log keeps the key, which is how the next open knows it was logged). `strict`: a
        message that cannot be made durable is refused (StoreError); otherwise it is held all
        the same, in memory only. Returns the message as held."""
        try:
            held = self._keep(held)
        except StoreError:
            if strict:
                raise
        self._messages.append(held)
        return held

    def take(self) -> list[Held]:
        """Every held message, oldest first; none is held after."""
        taken, self._messages = self._messages, []
        return taken

    def put_back(self, held: list[Held]) -> None:
        """Messages taken but not logged, held again ahead of the rest."""
        self._messages[:0] = held

    def holds(self, key: str) -> bool:
        """Whether a message with this idempotency key is held."""
        return any(held.key == key for held in self._messages)

    def only_quiet(self) -> bool:
        """Whether messages are held and all of them are stop reports (which open no turn)."""
        return bool(self._messages) and all(isinstance(m, Quiet) for m in self._messages)

    def recover(self, warnings: list[str], logged: Callable[[str], bool]) -> int:
        """At open: the file's messages the log lacks are held again, in order; their count."""
        waiting = [entry for entry in self._file.load(warnings) if not logged(entry.key)]
        for entry in waiting:
            loaded, _ = load_images(self._images.folder, entry.images)
            kind = Quiet if entry.quiet else Held
            self._messages.append(
                kind(
                    entry.kind,
                    entry.text,
                    agent=entry.agent,
                    images=tuple(image for _, image in loaded),
                    key=entry.key,
                    workdir=Path(entry.workdir) if entry.workdir is not None else None,
                    model=entry.model,
                )
            )
        return len(waiting)

    def settle(self, logged: Callable[[str], bool]) -> None:
        """Empty the file once the log has all of it."""
        self._file.settle(logged)

    def close(self) -> None:
        self._file.close()

    def _keep(self, held: Held) -> Held:
        """Write a message to the file. A retried message is in the log already."""
        if isinstance(held, Retried):
            return held
        if held.key is None:
            held = replace(held, key=new_key())
        assert held.key is not None
        try:
            images = self._images.save_all(held.images) or []
        except OSError as error:
            raise StoreError(f"cannot keep the message's images: {explain(error)}") from None
        entry = HeldEntry(
            held.key,
            held.kind,
            held.text,
            self._clock().isoformat(timespec="seconds"),
            tuple(images),
            workdir=str(held.workdir) if held.workdir is not None else None,
            agent=held.agent,
            model=held.model,
            quiet=isinstance(held, Quiet),
        )
        self._file.add(entry)
        return held


def new_key() -> str:
    """A key for a message its client sent without one: the held file needs one to tell,
    at the next open, whether the log has it."""
    return f"held-{uuid.uuid4().hex}"
