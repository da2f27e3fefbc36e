"""The header by which evertalk's own `fetch` tool marks its requests, so that the browse page
can refuse them: the model must not read the chat's page through the web tool. Below both: the
agent loads nothing of a client's side."""

from __future__ import annotations

from typing import Final

MARK_HEADER: Final = "X-Evertalk-Fetch"
