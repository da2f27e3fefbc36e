"""The terminal app: `evertalk` in a terminal opens the chat (SPEC §6, issue 4 §3).

- `app.py`: the chat screen, its event pump and the slash commands' effects;
- `widgets.py`: the rows of the log, the input, the status bar and the permission dialog;
- `commands.py`: the slash commands (parsing, completion, the texts they show);
- `status.py`: the status bar's text and the `memory:` rows;
- `setup.py`: the setup form (the first run, and `/setup` over the chat).

`run_terminal(home)` is the entry point the command line calls; it imports Textual only then.
"""

from __future__ import annotations

from pathlib import Path


def run_terminal(home: Path) -> int:
    """Open the chat in the terminal app; the exit status."""
    from evertalk.tui.app import run_terminal as run

    return run(home)


__all__ = ["run_terminal"]
