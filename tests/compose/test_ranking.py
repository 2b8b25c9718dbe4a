"""Ranking policies: named, permutations, F10-respecting, with real RRF weights."""

from __future__ import annotations

import json
import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from hostd.compose import (
    CandidateSet,
    MarginFusion,
    MaximalMarginalRelevance,
    PerProviderQuota,
    ReciprocalRankFusion,
    RoundRobinByRank,
    ScoreDescending,
    Strategy,
    is_ranking_permutation,
    rank_with,
    strategy_from_wire,
    strategy_text,
)
from hostd.compose._dedup import dedup_pool
from hostd.protocol import ContextFrame

from ._helpers import digest_of, frame, frame_pairs

ALL: list[Strategy] = [
    ScoreDescending(),
    RoundRobinByRank(),
    PerProviderQuota(0),
    PerProviderQuota(2),
    ReciprocalRankFusion(),
    ReciprocalRankFusion(k=1, weights={"alpha": 0.0, "beta": 3.0}),
    MarginFusion(),
    MarginFusion(k=0, weights={"alpha": 0.0, "gamma": 2.5}),
    MaximalMarginalRelevance(),
    MaximalMarginalRelevance(0.2),
]


def ids(frames: list, order: list[int]) -> list[str]:
    return [frames[i][1].id for i in order]


def two_providers() -> list:
    return [
        ("sem", frame("s1", 0.95)),
        ("sem", frame("s2", 0.90)),
        ("sem", frame("s3", 0.85)),
        ("lex", frame("l1", 0.40)),
        ("lex", frame("l2", 0.30)),
    ]


def test_every_policy_has_its_wire_name() -> None:
    assert [s.name for s in ALL[:7]] == [
        "score",
        "round_robin",
        "quota",
        "quota",
        "rrf",
        "rrf",
        "margin",
    ]


def test_score_descending_breaks_ties_by_canonical_frame_id() -> None:
    frames = [("b", frame("1", 0.5)), ("a", frame("2", 0.5)), ("a", frame("1", 0.9))]
    assert ids(frames, ScoreDescending().order(frames)) == ["1", "2", "1"]
    assert ScoreDescending().order(frames) == [2, 1, 0]


def test_round_robin_alternates_providers_in_id_order() -> None:
    frames = two_providers()
    assert ids(frames, RoundRobinByRank().order(frames)) == ["l1", "s1", "l2", "s2", "s3"]


def test_quota_puts_every_providers_top_k_first() -> None:
    frames = two_providers()
    assert ids(frames, PerProviderQuota(1).order(frames)) == ["s1", "l1", "s2", "s3", "l2"]
    assert ids(frames, PerProviderQuota(0).order(frames)) == ["s1", "l1", "s2", "s3", "l2"]
    assert ids(frames, PerProviderQuota(2).order(frames)) == ["s1", "s2", "l1", "l2", "s3"]


def _shared_hit() -> CandidateSet:
    """``lex``'s best frame is ``sem``'s third: dedup keeps ``sem``'s copy (higher score)."""
    d = digest_of("shared")
    frames = [
        ("sem", frame("s1", 0.95)),
        ("sem", frame("s2", 0.90)),
        ("sem", frame("s3", 0.85, "shared", digest=d)),
        ("lex", frame("l1", 0.40, "shared", digest=d)),
        ("lex", frame("l2", 0.30)),
    ]
    return dedup_pool(CandidateSet.of(frames)).kept


def test_round_robin_keeps_a_shared_hit_at_each_providers_own_rank() -> None:
    kept = _shared_hit()
    assert sorted(f.id for _, f in kept) == ["l2", "s1", "s2", "s3"]  # l1 merged into s3
    # lex's rank 1 is the shared frame, sem's is s1; the shared frame is not repeated
    assert [kept[i][1].id for i in RoundRobinByRank().order(kept)] == ["s3", "s1", "l2", "s2"]


def test_quota_counts_a_shared_hit_in_every_vouching_providers_top_k() -> None:
    kept = _shared_hit()
    order = PerProviderQuota(1).order(kept)
    # the quota holds lex's best (the shared s3) and sem's best (s1), by score
    assert [kept[i][1].id for i in order] == ["s1", "s3", "s2", "l2"]


def test_rrf_uses_ranks_not_raw_scores() -> None:
    frames = two_providers()
    # rank 1 of each provider ties at 1/61; canonical order puts lex first
    assert ids(frames, ReciprocalRankFusion().order(frames)) == ["l1", "s1", "l2", "s2", "s3"]
    # multiplying one provider's scores changes nothing: only its own order matters
    scaled = [(p, f.model_copy(update={"score": f.score / 10})) for p, f in frames]
    assert ReciprocalRankFusion().order(scaled) == ReciprocalRankFusion().order(frames)


