"""What the permission dialog shows under its question: the call, and for a `write` what it does
to the file (the service says whether it exists, and sends the diff: docs/protocol.md)."""

from __future__ import annotations

from msgspec import UNSET
from rich.text import Text

from evertalk.protocol.replies import Ask
from evertalk.terminal_text import escape_controls

CLIP_SHOWN = 20_000  # characters of a new file's content shown (as of a call in its row)

DIFF_STYLES = (("+++", ""), ("---", ""), ("+", "green"), ("-", "red"), ("@@", "cyan"))
"""The style of a diff line by its start, first match wins: the file names are plain."""


def ask_body(ask: Ask, call: str) -> Text:
    """The dialog's body: for a `write` of which the service told, the file's fate and the
    change; otherwise `call`, the call as its row describes it."""
    content = ask.input.get("content")
    if ask.tool != "write" or not isinstance(content, str) or ask.exists is UNSET:
        return Text(escape_controls(call))
    if not ask.exists:
        count = len(content.splitlines())
        said = f"A new file, created with {count} line{'s' if count != 1 else ''}:\n\n"
        shown = content if len(content) <= CLIP_SHOWN else content[: CLIP_SHOWN - 1] + "…"
        return Text(said + escape_controls(shown))
    body = Text("The file exists and will be replaced. What changes:\n\n")
    return body.append_text(diff_text(ask.diff if isinstance(ask.diff, str) else ""))


def diff_text(diff: str) -> Text:
    """A unified diff, its added lines green and its removed ones red."""
    text = Text()
    for line in diff.splitlines():
        style = next((style for start, style in DIFF_STYLES if line.startswith(start)), "")
        text.append(escape_controls(line) + "\n", style=style)
    text.rstrip()
    return text
