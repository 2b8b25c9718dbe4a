"""Placement policies, applied to the selection after packing."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from hostd.compose import (
    PLACEMENTS,
    RoundRobinByRank,
    fold_to_edges,
    order_by,
    order_by_value,
    place,
)

from ._helpers import frame


def test_fold_to_edges_deals_ranks_to_alternating_ends() -> None:
    assert fold_to_edges([0, 1, 2, 3, 4]) == [0, 2, 4, 3, 1]
    assert fold_to_edges([0, 1, 2, 3]) == [0, 2, 3, 1]
    assert fold_to_edges([0]) == [0]
    assert fold_to_edges([]) == []


@given(st.lists(st.integers(), min_size=2, unique=True))
def test_fold_to_edges_puts_rank_0_first_and_rank_1_last(ranked: list[int]) -> None:
    folded = fold_to_edges(ranked)
    assert folded[0] == ranked[0]
    assert folded[-1] == ranked[1]
    assert sorted(folded) == sorted(ranked)
    if len(ranked) >= 3:
        assert folded[1] == ranked[2]


def test_placements_are_named() -> None:
    assert PLACEMENTS == ("edges", "ranked", "grouped", "canonical")


def test_grouped_keeps_providers_together_in_order_of_their_best_frame() -> None:
    ranked = [
        ("b", frame("b1")),
        ("a", frame("a1")),
        ("b", frame("b2")),
        ("c", frame("c1")),
        ("a", frame("a2")),
    ]
    out = [f.id for _, f in place("grouped", ranked)]
    assert out == ["b1", "b2", "a1", "a2", "c1"]


def test_canonical_and_ranked_placements() -> None:
    ranked = [("b", frame("1")), ("a", frame("2")), ("a", frame("1"))]
    assert [(p, f.id) for p, f in place("canonical", ranked)] == [
        ("a", "1"),
        ("a", "2"),
        ("b", "1"),
    ]
    assert place("ranked", ranked) == ranked


def test_order_by_value_ranks_by_score_then_folds() -> None:
    frames = [("p", frame(str(i), score=i / 10)) for i in range(5)]
    assert [f.id for _, f in order_by_value(frames)] == ["4", "2", "0", "1", "3"]


def test_order_by_takes_any_strategy_and_placement() -> None:
    frames = [("s", frame("s1", 0.9)), ("s", frame("s2", 0.8)), ("l", frame("l1", 0.1))]
    assert [f.id for _, f in order_by(RoundRobinByRank(), frames, placement="ranked")] == [
        "l1",
        "s1",
        "s2",
    ]


def test_an_unknown_placement_is_a_value_error() -> None:
    import pytest

    with pytest.raises(ValueError, match="unknown placement 'middle'"):
        place("middle", [])
