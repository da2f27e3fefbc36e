"""A dialog whose question is answered yes or no: `y`, or the button whose id is the screen's
YES, says yes; `n`, Esc or the button `#keep` say no. `#keep` has the focus at first, so that
Enter leaves things as they are."""

from __future__ import annotations

from typing import ClassVar

from textual.binding import Binding, BindingType
from textual.screen import ModalScreen
from textual.widgets import Button


class YesNoScreen(ModalScreen[bool]):
    """Dismissed with True on a yes, False on a no."""

    YES: ClassVar[str] = "yes"
    """The id of the button that says yes."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("y", "answer(True)", "yes", show=False),
        Binding("n", "answer(False)", "no", show=False),
        Binding("escape", "answer(False)", "no", show=False),
    ]

    def on_mount(self) -> None:
        self.query_one("#keep", Button).focus()

    def on_button_pressed(self, event: Button.Pressed) -> None:
        self.dismiss(event.button.id == self.YES)

    def action_answer(self, yes: bool) -> None:
        self.dismiss(yes)
