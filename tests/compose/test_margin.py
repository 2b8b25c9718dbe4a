"""MarginFusion: provider-local score normalisation plus rank evidence (issue 16)."""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from hostd.compose import (
    CandidateSet,
    MarginFusion,
    ReciprocalRankFusion,
    ScoreDescending,
    compose_for_prompt,
    is_ranking_permutation,
)
from hostd.compose._dedup import dedup_pool
from hostd.compose._fusion import margin_values
from hostd.protocol import ContextFrame

from ._helpers import digest_of, frame, frame_pairs

Pairs = list[tuple[str, ContextFrame]]


def keys_in_order(pairs: Pairs, policy: MarginFusion) -> list[tuple[object, ...]]:
    c = CandidateSet.of(pairs)
    return [c.key(i) for i in policy.order(c)]


def distinct(pairs: Pairs) -> bool:
    c = CandidateSet.of(pairs)
    return len({c.key(i) for i in range(len(c))}) == len(c)


POLICIES = st.sampled_from(
    [MarginFusion(), MarginFusion(k=0), MarginFusion(k=5, weights={"alpha": 2.0, "beta": 0.0})]
)


@settings(max_examples=80, deadline=None)
@given(pairs=frame_pairs(max_size=16), policy=POLICIES, data=st.data())
def test_order_does_not_depend_on_the_input_order(
    pairs: Pairs, policy: MarginFusion, data: st.DataObject
) -> None:
    if not distinct(pairs):
        return  # one identity twice: its place among equals is arrival order, not a rule
    shuffled = data.draw(st.permutations(pairs))
    assert keys_in_order(shuffled, policy) == keys_in_order(pairs, policy)
    order = policy.order(pairs)
    assert is_ranking_permutation(order, len(pairs))


@settings(max_examples=60, deadline=None)
@given(pairs=frame_pairs(max_size=16), policy=POLICIES, data=st.data())
def test_reordering_one_providers_list_or_the_providers_changes_nothing(
    pairs: Pairs, policy: MarginFusion, data: st.DataObject
) -> None:
    if not distinct(pairs):
        return
    providers = sorted({p for p, _ in pairs})
    grouped: list[tuple[str, ContextFrame]] = []
    for p in data.draw(st.permutations(providers)):
        own = [pair for pair in pairs if pair[0] == p]
        grouped.extend(data.draw(st.permutations(own)))
    assert keys_in_order(grouped, policy) == keys_in_order(pairs, policy)


def test_a_strong_outlier_over_a_flat_rest_is_not_starved() -> None:
    # "lex" scores on a low scale: one clear hit over four flat misses. "sem" scores
    # everything higher, evenly spaced. By raw score the hit would come sixth.
    pairs: Pairs = [("lex", frame("hit", 0.30))]
    pairs += [("lex", frame(f"miss{i}", 0.05)) for i in range(4)]
    pairs += [("sem", frame(f"s{i}", 0.90 - 0.04 * i)) for i in range(5)]
    order = MarginFusion().order(pairs)
    assert pairs[order[0]][1].id == "hit"
    by_score = ScoreDescending().order(pairs)
    assert [pairs[i][1].id for i in by_score].index("hit") == 5


@settings(max_examples=100, deadline=None)
@given(
    flat=st.floats(0, 0.5),
    lift=st.floats(0.01, 0.5),
    n_flat=st.integers(3, 8),
    top=st.floats(0.5, 1.0),
    step=st.floats(0.001, 0.02),
    n_other=st.integers(2, 24),
)
def test_an_outlier_ranks_first_over_any_evenly_spaced_list(
    flat: float, lift: float, n_flat: int, top: float, step: float, n_other: int
) -> None:
    pairs: Pairs = [("zz-outlier", frame("hit", flat + lift))]
    pairs += [("zz-outlier", frame(f"f{i}", flat)) for i in range(n_flat)]
    # the other provider sorts first by id, so a tie would go its way
    pairs += [("aa-even", frame(f"e{i:02d}", top - step * i)) for i in range(n_other)]
    order = MarginFusion().order(pairs)
    assert pairs[order[0]][1].id == "hit"