def test_rrf_weights_change_the_order() -> None:
    frames = two_providers()
    plain = ReciprocalRankFusion().order(frames)
    favour_sem = ReciprocalRankFusion(weights={"sem": 2.0}).order(frames)
    assert plain != favour_sem
    assert ids(frames, favour_sem)[:3] == ["s1", "s2", "s3"]


def test_rrf_weight_zero_ranks_that_provider_last_but_keeps_its_frames() -> None:
    frames = two_providers()
    order = ReciprocalRankFusion(weights={"lex": 0.0}).order(frames)
    assert ids(frames, order) == ["s1", "s2", "s3", "l1", "l2"]
    assert is_ranking_permutation(order, len(frames))


def test_rrf_sums_the_contributions_of_every_provider_that_vouched() -> None:
    d = digest_of("shared")
    frames = [
        ("a", frame("a1", 0.9, "a-only")),
        ("a", frame("a2", 0.8, "shared", digest=d)),
        ("b", frame("b1", 0.9, "b-only")),
        ("b", frame("b2", 0.7, "shared", digest=d)),
    ]
    kept = dedup_pool(CandidateSet.of(frames)).kept
    rrf = ReciprocalRankFusion()
    fused = dict(zip([f.id for _, f in kept], rrf.fused_scores(kept), strict=True))
    assert fused["a2"] == pytest.approx(2 / 62)
    assert fused["a1"] == pytest.approx(1 / 61)
    # vouched for by two providers at rank 2 beats one provider's rank 1
    assert [kept[i][1].id for i in rrf.order(kept)][0] == "a2"


def test_rrf_counts_a_providers_duplicate_once() -> None:
    d = digest_of("twice")
    frames = [
        ("a", frame("a1", 0.9, "twice", digest=d)),
        ("a", frame("a2", 0.8, "twice", digest=d)),
        ("a", frame("a3", 0.7, "other")),
    ]
    kept = dedup_pool(CandidateSet.of(frames)).kept
    fused = dict(
        zip([f.id for _, f in kept], ReciprocalRankFusion().fused_scores(kept), strict=True)
    )
    assert fused == {"a1": pytest.approx(1 / 61), "a3": pytest.approx(1 / 62)}


@pytest.mark.parametrize(
    "kwargs", [{"k": -1}, {"k": float("nan")}, {"weights": {"a": -1}}, {"weights": {"a": "x"}}]
)
def test_rrf_rejects_bad_parameters(kwargs: dict) -> None:
    with pytest.raises(ValueError, match="rrf"):
        ReciprocalRankFusion(**kwargs)


def test_quota_rejects_a_negative_or_non_integer_k() -> None:
    with pytest.raises(ValueError, match="quota"):
        PerProviderQuota(-1)
    with pytest.raises(ValueError, match="quota"):
        PerProviderQuota(1.5)  # type: ignore[arg-type]  # the point of the test


@given(frame_pairs(), st.sampled_from(ALL))
def test_every_strategy_returns_a_permutation(pairs: list, strategy: Strategy) -> None:
    order = strategy.order(pairs)
    assert is_ranking_permutation(order, len(pairs))


@settings(max_examples=60, deadline=None)
@given(frame_pairs(max_size=16), st.sampled_from(ALL), st.data())
def test_every_strategy_orders_the_set_not_the_arrival(
    pairs: list, strategy: Strategy, data: st.DataObject
) -> None:
    c = CandidateSet.of(pairs)
    if len({c.key(i) for i in range(len(c))}) < len(c):
        return  # one identity twice: its place among equals is arrival order, not a rule
    shuffled = CandidateSet.of(data.draw(st.permutations(pairs)))
    order = strategy.order(c)
    again = strategy.order(shuffled)
    assert [shuffled.key(i) for i in again] == [c.key(i) for i in order]


def test_is_ranking_permutation_rejects_anything_else() -> None:
    assert is_ranking_permutation([2, 0, 1], 3)
    assert is_ranking_permutation([], 0)
    assert not is_ranking_permutation([0, 1], 3)
    assert not is_ranking_permutation([0, 0, 1], 3)
    assert not is_ranking_permutation([0, 1, 3], 3)
    assert not is_ranking_permutation([0, 1, -1], 3)
    assert not is_ranking_permutation([0, 1.0, 2], 3)
    assert not is_ranking_permutation([0, True, 2], 3)


class _Broken:
    name = "broken"

    def __init__(self, order: list) -> None:
        self._order = order

    def order(self, frames: object) -> list:
        return self._order


def test_rank_with_repairs_a_broken_policy_order() -> None:
    frames = [("a", frame("3")), ("a", frame("1")), ("a", frame("2")), ("a", frame("0"))]
    # repeats, out of range, a bool and a float are skipped; the rest come in canonical order
    assert rank_with(_Broken([2, 2, 9, -1, True, 1.0]), frames) == [2, 3, 1, 0]
    assert rank_with(_Broken([]), frames) == [3, 1, 2, 0]
    assert rank_with(_Broken([1, 0, 3, 2]), frames) == [1, 0, 3, 2]


