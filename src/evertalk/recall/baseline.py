"""The baseline: the same questions to the same turn model, with the newest W bytes of the raw
log in place of the view and no tools: what an agent that truncates (or compacts) when its
window is full still has. One direct call per question through the provider interface, each
accounted in the scratch home's ledger as a turn call named `baseline N`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from evertalk.config import Config
from evertalk.ledger import Ledger, ledger_path
from evertalk.providers.base import Message, ProviderError, Request, Text
from evertalk.providers.call import Call, Meter
from evertalk.providers.factory import make_provider

SYSTEM: Final = (
    "You are Ever, an assistant with one long conversation with the user. You cannot see the "
    "whole conversation: only its most recent part, between <log> and </log>, oldest first, "
    "possibly cut at its start. Answer the user's question from it, briefly, naming the exact "
    "value asked for. If the log does not say, say that you do not know."
)
TAG: Final = "baseline"
MAX_TOKENS: Final = 4_000


@dataclass(frozen=True)
class Asked:
    answer: str
    error: str | None


def log_tail(records: Sequence[tuple[str, str]], size: int) -> str:
    """The newest `size` bytes of the log, messages as `kind: text` a line apart."""
    data = "\n".join(f"{kind}: {text}" for kind, text in records).encode("utf-8")
    return data[-size:].decode("utf-8", "ignore") if size < len(data) else data.decode("utf-8")


async def ask_all(
    home: Path,
    config: Config,
    model: str,
    tail: str,
    questions: Sequence[tuple[int, str]],
    answers: list[Asked],
) -> None:
    """Each (number, question) asked over `tail`, one after the other; each answer is added
    to `answers` as it comes, so that a Ctrl+C keeps those already in."""
    key = config.api_key.reveal() if config.api_key is not None else None
    provider = make_provider(config.provider, key, config.base_url)
    window = config.turn.context_window
    max_tokens = MAX_TOKENS if window is None else min(MAX_TOKENS, window // 4)
    try:
        with Ledger(ledger_path(home)) as ledger:
            for number, question in questions:
                request = Request(
                    model=model,
                    system=[Text(SYSTEM)],
                    tools=[],
                    messages=[
                        Message("user", [Text(f"<log>\n{tail}\n</log>", mark=True), Text(question)])
                    ],
                    max_tokens=max_tokens,
                    effort=config.turn.effort,
                )
                call = Call(provider, request, Meter("turn", ledger, turn=f"{TAG} {number}"))
                try:  # a call that fails once begun is recorded by `run`
                    finished = await call.run()
                except ProviderError as error:
                    answers.append(Asked("", str(error)))
                    continue
                call.record(finished.usage)
                answers.append(Asked(finished.text, None))
    finally:
        await provider.aclose()
