"""`ChatReading`: the log's messages and the tree's lines, as the memory tools show them."""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime
from typing import TYPE_CHECKING

from evertalk.chat_parts.state import ChatState
from evertalk.memory import Node, node_name
from evertalk.memory.text import PLACEHOLDER, flatten
from evertalk.memory.view import frame, render_line
from evertalk.note_lines import zoomed_message

if TYPE_CHECKING:
    from evertalk.store.records import MessageRecord


class ToolInputError(ValueError):
    """A memory tool was called with input it refuses; the message is one line."""


class ChatReading(ChatState):
    """Messages by id, built nodes' texts and lines (kept: a built node never changes), the
    views rendered, `zoom` and `date`."""

    @property
    def t(self) -> int:
        return self.core.t

    def text_of(self, node: Node) -> str | None:
        """A built node's text: from the core when it holds it, else from the texts kept, else
        from the store (then kept: a built node never changes)."""
        if not self.core.tree.is_built(node):
            return None
        held = self.core.tree.text_of(node)
        if held is not None:
            return held
        text = self._texts.get(node)
        if text is not None:
            return text
        record = self.store.read_node(node[0], node[1])
        if record is None:
            return None
        self._keep_text(node, record.text)
        return record.text

    def _keep_text(self, node: Node, text: str) -> None:
        self._texts.put(node, text)

    def _texts_to_read(self, nodes: Iterable[Node]) -> list[Node]:
        """The built nodes among `nodes` whose texts neither the core nor the chat holds."""
        tree, kept = self.core.tree, self._texts
        return [n for n in nodes if tree.is_built(n) and tree.text_of(n) is None and n not in kept]

    def line_of(self, node: Node) -> str | None:
        """A built node's rendered line (`id+n|text`), None for an unbuilt node; kept, so that
        rendering a view reads nothing from disk and flattens nothing again."""
        line = self._lines.get(node)
        if line is not None:
            return line
        text = self.text_of(node)
        if text is None:
            return None
        line = render_line(node, text)
        self._lines.put(node, line)
        return line

    def render_view(self) -> str:
        return self._render(self.core.view)

    def render_cview(self) -> str:
        return self._render(self.core.cview)

    def _render(self, nodes: Iterable[Node]) -> str:
        line_of = self.line_of
        return frame(line_of(node) or render_line(node, None) for node in nodes)

    def zoom(self, start: int, count: int) -> str:
        """`zoom(id, n)` of SPEC §6.5: a node's two halves, or message `id` whole when n = 1."""
        node = self.zoom_node(start, count)
        if count == 1:
            record = self.record(start)
            return f"{start}+1|{zoomed_message(record.kind, record.text)}"
        half = count // 2
        lines = []
        for child in ((node[0] - 1, 2 * node[1]), (node[0] - 1, 2 * node[1] + 1)):
            text = self.text_of(child)
            shown = PLACEHOLDER if text is None else flatten(text)
            lines.append(f"{node_name(child)}|{shown}")
        assert half == 1 << (node[0] - 1)
        return "\n".join(lines)

    def zoom_node(self, start: int, count: int) -> Node:
        t = self.core.t
        if count < 1 or count & (count - 1):
            raise ToolInputError(f"n must be a power of 2 (1, 2, 4, …), not {count}")
        if start < 0 or start % count:
            raise ToolInputError(f"id must be a multiple of n ({count}) and not negative")
        if start + count > t:
            raise ToolInputError(f"{start}+{count} goes past the end of the chat ({t} messages)")
        level = count.bit_length() - 1
        return (level, start >> level)

    def date(self, i: int) -> str:
        """`date(id)` of SPEC §6.5, in the machine's current local time zone."""
        if not 0 <= i < self.core.t:
            raise ToolInputError(f"id must be between 0 and {self.core.t - 1}, not {i}")
        return format_date(self.record(i).date)

    def record(self, i: int) -> MessageRecord:
        """Message `i` of the log (a StoreError if it cannot be read)."""
        return self.store.read_message(i)

    def records(self, start: int, stop: int) -> list[MessageRecord]:
        """Messages `start` up to (not with) `stop` of the log, in order."""
        return [self.record(i) for i in range(start, stop)]

    def logged(self, key: str) -> bool:
        """Whether a message sent with `key` is in the log."""
        return self.store.logged(key)


def format_date(iso: str) -> str:
    """`2026-10-08 Thursday 14:03:22 +02:00`, in the current local time zone."""
    moment = datetime.fromisoformat(iso).astimezone()
    offset = moment.strftime("%z")
    return moment.strftime("%Y-%m-%d %A %H:%M:%S ") + f"{offset[:3]}:{offset[3:]}"
