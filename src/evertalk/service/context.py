"""What a request's handler may ask of the service: the `Served` protocol that `server.Service`
fulfils, so that the handlers (`requests.py`, `memory_requests.py`, `forget_requests.py`,
`undo_requests.py`) never import the server, which imports them."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from evertalk.protocol import frames, requests

if TYPE_CHECKING:
    from evertalk.agent.permissions import Decision
    from evertalk.agent.session import Agent
    from evertalk.compactor.service import Compactor
    from evertalk.service.session import Session


class NotReady(Exception):
    """The service has no agent for a moment (it reopens on new settings)."""


class Served(Protocol):
    """The service as its handlers see it."""

    home: Path
    agent: Agent | None
    sender: Session | None  # who sent the latest message: asked first

    @property
    def clients(self) -> int:
        """Clients connected now."""

    def agent_open(self) -> Agent:
        """The agent; NotReady while a reopen has none."""

    def answer(self, ask_id: str, decision: Decision) -> None:
        """A permission question's answer."""

    def broadcast(self, event: object) -> None:
        """An event to every client."""

    def busy(self) -> bool:
        """A turn runs, a message waits or a subagent works."""

    def stop(self, reason: str, *, on_purpose: bool = False) -> None:
        """Stop, saying why to every client."""

    def reopen(self) -> None:
        """Close the agent and open one on the settings saved now."""

    def settings_saved(self) -> None:
        """The service itself wrote config.toml: no client need restart it for that."""

    def compaction_awaited(self, session: Session, compactor: Compactor) -> None:
        """A `memory compact` client waits: failed nodes are retried on a timer."""


Reply = frames.ReplyFrame | None
"""What a handler answers (None: nothing)."""
Handler = Callable[[Served, "Session", Any], Reply]
"""A request's handler: the service, the session that asked, the request (of its type)."""
HandlerTable = dict[type[requests.Request], Handler]
