"""Whether the turn model uses the tools it is offered at all.

A small local model may never call a tool and instead write as if it had: a command "run", its
output made up. Nothing in the log looks wrong, so the user is told. The session shows the
watch every event it emits: a tool call ends the watch for good, and a turn that ends normally
without one counts when its replies tell of work done (a command run, a file read: `claims_work`).
A greeting or a question answered from the view needed no tool, and says nothing of the model's
habits. After `QUIET_TURNS` such turns the watch gives one `ToolsUnused` notice, and
keeps a mark of it for the status bar until the model calls a tool after all. Turns that end
otherwise (an error, a cancel, a limit) do not count: they say nothing of the model's habits. A
change of turn model starts a new watch, since the count was the old model's.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Final, Literal

from evertalk.protocol.events import AgentEvent, ReplyLogged, ToolStarted, ToolsUnused, TurnEnded

QUIET_TURNS: Final = 3
"""Turns without a tool call before the notice: a greeting or a question answered from the view
needs none, but a model that uses tools reaches for one (a zoom at least) within a few turns."""

Watching = Literal["watching", "used", "unused"]

WORK_CLAIMED: Final = re.compile(
    r"\bI(?:'ve| have)?\s+(?:just\s+)?(?:ran|run|executed|checked|read|opened|listed|looked at|"
    r"searched|created|wrote|written|edited|deleted|installed|fetched|inspected|tested)\b"
    r"|^\s*\$ \S"  # a shell prompt, as a transcript of a command shows it
    r"|\bexit (?:status|code)\b|\b(?:the|its) output (?:is|was|shows|says)\b",
    re.IGNORECASE | re.MULTILINE,
)
"""Words of a reply that tells of work done with tools (English: the usual words of models)."""


def claims_work(reply: str) -> bool:
    """Whether a reply reads as if commands were run or files read."""
    return WORK_CLAIMED.search(reply) is not None


def unused_text(model: str, turns: int) -> str:
    """The notice, one line: what was seen, what it may mean, and the setting that helps."""
    return (
        f"tools: {model} was offered tools and called none in {turns} turns whose replies tell "
        "of commands run or files read: it may have made them up. "
        '`[turn] tools = "off"` in config.toml stops offering them.'
    )


@dataclass
class ToolWatch:
    """The watch over one session's turn model; `offered` False (tools off) watches nothing."""

    offered: bool
    turns: int = QUIET_TURNS
    state: Watching = "watching"
    quiet: int = 0  # turns that ended normally without a tool call, while watching
    claimed: bool = False  # the running turn's replies told of work done

    @property
    def unused(self) -> bool:
        """The notice was given and the model has not called a tool since."""
        return self.state == "unused"

    def observe(self, event: AgentEvent, model: str) -> ToolsUnused | None:
        """The notice, when this event is the one that makes it due; else None."""
        if not self.offered or self.state == "used":
            return None
        if isinstance(event, ToolStarted):
            self.state = "used"
        elif isinstance(event, ReplyLogged):
            self.claimed = self.claimed or claims_work(event.text)
        elif isinstance(event, TurnEnded):
            claimed, self.claimed = self.claimed, False
            if self.state == "watching" and event.reason == "done" and claimed:
                self.quiet += 1
                if self.quiet >= self.turns:
                    self.state = "unused"
                    return ToolsUnused(self.turns, unused_text(model, self.turns))
        return None

    def restart(self) -> None:
        """Watch afresh: another model answers from now on."""
        self.state, self.quiet, self.claimed = "watching", 0, False
