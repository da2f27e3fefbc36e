"""The token estimate: the guess until replies report their prompts, then what they show."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from evertalk.agent.tokens import HIGHEST, LOWEST, MARGIN, MEASURED_AFTER, TokenEstimate
from evertalk.providers.base import BYTES_PER_TOKEN


def test_the_guess_holds_until_enough_tokens_were_reported() -> None:
    estimate = TokenEstimate()
    assert estimate.tokens(3_000) == 3_000 // BYTES_PER_TOKEN
    estimate.observe(4_700, MEASURED_AFTER - 1)
    assert estimate.rate == BYTES_PER_TOKEN
    estimate.observe(4_700, 1_000)
    assert estimate.rate == MARGIN * (2 * 4_700) / (MEASURED_AFTER + 999)


def test_a_dense_tokenizer_is_learned_from_the_server_counts() -> None:
    """A request the guess put at 12,844 tokens was 8,165 by the server's count."""
    estimate = TokenEstimate()
    size = 12_844 * BYTES_PER_TOKEN
    estimate.observe(size, 8_165)
    assert estimate.tokens(size) < 9_100  # within the margin of the server's count


def test_reports_of_nothing_teach_nothing() -> None:
    estimate = TokenEstimate()
    estimate.observe(50_000, 0)  # a server that sends no usage
    assert estimate.tokens_seen == 0 and estimate.rate == BYTES_PER_TOKEN


@given(st.integers(1, 10**7), st.integers(1, 10**6), st.integers(0, 10**6))
def test_the_rate_stays_bounded_and_round_trips(size: int, tokens: int, room: int) -> None:
    estimate = TokenEstimate()
    estimate.observe(size, tokens)
    assert LOWEST <= estimate.rate <= HIGHEST
    assert estimate.tokens(estimate.bytes_for(room)) <= room  # bytes that fit `room` do
