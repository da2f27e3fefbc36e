"""What the permission dialog shows under its question: the call, and for a `write` or an `edit`
what it does to the file (the service says whether it exists, and sends the diff:
docs/protocol.md); an edit's diff shows the file's line numbers."""

from __future__ import annotations

import re

from msgspec import UNSET
from rich.text import Text

from evertalk.protocol.replies import Ask
from evertalk.terminal_text import escape_controls

CLIP_SHOWN = 20_000  # characters of a new file's content shown (as of a call in its row)

DIFF_STYLES = (("+++", ""), ("---", ""), ("+", "green"), ("-", "red"), ("@@", "cyan"))
"""The style of a diff line by its start, first match wins: the file names are plain."""


def ask_body(ask: Ask, call: str) -> Text:
    """The dialog's body: for a `write` of which the service told, the file's fate and the
    change; for an `edit`, its change, numbered; otherwise `call`, the call as its row
    describes it."""
    path = ask.input.get("path")
    if ask.tool == "edit" and isinstance(ask.diff, str) and isinstance(path, str):
        heading = Text(f"What changes in {escape_controls(path)}:\n\n")
        return heading.append_text(numbered_diff(ask.diff))
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


HUNK = re.compile(r"@@ -(\d+)(?:,\d+)? \+(\d+)(?:,\d+)? @@")


def numbered_diff(diff: str) -> Text:
    """A unified diff without its file names, each line after its number in the file: a
    removed or unchanged line's as the file is now, an added line's as it will be."""
    rows: list[tuple[str, str]] = []  # (number, line)
    now = new = 0
    for line in diff.splitlines():
        hunk = HUNK.match(line)
        if hunk:
            now, new = int(hunk[1]), int(hunk[2])
            rows.append(("", line))
        elif line.startswith(("---", "+++")) and not rows:
            continue
        elif line[:1] == "+":
            rows.append((str(new), f"+ {line[1:]}"))
            new += 1
        elif line[:1] == "-":
            rows.append((str(now), f"- {line[1:]}"))
            now += 1
        elif line[:1] == " ":
            rows.append((str(now), f"  {line[1:]}"))
            now, new = now + 1, new + 1
        else:  # `\ No newline at end of file`, or a line in brackets saying why there is none
            rows.append(("", line))
    width = max((len(number) for number, _ in rows), default=0)
    text = Text()
    for number, line in rows:
        shown = f"{number:>{width}} {line}" if number else line
        style = next((style for start, style in DIFF_STYLES if line.startswith(start)), "")
        text.append(escape_controls(shown) + "\n", style=style)
    text.rstrip()
    return text