SPELLINGS = [
    # (text spelling, object spelling, policy)
    ("score", "score", ScoreDescending()),
    ("round_robin", "round_robin", RoundRobinByRank()),
    ("quota:3", {"quota": 3}, PerProviderQuota(3)),
    ("quota:0", {"quota": 0}, PerProviderQuota(0)),
    ("rrf", {"rrf": {}}, ReciprocalRankFusion()),
    ("rrf:k=10", {"rrf": {"k": 10}}, ReciprocalRankFusion(k=10)),
    (
        "rrf:files=2,memory=0.5",
        {"rrf": {"k": 60, "weights": {"files": 2, "memory": 0.5}}},
        ReciprocalRankFusion(weights={"files": 2.0, "memory": 0.5}),
    ),
    ("margin", {"margin": None}, MarginFusion()),
    (
        "margin:k=0.5,semantic=1.25",
        {"margin": {"k": 0.5, "weights": {"semantic": 1.25}}},
        MarginFusion(k=0.5, weights={"semantic": 1.25}),
    ),
]


@pytest.mark.parametrize(("text", "wire", "expected"), SPELLINGS)
def test_every_spelling_names_one_policy_both_ways(
    text: str, wire: object, expected: Strategy
) -> None:
    assert strategy_from_wire(text) == expected
    assert strategy_from_wire(wire) == expected
    # and back: the policy's own text and wire forms name it again
    assert strategy_text(expected) == text
    # every built-in policy has to_wire; the Strategy protocol does not ask for it
    assert strategy_from_wire(expected.to_wire()) == expected  # type: ignore[attr-defined]  # see above


def test_a_weight_the_text_form_cannot_carry_is_spelled_as_json() -> None:
    policy = ReciprocalRankFusion(weights={"k": 2.0, "a,b": 1.0})
    text = strategy_text(policy)
    assert json.loads(text) == {"rrf": {"k": 60, "weights": {"a,b": 1.0, "k": 2.0}}}
    assert strategy_from_wire(json.loads(text)) == policy
    assert strategy_text(_Broken([])) == "broken"  # a third-party policy: its name


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ("fastest", "unknown strategy 'fastest'"),
        ("", "unknown strategy ''"),
        ("Score", "unknown strategy 'Score'"),
        ("score:2", "strategy 'score' takes no parameters"),
        ("round_robin:1", "strategy 'round_robin' takes no parameters"),
        ("quota", "strategy quota needs an integer k, as in 'quota:2'"),
        ("quota:", "strategy quota needs an integer k"),
        ("quota:two", "strategy quota needs an integer k"),
        ("quota:1.5", "strategy quota needs an integer k"),
        ("quota:-1", "must not be negative"),
        ("rrf:", "strategy rrf: expected k=NUMBER or PROVIDER=WEIGHT"),
        ("rrf:60", "strategy rrf: expected k=NUMBER or PROVIDER=WEIGHT"),
        ("rrf:k=1,k=2", "each once"),
        ("rrf:k=x", "strategy rrf: k must be a number, got 'x'"),
        ("rrf:k=-1", "rrf k must be finite and >= 0"),
        ("rrf:k=nan", "rrf k must be finite and >= 0"),
        ("margin:files=-1", "margin weight of 'files' must be finite and >= 0"),
        ("margin:files=", "strategy margin: files must be a number"),
        (3, "string or an object"),
        (None, "string or an object"),
        ({}, "exactly one member"),
        ({"quota": 1, "rrf": {}}, "exactly one member"),
        ({"quota": "2"}, "quota k must be an integer"),
        ({"quota": True}, "quota k must be an integer"),
        ({"quota": -1}, "must not be negative"),
        ({"rrf": 60}, "takes an object"),
        ({"margin": [1]}, "strategy margin takes an object"),
        ({"rrf": {"kk": 1}}, "unknown member"),
        ({"rrf": {"weights": {"a": -2}}}, "finite and >= 0"),
        ({"rrf": {"weights": [1, 2]}}, "mapping"),
        ({"bm25": 1}, "unknown strategy 'bm25'"),
    ],
)
def test_strategy_from_wire_rejects_bad_values_clearly(value: object, message: str) -> None:
    with pytest.raises(ValueError, match=re.escape(message)):
        strategy_from_wire(value)


