"""The terminal app: `evertalk` in a terminal opens the chat (SPEC §6, issue 4 §3).

- `main.py`: the entry point after the settings are read: the setup form, then the chat;
- `app.py`: the chat screen, a client of the service: its connection, the input, the slash
  commands' effects, the permission dialogs;
- `turn_rows.py`: the rows of a turn as its events come;
- `history.py`: the rows of the log shown when the app opens;
- `widgets.py`: the rows of the log, the input, the status bar and the permission dialog;
- `commands.py`: completion of the slash commands, the help, the images `/image` attaches;
- `editor.py`: `/instructions` in the user's editor;
- `status.py`: the status bar's text and the `memory:` rows;
- `setup.py`: the setup form (the first run, and `/setup` over the chat).

`run_terminal(home)` is the entry point the command line calls. It reads the settings and, when
a provider is set up, starts the service (unless one runs) before it imports Textual: the two
start side by side, and the app connects once both are up.
"""

from __future__ import annotations

import gc
import sys
from pathlib import Path


def run_terminal(home: Path, message: str | None = None) -> int:
    """Open the chat in the terminal app (sending `message` once connected); the exit
    status."""
    # Start-up makes a great many objects and no garbage worth a collection: the collector is
    # off until the window is connected and shows the log (`main.py` turns it on).
    gc.disable()
    from evertalk.client.connection import ServiceError, start_service
    from evertalk.config import ConfigError, load_config, warn_on_stderr
    from evertalk.runtime import configuration_problem, read_instructions
    from evertalk.terminal_text import escape_controls

    notices: list[str] = []  # for the app to show: stderr is hidden while it runs
    try:
        config = load_config(home, warn=notices.append)
        starting = None
        if configuration_problem(home, config) is None:  # else the setup form comes first
            read_instructions(home)  # what the service would fail on is said before any screen
            starting = start_service(home)
    except (ConfigError, ServiceError) as error:
        if isinstance(error, ConfigError):
            for notice in notices:  # the file was made private before the error was found
                warn_on_stderr(notice)
        print(f"evertalk: {escape_controls(' '.join(str(error).split()))}", file=sys.stderr)
        return 1
    from evertalk.tui.main import run_terminal as run

    return run(home, config, notices, starting, message)


__all__ = ["run_terminal"]
