"""The question a message (or `/retry`) meets when today's spending is past the daily budget
(`budget.py`): start the turn all the same, or not. Not is the default (Enter, Esc, `n`)."""

from __future__ import annotations

from textual.app import ComposeResult
from textual.containers import Horizontal, Vertical
from textual.markup import escape
from textual.widgets import Button, Label

from evertalk.terminal_text import escape_controls
from evertalk.tui.yes_no import YesNoScreen


class BudgetScreen(YesNoScreen):
    """Dismissed with True to send the message, False to keep it back."""

    DEFAULT_CSS = """
    BudgetScreen { align: center middle; }
    BudgetScreen > Vertical {
        width: 80%;
        max-width: 90;
        height: auto;
        border: round $warning;
        padding: 1 2;
        background: $surface;
    }
    /* the dialog's width, not the text's: a long reason wraps and the question shows */
    BudgetScreen #budget-why { width: 100%; }
    BudgetScreen Horizontal { height: auto; margin-top: 1; }
    BudgetScreen Button { margin-right: 2; }
    """
    YES = "send"

    def __init__(self, why: str, question: str = "Send this message") -> None:
        super().__init__()
        self.why = why
        self.question = question  # what goes ahead on a yes

    def compose(self) -> ComposeResult:
        text = f"{self.why[0].upper()}{self.why[1:]}. {self.question} all the same?"
        with Vertical():
            yield Label(escape(escape_controls(text)), id="budget-why")
            with Horizontal():
                yield Button("No (n)", id="keep", variant="primary")
                yield Button("Yes (y)", id="send", variant="warning")
