"""The errors a node's compaction call ends in that are ours, not the provider's: the service
raises them, and the policy (`policy.classify`) says whose fault each is."""

from __future__ import annotations

from evertalk.providers.base import ProviderError


class UnusableReply(Exception):
    """No try of the size loop gave a usable line (SPEC §4.4 step 5, §4.8). `rejected`: its
    last line was not true to its input."""

    def __init__(self, message: str, rejected: bool = False) -> None:
        super().__init__(message)
        self.rejected = rejected


class TooLong(Exception):
    """The node's task alone (its input) does not fit the model's context window: no call could
    build it, and no retry would change that."""


class RefusedLocally(Exception):
    """The adapter refused the request before sending it (a setting it does not accept): the
    settings are at fault, not the node. Carries the adapter's error."""

    def __init__(self, error: ProviderError) -> None:
        super().__init__(str(error))
        self.error = error
