"""The budgets derived from a turn model's context window."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from evertalk.memory import Budget
from evertalk.memory.budget import BYTES_PER_TOKEN, SMALLEST_CEILING, VIEW_SHARE


def test_a_large_or_unknown_window_keeps_the_default_budgets() -> None:
    assert Budget.for_window(None) == Budget()
    assert Budget.for_window(200_000) == Budget()
    assert Budget.for_window(128_000) == Budget()


def test_an_8k_window_gets_a_view_that_fits_it() -> None:
    budget = Budget.for_window(8_192)
    assert budget.ceiling == int(8_192 * VIEW_SHARE) * BYTES_PER_TOKEN  # 9,828 bytes
    assert (budget.floor, budget.cceiling, budget.cfloor) == (
        budget.ceiling // 2,
        budget.ceiling // 4,
        budget.ceiling // 8,
    )
    # the view at its ceiling, counted at the estimate, leaves most of the window free
    assert budget.ceiling / BYTES_PER_TOKEN <= 0.41 * 8_192


@given(st.integers(min_value=1, max_value=2_000_000))
def test_budgets_grow_with_the_window_and_stay_sound(tokens: int) -> None:
    budget, bigger = Budget.for_window(tokens), Budget.for_window(tokens + 1_000)
    assert SMALLEST_CEILING <= budget.ceiling <= Budget().ceiling
    assert budget.floor <= budget.ceiling and budget.cfloor <= budget.cceiling
    assert budget.ceiling <= bigger.ceiling
