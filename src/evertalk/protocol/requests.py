"""The frames a client sends: the `hello`, then requests. Each is a Struct tagged by its wire
name in `type`, and may carry an `rid` of the client's choosing, which the reply repeats.

Where the protocol takes any value and makes the best of it (a `send`'s `key` that is not a
string is no key; `answer`'s fields), the field is typed `Any` and the service decides; every
other field is checked as the frame is read, and a wrong one is a `bad_request`."""

from __future__ import annotations

from typing import Annotated, Any, Literal

import msgspec
from msgspec import UNSET, UnsetType

Count = Annotated[int, msgspec.Meta(ge=0)]
"""A whole number, 0 or more (`records`)."""


class Request(msgspec.Struct, frozen=True, kw_only=True, tag_field="type"):
    """A frame a client sends. A `hello`'s `rid` is answered only if a hello comes again (an
    unknown request then)."""

    rid: Any = UNSET


class Env(msgspec.Struct, frozen=True):
    """Which provider variables a client sees, as salted hashes (`protocol/environment.py`):
    the shape of a hello's `env`, which the service reads leniently (a wrong one is no env)."""

    salt: str
    hashes: dict[str, str | None]


class Hello(Request, frozen=True, tag="hello"):
    """The first frame. Protocol and version are compared whole; a missing one refuses."""

    protocol: int | None = None
    version: str | None = None
    client: str = "client"
    pid: int | None = None
    env: Any = None  # an `Env`, as `environment.digest` makes it; anything else is ignored
    # a client that follows the log: the position of what it has shown (`missed` first)
    since: Count | UnsetType = UNSET
    # … and of the in-place changes it has applied (forgets, repairs: `store/edits.py`)
    edits: Count | UnsetType = UNSET


class Image(msgspec.Struct, frozen=True):
    media_type: str
    data: str  # the file's bytes in base64


class Send(Request, frozen=True, tag="send"):
    text: str
    key: Any = None  # the idempotency key; anything but a non-empty string is none
    cwd: str | None = None
    workdir: str | None = None
    images: list[Image] = []
    model: Any = None  # a model name; the service says why another value is none
    # true: refused while today's spending is past the daily budget (`-p`; the app asks first)
    within_budget: Any = False
    # true: the turn it opens does not wait for a chat that is behind to catch up (`-p --now`)
    now: Any = False


class Retry(Request, frozen=True, tag="retry"):
    """Run the last failed turn again."""

    within_budget: Any = False  # as a `send`'s


class StartNow(Request, frozen=True, tag="start_now"):
    """The turn that waits for a chat that is behind to catch up starts at once."""


class Cancel(Request, frozen=True, tag="cancel"):
    """Stop the running turn; what it logged stays."""


class GetStatus(Request, frozen=True, tag="status"):
    """The service's `status` frame."""


class Answer(Request, frozen=True, tag="answer"):
    """A permission question's answer; one with another decision is ignored."""

    id: Any = None
    decision: Any = None  # "once", "always" or "deny"


class Stop(Request, frozen=True, tag="stop"):
    """Stop the service once summaries in flight land."""


class Reopen(Request, frozen=True, tag="reopen"):
    """Read the settings again and reopen the model."""


class Command(Request, frozen=True, tag="command"):
    name: str
    args: list[Any] = []  # each made a string


class GetRecords(Request, frozen=True, tag="records"):
    """From `start` to `end`; or, with `last`, the last ones (of `kind`) among `scan`."""

    start: Count | UnsetType = UNSET
    end: Count | UnsetType = UNSET
    last: Count | UnsetType = UNSET
    kind: Any = None
    scan: Count | UnsetType = UNSET


class GetView(Request, frozen=True, tag="view"):
    """The view as the next turn sends it."""


class GetZoom(Request, frozen=True, tag="zoom"):
    id: int
    n: int


class GetDate(Request, frozen=True, tag="date"):
    id: int


OutsideKind = Literal["user", "ever", "tool", "echo", "note"]


class OutsideMessage(msgspec.Struct, frozen=True, kw_only=True):
    """One message of an `append`: `date` in ISO 8601 with a time zone, `key` not empty."""

    kind: OutsideKind
    text: str
    key: str | None = None
    date: str | None = None
    images: list[Image] = []


class Append(Request, frozen=True, tag="append"):
    messages: list[OutsideMessage]


class GetCompact(Request, frozen=True, tag="compact"):
    """How far the tree is behind, and what building it costs."""


class GetUsage(Request, frozen=True, tag="usage"):
    """The ledger's totals."""


class Forget(Request, frozen=True, tag="forget"):
    """`range` (`"A"` or `"A-B"`) with a `reason`; or `redact` (`regex`: a regular expression)."""

    range: Any = None
    reason: Any = None
    redact: Any = None
    regex: Any = False
    preview: Any = False


class Undo(Request, frozen=True, tag="undo"):
    turn: Any = None  # the turn's number; null: the last one with changes not undone
    preview: Any = False
