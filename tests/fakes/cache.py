"""The prompt-cache models of the fakes. Both take an injectable `clock` (seconds, monotonic).

`BlockCache` follows Anthropic's documented rules for explicit marks:

- The prompt is a sequence of blocks, in the order tools, system blocks, message content blocks
  (a string `system` or message `content` is one block). A block carrying `cache_control` is a
  *mark* (breakpoint).
- A block's identity is its JSON without `cache_control`, plus its role and whether it opens a
  message; the first message block also carries the request's `tool_choice` and `thinking`
  settings, since changing those invalidates the cached messages (not tools or system). The key
  of a prefix chains sha256 over the model and the identities of its blocks, so entries are per
  model and a moved mark does not change any key.
- Lookup, when the request arrives: from each mark b the prefixes ending at b, b-1, ..., b-20
  (`lookback`) are checked, nearest first. The longest prefix found over all marks is read
  (`cache_read_input_tokens`) and its lifetime restarts.
- Writes, when the response starts (so a request still waiting for its response start cannot feed
  another): an entry at every mark after the prefix read whose prefix holds at least `min_tokens`
  tokens. `cache_creation_input_tokens` counts the tokens from the end of the prefix read to the
  last mark written; all other tokens are `input_tokens`.
- An entry lives `ttl` seconds (5 minutes) from its last write or read.

`PrefixCache` is OpenAI's automatic prefix caching, simplified: the rendered prompt of a request is
hashed at token boundaries 1024, 1152, 1280, ... (`min_tokens`, then every `step`); the cached
tokens are the longest such prefix that an earlier request with the same model and
`prompt_cache_key` (if any) left, i.e. the common prefix rounded down to the boundaries.

Tokens are `tokens_of` (ceil(UTF-8 bytes / 4)): per block for `BlockCache`, over the whole
rendering for `PrefixCache` (a boundary of t tokens sits at byte 4·t).
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from .common import tokens_of

Clock = Callable[[], float]


@dataclass(frozen=True)
class Block:
    identity: str
    tokens: int
    marked: bool


@dataclass(frozen=True)
class CachePlan:
    read: int
    write: int
    input: int
    writes: tuple[str, ...] = ()
    hit_block: int = -1  # index of the last block of the prefix read; -1: nothing read


class BlockCache:
    def __init__(
        self,
        clock: Clock,
        *,
        ttl: float = 300.0,
        lookback: int = 20,
        min_tokens: int = 1024,
    ) -> None:
        self.clock = clock
        self.ttl = ttl
        self.lookback = lookback
        self.min_tokens = min_tokens
        self.entries: dict[str, float] = {}  # prefix key -> time of last use

    def live(self, key: str) -> bool:
        used = self.entries.get(key)
        if used is None:
            return False
        if self.clock() - used >= self.ttl:
            del self.entries[key]
            return False
        return True

    def plan(self, model: str, blocks: Sequence[Block]) -> CachePlan:
        """Looks the request up (restarting the life of the entry read); writes nothing yet."""
        keys: list[str] = []
        ends: list[int] = []  # tokens up to and including block i
        chain = hashlib.sha256(model.encode()).hexdigest()
        total = 0
        for block in blocks:
            chain = hashlib.sha256(f"{chain}\n{block.identity}".encode()).hexdigest()
            keys.append(chain)
            total += block.tokens
            ends.append(total)
        marks = [i for i, block in enumerate(blocks) if block.marked]
        hit = -1
        for mark in marks:
            for i in range(mark, max(mark - self.lookback, 0) - 1, -1):
                if i <= hit:
                    break
                if self.live(keys[i]):
                    hit = i
                    break
        read = ends[hit] if hit >= 0 else 0
        if hit >= 0:
            self.entries[keys[hit]] = self.clock()
        written = [m for m in marks if m > hit and ends[m] >= self.min_tokens]
        write = ends[written[-1]] - read if written else 0
        return CachePlan(
            read=read,
            write=write,
            input=total - read - write,
            writes=tuple(keys[m] for m in written),
            hit_block=hit,
        )

    def commit(self, plan: CachePlan) -> None:
        """The response has started: its entries become readable."""
        now = self.clock()
        for key in plan.writes:
            self.entries[key] = now


@dataclass(frozen=True)
class PrefixPlan:
    prompt_tokens: int
    cached: int
    writes: tuple[str, ...] = ()


class PrefixCache:
    def __init__(
        self,
        clock: Clock,
        *,
        ttl: float = 300.0,
        min_tokens: int = 1024,
        step: int = 128,
    ) -> None:
        self.clock = clock
        self.ttl = ttl
        self.min_tokens = min_tokens
        self.step = step
        self.entries: dict[str, float] = {}

    def plan(self, scope: str, prompt: bytes) -> PrefixPlan:
        chain = hashlib.sha256(scope.encode() + b"\0")
        keys: list[tuple[int, str]] = []
        done = 0
        tokens = self.min_tokens
        while tokens * 4 <= len(prompt):
            chain.update(prompt[done : tokens * 4])
            done = tokens * 4
            keys.append((tokens, chain.copy().hexdigest()))
            tokens += self.step
        now = self.clock()
        cached = 0
        for tokens, key in reversed(keys):
            used = self.entries.get(key)
            if used is not None and now - used < self.ttl:
                cached = tokens
                break
        return PrefixPlan(tokens_of(prompt), cached, tuple(key for _, key in keys))

    def commit(self, plan: PrefixPlan) -> None:
        now = self.clock()
        for key in plan.writes:
            self.entries[key] = now
