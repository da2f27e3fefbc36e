"""What one tool call gives back, whoever runs the tool: evertalk's own (`agent/tools/`) or
another MCP server's (`mcp_client/`), which must not import the agent for it."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

from evertalk.memory.text import clip_output, flatten
from evertalk.providers.base import Image, Text
from evertalk.redaction import redact

ERROR_LIMIT = 2_000
"""Longest error text, in characters: one line the model can read, not a dump."""


@dataclass(frozen=True)
class ToolOutcome:
    """What one tool call gave back.

    `content` is what the model gets: at most one Text part (first), then any images. The text
    is already clipped (SPEC §1.5) so that the echo `name: text` fits in one message; only a
    `zoom` of a message that is itself near 30,000 characters is longer, because `zoom(id, 1)`
    returns the message whole (SPEC §6.5): `log_text` clips that one for the log.
    """

    content: list[Text | Image]
    is_error: bool = False
    image_names: tuple[str, ...] = ()
    """Names in `chat/images/` of the images in `content`, when they are already stored there
    (a zoom into a message with images): the log can list them without storing them again."""
    failed: bool = False
    """The call ran but did not do its job: a command that exited with a status other than 0.
    The model reads the output as a plain result (the status is in it); the log and the app
    mark the call failed, as they do an error outcome."""

    @property
    def succeeded(self) -> bool:
        """Whether the call worked: neither an error outcome nor a failed run."""
        return not (self.is_error or self.failed)

    @property
    def text(self) -> str:
        """The joined text parts: what the log keeps after `name: `."""
        return "\n".join(part.text for part in self.content if isinstance(part, Text))

    @property
    def images(self) -> list[Image]:
        return [part for part in self.content if isinstance(part, Image)]

    def log_text(self, name: str) -> str:
        """The `echo` text of SPEC §6.3: the tool's name, `: `, the output, clipped by §1.5."""
        return clip_output(f"{name}: {self.text}")

    def redacted(self, secrets: Sequence[str]) -> ToolOutcome:
        """The outcome with every known secret in its text replaced by `[redacted]`."""
        if not secrets:
            return self
        content = [
            Text(redact(p.text, secrets)) if isinstance(p, Text) else p for p in self.content
        ]
        return replace(self, content=content)


def result(
    text: str, images: list[Image] | None = None, names: tuple[str, ...] = ()
) -> ToolOutcome:
    """A successful outcome. The text is never empty: some APIs refuse an empty text block."""
    content: list[Text | Image] = [Text(text or "(no output)")]
    content.extend(images or [])
    return ToolOutcome(content, image_names=names)


def failure(message: str) -> ToolOutcome:
    """An error outcome: one line, never empty, of bounded length."""
    line = flatten(message).strip() or "the tool failed"
    if len(line) > ERROR_LIMIT:
        line = line[: ERROR_LIMIT - 1] + "…"
    return ToolOutcome([Text(line)], is_error=True)