@pytest.mark.parametrize(
    ("value", "name", "guess"),
    [
        ("RRF", "RRF", "rrf"),
        ("round-robin", "round-robin", "round_robin"),
        ("Score", "Score", "score"),
        ("RRF:k=10", "RRF:k=10", "rrf"),
        ({"MMR": {}}, "MMR", "mmr"),
        ("fastest", "fastest", None),
    ],
)
def test_a_misspelt_strategy_is_told_with_the_closest_name(
    value: object, name: str, guess: str | None
) -> None:
    with pytest.raises(ValueError) as info:
        strategy_from_wire(value)
    message = str(info.value)
    assert message.startswith(f"unknown strategy {name!r}")
    if guess is None:
        assert "did you mean" not in message
    else:
        assert f" (did you mean {guess}?); expected " in message


def _distinct_kept(pairs: list[tuple[str, ContextFrame]]) -> CandidateSet | None:
    """The pool after dedup, or ``None`` when an identity survives twice."""
    kept = dedup_pool(CandidateSet.of(pairs)).kept
    distinct = {kept.key(i) for i in range(len(kept))}
    return kept if len(distinct) == len(kept) else None


def _vouched_scores(c: CandidateSet) -> dict[str, list[tuple[int, float]]]:
    """Per provider, ``(candidate, its own best score)`` for every candidate it vouched
    for: the recorded support after dedup, else the candidate's own provider and score."""
    entries: dict[str, list[tuple[int, float]]] = {}
    for i in range(len(c)):
        for p, s in c.support.get(i, ((c.provider_ids[i], c.scores[i]),)):
            entries.setdefault(p, []).append((i, s))
    return entries


def _reference_fused(c: CandidateSet, rrf: ReciprocalRankFusion) -> list[float]:
    """Rank-space fusion as the docs state it: per provider, every frame it vouches
    for valued by its own best score, ranked; contributions summed in provider order."""
    entries = _vouched_scores(c)
    fused = [0.0] * len(c)
    for p in sorted(entries):
        ranked = sorted(entries[p], key=lambda e: (-e[1], c.key(e[0])))
        for rank, (i, _) in enumerate(ranked, start=1):
            fused[i] += rrf.weight(p) / (rrf.k + rank)
    return fused


@settings(max_examples=80, deadline=None)
@given(
    pairs=frame_pairs(max_size=24),
    rrf=st.sampled_from(
        [
            ReciprocalRankFusion(),
            ReciprocalRankFusion(k=0, weights={"alpha": 2.0}),
            ReciprocalRankFusion(k=0, weights={"alpha": 0.0, "beta": 3.5}),
            ReciprocalRankFusion(k=1e300),  # every rank's contribution rounds to one value
        ]
    ),
)
def test_rrf_order_is_fused_value_descending_then_key(
    pairs: list[tuple[str, ContextFrame]], rrf: ReciprocalRankFusion
) -> None:
    kept = _distinct_kept(pairs)
    if kept is None:
        return  # one identity twice: its place among equals is arrival order, not a rule
    fused = _reference_fused(kept, rrf)
    expected = sorted(range(len(kept)), key=lambda i: (-fused[i], kept.key(i)))
    assert rrf.order(kept) == expected


def _provider_lists_reference(c: CandidateSet) -> dict[str, list[int]]:
    """Every provider's list as the docs state it: each candidate it vouched for,
    by its own best score for it, canonical key on ties."""
    entries = _vouched_scores(c)
    return {
        p: [i for i, _ in sorted(entries[p], key=lambda e: (-e[1], c.key(e[0])))]
        for p in sorted(entries)
    }


@settings(max_examples=80, deadline=None)
@given(pairs=frame_pairs(max_size=20), k=st.integers(0, 3))
def test_quota_order_is_every_providers_top_k_then_the_rest(
    pairs: list[tuple[str, ContextFrame]], k: int
) -> None:
    c = _distinct_kept(pairs)
    if c is None:
        return  # one identity twice: its place among equals is arrival order, not a rule
    by_value = sorted(range(len(c)), key=lambda i: (-c.scores[i], c.key(i)))
    top: set[int] = set()
    for members in _provider_lists_reference(c).values():
        top.update(members[: max(k, 1)])
    expected = [i for i in by_value if i in top] + [i for i in by_value if i not in top]
    assert PerProviderQuota(k).order(c) == expected


@settings(max_examples=80, deadline=None)
@given(pairs=frame_pairs(max_size=20))
def test_round_robin_order_is_rank_r_of_each_provider_in_round_r(
    pairs: list[tuple[str, ContextFrame]],
) -> None:
    c = _distinct_kept(pairs)
    if c is None:
        return  # one identity twice: its place among equals is arrival order, not a rule
    lists = _provider_lists_reference(c)
    expected: list[int] = []
    for r in range(max(map(len, lists.values()), default=0)):
        for p in sorted(lists):
            if r < len(lists[p]) and lists[p][r] not in expected:
                expected.append(lists[p][r])
    assert RoundRobinByRank().order(c) == expected
