"""How many tokens a request will take, before it is sent: its bytes over a rate.

The rate starts at the provider layer's BYTES_PER_TOKEN, which counts low on purpose (a request
estimated too small is refused by the server, or cut short by a local one). Once replies have
reported their prompt tokens, the rate is measured from them, with a margin: a local model's
tokenizer may pack prose half again as densely as the guess, and a small window needs every
token it has.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

from evertalk.providers.base import (
    BYTES_PER_TOKEN,
    Event,
    Started,
    TextDelta,
    ThinkingDelta,
    Usage,
)

MEASURED_AFTER = 2_000
"""Prompt tokens reported before the measured rate replaces the guess."""
MARGIN = 0.9
"""The measured rate is taken this much lower: tool outputs and code pack fewer bytes a token
than the prose measured before them."""
LOWEST, HIGHEST = 1.5, 6.0
"""Bounds of the rate, in bytes a token: beyond them a report is more likely wrong than the
tokenizer that odd."""


@dataclass
class TokenEstimate:
    """Bytes a token of one provider's requests, from what its replies reported."""

    bytes_seen: int = 0
    tokens_seen: int = 0

    def observe(self, request_bytes: int, prompt_tokens: int) -> None:
        """A reply reported `prompt_tokens` for a request of `request_bytes`."""
        if prompt_tokens > 0 and request_bytes > 0:
            self.bytes_seen += request_bytes
            self.tokens_seen += prompt_tokens

    @property
    def rate(self) -> float:
        if self.tokens_seen < MEASURED_AFTER:
            return float(BYTES_PER_TOKEN)
        measured = MARGIN * self.bytes_seen / self.tokens_seen
        return min(max(measured, LOWEST), HIGHEST)

    def tokens(self, size: int) -> int:
        """The tokens `size` bytes are estimated to take."""
        return math.ceil(size / self.rate)

    def bytes_for(self, tokens: int) -> int:
        """The most bytes estimated to take at most `tokens` tokens."""
        return math.floor(tokens * self.rate)


@dataclass
class Streamed:
    """What a call's stream has said so far, to bill a call cancelled midway (SPEC §1.8): the
    usage reported when the response began, where the provider reports it then, and the bytes
    of reply streamed since."""

    reported: Usage | None = None
    output_bytes: int = 0

    def observe(self, event: Event) -> None:
        if isinstance(event, Started) and event.usage is not None:
            self.reported = event.usage
        elif isinstance(event, TextDelta | ThinkingDelta):
            self.output_bytes += len(event.text.encode())

    def usage(self, request_bytes: int, estimate: TokenEstimate) -> Usage:
        """The call's usage as far as it went: the reported prompt (else the request's bytes at
        the estimated rate) and the streamed output at the same rate. Always in part an
        estimate: no stream reports its output before it ends."""
        output = estimate.tokens(self.output_bytes)
        if self.reported is not None:
            return replace(self.reported, output=max(self.reported.output, output))
        return Usage(input=estimate.tokens(request_bytes), output=output)