def test_a_list_with_a_margin_beats_a_list_without_one() -> None:
    # RRF gives both rank-1 frames 1/61 and the canonical key picks "a"; the
    # margin in "b"'s list decides it for MarginFusion.
    pairs: Pairs = [("a", frame(f"a{i}", 0.5)) for i in range(4)]
    pairs += [("b", frame("b-top", 0.9))] + [("b", frame(f"b{i}", 0.2)) for i in range(3)]
    assert pairs[ReciprocalRankFusion().order(pairs)[0]][1].id == "a0"
    assert pairs[MarginFusion().order(pairs)[0]][1].id == "b-top"


def test_scaling_one_providers_scores_changes_nothing() -> None:
    pairs: Pairs = [("lex", frame(f"l{i}", s)) for i, s in enumerate([0.8, 0.4, 0.35, 0.1])]
    pairs += [("sem", frame(f"s{i}", s)) for i, s in enumerate([0.6, 0.55, 0.5, 0.2, 0.1])]
    halved = [
        (p, f.model_copy(update={"score": f.score / 2})) if p == "lex" else (p, f) for p, f in pairs
    ]
    assert MarginFusion().order(halved) == MarginFusion().order(pairs)


def test_weights_are_real_and_zero_sends_a_provider_last() -> None:
    pairs: Pairs = [("lex", frame(f"l{i}", 0.9 - 0.1 * i)) for i in range(3)]
    pairs += [("sem", frame(f"s{i}", 0.5 - 0.1 * i)) for i in range(3)]
    order = MarginFusion(weights={"lex": 0.0}).order(pairs)
    assert [pairs[i][1].id for i in order] == ["s0", "s1", "s2", "l0", "l1", "l2"]
    favour = MarginFusion(weights={"sem": 3.0}).order(pairs)
    assert [pairs[i][1].id for i in favour][:3] == ["s0", "s1", "s2"]


def test_evidence_vouched_for_by_two_providers_sums_both_contributions() -> None:
    d = digest_of("shared")
    pairs: Pairs = [
        ("a", frame("a1", 0.9, "a-only")),
        ("a", frame("a2", 0.5, "shared", digest=d)),
        ("a", frame("a3", 0.1, "a-low")),
        ("b", frame("b1", 0.9, "b-only")),
        ("b", frame("b2", 0.5, "shared", digest=d)),
        ("b", frame("b3", 0.1, "b-low")),
    ]
    kept = dedup_pool(CandidateSet.of(pairs)).kept
    policy = MarginFusion()
    fused = dict(zip([f.id for _, f in kept], policy.fused_scores(kept), strict=True))
    # each list is [0.9, 0.5, 0.1]: the middle sits at its mean, margin 0.5, rank 2
    one = (0.5 + 61 / 62) / 2
    assert fused["a2"] == pytest.approx(2 * one)
    assert kept[policy.order(kept)[0]][1].id == "a2"


def test_margin_values_stay_within_their_own_list() -> None:
    assert margin_values([]) == []
    assert margin_values([0.7]) == [0.5]
    assert margin_values([0.3, 0.3, 0.3]) == [0.5, 0.5, 0.5]
    two = margin_values([0.9, 0.1])  # ±1σ around the mean
    assert two == pytest.approx([4 / 6, 2 / 6])
    # out-of-range scores (F1 is [0, 1]) and -inf (NaN) are read at the bounds
    assert margin_values([5.0, 1.0]) == [0.5, 0.5]
    low = margin_values([-math.inf, 0.0, 1.0])
    assert low[0] == low[1] and all(0 <= v <= 1 for v in low)


@given(st.lists(st.floats(allow_nan=False), max_size=30))
def test_margin_values_are_in_the_unit_interval_and_keep_the_lists_order(
    scores: list[float],
) -> None:
    values = margin_values(scores)
    assert all(0.0 <= v <= 1.0 for v in values)
    read = [min(max(s, 0.0), 1.0) for s in scores]
    for x, v in zip(read, values, strict=True):
        for y, w in zip(read, values, strict=True):
            if x < y:
                assert v <= w


def test_the_audit_records_the_policy_and_its_parameters() -> None:
    pairs: Pairs = [("lex", frame("l1", 0.5)), ("sem", frame("s1", 0.4))]
    audit = compose_for_prompt(pairs, 100, strategy="margin:k=10,lex=2").to_wire()["audit"]
    assert audit["policy"]["strategy"] == "margin"
    assert audit["policy"]["strategy_params"] == {"margin": {"k": 10, "weights": {"lex": 2.0}}}
