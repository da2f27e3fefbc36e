"""The fast decoders of a rebuild: a log line decoded in one C call into a typed struct.

A rebuild reads every line of the log; json.loads and a dict per line cost most of its time.
These decode a line at once, and refuse (msgspec.DecodeError) every line they cannot vouch for:
anything that is not plainly a well-formed record, a page of a long message, a key they do not
know. A refused line goes to `records.read_message_line` or `records.read_node_line`, which
decide as before. Refusing unknown keys is what makes "accepted here" imply "accepted there,
with the same values": msgspec checks the UTF-8 and the escapes of every string it decodes, but
only skips over the values of keys it does not know, and there json.loads (which reads the whole
line as UTF-8, and allows lone surrogates, NaN and Infinity) might decide otherwise.

A module of its own, loaded only by a scan of the log: a reader of an index that is whole
(`memory status`) never loads msgspec.
"""

from __future__ import annotations

from typing import Annotated, Literal, get_args

import msgspec

from evertalk.memory.text import KINDS
from evertalk.store.records import NODE_LEVELS

Count = Annotated[int, msgspec.Meta(ge=0)]
"""A non-negative int; msgspec refuses true, false and 1.0 for an int, as `records._is_count`
does."""
Kind = Literal["user", "ever", "tool", "echo", "work", "note"]
assert frozenset(get_args(Kind)) == KINDS, "Kind must list the kinds of SPEC §1.2"


class MessageLine(msgspec.Struct, forbid_unknown_fields=True, gc=False):
    """A whole message (not a page) with no key but those of SPEC §1.2, all well typed."""

    i: Count
    kind: Kind
    text: str
    size: Count
    date: str
    key: str | None = None
    images: list[str] | None = None
    agent: str | None = None
    failed: bool = False  # msgspec refuses a non-boolean, which the definition reads as False


class NodeLine(msgspec.Struct, forbid_unknown_fields=True, gc=False):
    """A tree record's keys, well typed. What `decode_node` checks beyond types (the text's byte
    size, not both `free` and `cut`) the rebuild checks in its loop, where a call per node
    would cost a tenth of its time. A level past NODE_LEVELS is left to the definition too, so
    that the loop can look the level up in a list of NODE_LEVELS without a check of its own."""

    l: Annotated[int, msgspec.Meta(ge=0, lt=NODE_LEVELS)]  # noqa: E741 - the spec's name
    i: Count
    text: str
    size: Count
    free: bool = False
    cut: bool = False


decode_message_line = msgspec.json.Decoder(MessageLine).decode
decode_node_line = msgspec.json.Decoder(NodeLine).decode
REFUSED = (msgspec.DecodeError, RecursionError)
"""What the fast decoders raise for a line they leave to the definition (RecursionError: nesting
deeper than the interpreter allows, which json.loads refuses too; these types nest two deep)."""
