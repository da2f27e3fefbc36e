"""Reading other agents' history as evertalk messages: the reading half of `evertalk import`.

    reading = read_paths(["~/.claude/projects", "~/.codex/sessions", "export.zip"])
    for message in reading.messages():      # oldest first
        ...                                  # append message.kind, .text, .images, key=.key,
                                             # date=.time
    reading.problems                          # what could not be read, file and line
    reading.skipped                           # what was left out on purpose, by reason

Sources: Claude Code transcripts (`claude_code`), Codex CLI rollouts (`codex`), a ChatGPT export
(`chatgpt`), and evertalk's own JSON Lines (`plain`); each module says what of its format it
reads and what it leaves out. Across them: user words → `user`, replies → `ever`, tool calls →
`tool` (`name {compact JSON input}`), results → `echo` (`name: output`, clipped as SPEC §1.5
says), images kept as (media type, base64), thoughts never. A long text is kept whole: the log
splits it (SPEC §1.6). Nothing here imports the agent or a provider's SDK.
"""

from evertalk.importers.model import Conversation, Imported, Reading
from evertalk.importers.paths import read_paths
from evertalk.importers.plain import record_line

__all__ = ["Conversation", "Imported", "Reading", "read_paths", "record_line"]
