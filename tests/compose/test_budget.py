"""budget_split: shares that sum to exactly the global budget (B1 across providers)."""

from __future__ import annotations

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from hostd.compose import budget_split


def test_equal_split_hands_the_remainder_out_one_token_at_a_time() -> None:
    assert budget_split(10, 3) == [4, 3, 3]
    assert budget_split(8000, 8) == [1000] * 8
    assert budget_split(2, 4) == [1, 1, 0, 0]


def test_no_providers_gives_no_shares() -> None:
    assert budget_split(100, 0) == []
    assert budget_split(100, 0, []) == []


def test_weighted_split_is_proportional_by_largest_remainder() -> None:
    assert budget_split(100, 2, [3.0, 1.0]) == [75, 25]
    # quotas 33.33, 33.33, 33.33: the leftover token goes to the earliest provider
    assert budget_split(100, 3, [1, 1, 1]) == [34, 33, 33]
    # quotas 2.5, 7.5 -> floors 2, 7; one leftover to the larger... equal remainders, first wins
    assert budget_split(10, 2, [1, 3]) == [3, 7]
    # quotas 1.4, 2.8, 5.8 -> 1, 2, 5 with 2 leftovers to .8 and .8
    assert budget_split(10, 3, [1.4, 2.8, 5.8]) == [1, 3, 6]


def test_zero_weight_gets_nothing_and_others_share_everything() -> None:
    assert budget_split(9, 3, [0, 1, 2]) == [0, 3, 6]


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ((-1, 2), "negative"),
        ((10, -1), "negative"),
        ((math.inf, 2), "finite"),
        ((math.nan, 2), "finite"),
        ((10.5, 2), "whole"),
        ((True, 2), "bool"),
        (("10", 2), "integer"),
        ((10, 2, [1.0]), "entries"),
        ((10, 2, [1.0, -1.0]), "negative"),
        ((10, 2, [1.0, math.inf]), "finite"),
        ((10, 2, [1.0, math.nan]), "finite"),
        ((10, 2, [0, 0]), "all be zero"),
        ((10, 1, ["1"]), "number"),
    ],
)
def test_bad_input_is_a_value_error_that_says_why(args: tuple, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        budget_split(*args)


@given(st.integers(0, 2**32), st.integers(1, 40))
def test_equal_shares_sum_to_the_budget_and_differ_by_at_most_one(budget: int, n: int) -> None:
    shares = budget_split(budget, n)
    assert len(shares) == n
    assert sum(shares) == budget
    assert max(shares) - min(shares) <= 1


@given(
    st.integers(0, 10**9),
    st.lists(st.floats(0, 1e6, allow_nan=False), min_size=1, max_size=12).filter(
        lambda ws: sum(ws) > 0
    ),
)
def test_weighted_shares_sum_to_the_budget_and_stay_within_one_of_the_quota(
    budget: int, weights: list[float]
) -> None:
    shares = budget_split(budget, len(weights), weights)
    assert sum(shares) == budget
    total = sum(weights)
    for share, w in zip(shares, weights, strict=True):
        assert abs(share - budget * w / total) < 1 + 1e-6 * budget
        assert share >= 0
