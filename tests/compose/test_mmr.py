"""``mmr``: maximal marginal relevance over within-provider ranks and content shingles."""

from __future__ import annotations

import itertools
import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from hostd.compose import (
    MaximalMarginalRelevance,
    ScoreDescending,
    Strategy,
    compose_for_prompt,
    is_ranking_permutation,
    strategy_from_wire,
    strategy_text,
)
from hostd.compose._candidates import CandidateSet, rank_desc
from hostd.compose._mmr import DEPTH, shingles
from hostd.protocol import ContextFrame, FrameId

from ._helpers import block, fits, frame, frame_pairs

# One passage chunked six times with a word changed each time: near-duplicates that
# score high on their provider's scale, and three distinct passages scored low on
# another provider's scale.
PASSAGE = (
    "the reaper shim kills and reaps every descendant of a provider when the host dies "
    "so no process outlives the daemon and the teardown ladder ends with sigkill"
)
DISTINCT = [
    "consent receipts are append only sqlite rows recorded per scope and grantor, and a "
    "provider that declares egress gets no payload until every scope it names is granted",
    "the budget split gives each provider a share by the largest remainder of its weight, "
    "computed with exact rationals so that float rounding never moves a single token",
    "fences neutralise every lookalike of the frame opener in any script or width, with "
    "invisible characters ignored between its letters, and leave every other byte alone",
]


def _near_duplicates() -> list[tuple[str, ContextFrame]]:
    words = PASSAGE.split()
    out = []
    for n in range(6):
        variant = words.copy()
        variant[-1 - n] = f"word{n}"
        out.append(("dense", frame(f"d{n}", 0.95 - n * 0.01, " ".join(variant))))
    for n, text in enumerate(DISTINCT):
        out.append(("lexical", frame(f"l{n}", 0.30 - n * 0.05, text)))
    return out


def _included(result) -> list[FrameId]:
    return [e.frame for e in result.audit.included()]


def test_mmr_admits_a_second_providers_evidence_that_score_crowds_out() -> None:
    frames = _near_duplicates()
    blocks = sorted((block(p, f) for p, f in frames), key=len)
    budget = fits(*blocks[-4:])  # any four blocks fit, no five do
    assert fits(*blocks[:5]) > budget
    by_score = compose_for_prompt(frames, budget, strategy="score")
    by_mmr = compose_for_prompt(frames, budget, strategy="mmr")
    assert len(_included(by_score)) == len(_included(by_mmr)) == 4
    # score: the four near-duplicates, none of the lexical provider's evidence
    assert {f.provider_id for f in _included(by_score)} == {"dense"}
    lexical = [f for f in _included(by_mmr) if f.provider_id == "lexical"]
    assert len(lexical) >= 2
    policy = by_mmr.audit.policy
    assert policy["strategy"] == "mmr"
    assert policy["strategy_params"] == {"mmr": {"lambda": 0.7, "similarity": "shingles"}}


def test_lambda_one_is_the_relevance_order_and_lambda_zero_avoids_repeats() -> None:
    frames = _near_duplicates()
    rel_only = MaximalMarginalRelevance(1.0).order(frames)
    # every provider's rank 1, then the rank 2s, …, ties by canonical FrameId
    assert [frames[i][1].id for i in rel_only[:4]] == ["d0", "l0", "d1", "l1"]
    diverse = MaximalMarginalRelevance(0.0).order(frames)
    first_four = {frames[i][0] for i in diverse[:4]}
    assert first_four == {"dense", "lexical"}
    assert sum(frames[i][0] == "dense" for i in diverse[:4]) == 1


def test_relevance_reads_ranks_never_raw_scores() -> None:
    # The same lists on any two score scales give the same order (F10).
    frames = _near_duplicates()
    rescaled = [
        (p, f.model_copy(update={"score": (f.score or 0) / 10 if p == "dense" else f.score}))
        for p, f in frames
    ]
    policy = MaximalMarginalRelevance()
    assert policy.order(frames) == policy.order(rescaled)


def test_shingles_see_near_duplicates_and_cjk_words() -> None:
    a, b = shingles(PASSAGE), shingles(PASSAGE.replace("sigkill", "sigterm"))
    assert len(a & b) / len(a | b) > 0.8
    assert not shingles(PASSAGE) & shingles(DISTINCT[0])
    assert shingles("") == frozenset() and shingles(None) == frozenset()
    # CJK: each character is a word, so a shared phrase shares shingles
    assert shingles("日本語の文章です") & shingles("これは日本語の文章")


@pytest.mark.parametrize(
    ("text", "wire", "expected"),
    [
        ("mmr", {"mmr": None}, MaximalMarginalRelevance()),
        ("mmr:lambda=0.5", {"mmr": {"lambda": 0.5}}, MaximalMarginalRelevance(0.5)),
        (
            "mmr:lambda=1",
            {"mmr": {"lambda": 1, "similarity": "shingles"}},
            MaximalMarginalRelevance(1.0),
        ),
    ],
)
def test_mmr_spellings_parse_back_equal(
    text: str, wire: object, expected: MaximalMarginalRelevance
) -> None:
    assert strategy_from_wire(text) == expected
    assert strategy_from_wire(wire) == expected
    assert strategy_text(expected) == text
    assert strategy_from_wire(expected.to_wire()) == expected


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ("mmr:", "expected mmr or mmr:lambda=NUMBER"),
        ("mmr:0.5", "expected mmr or mmr:lambda=NUMBER"),
        ("mmr:k=1", "expected mmr or mmr:lambda=NUMBER"),
        ("mmr:lambda=x", "lambda must be a number"),
        ("mmr:lambda=1.5", "mmr lambda must be a number in [0, 1]"),
        ("mmr:lambda=nan", "mmr lambda must be a number in [0, 1]"),
        ({"mmr": {"lambda": True}}, "mmr lambda must be a number in [0, 1]"),
        ({"mmr": {"similarity": "embeddings"}}, "mmr similarity must be one of shingles"),
        ({"mmr": {"l": 1}}, "unknown member"),
        ({"mmr": 0.5}, "strategy mmr takes an object"),
    ],
)
def test_bad_mmr_spellings_are_value_errors(value: object, message: str) -> None:
    with pytest.raises(ValueError, match=re.escape(message)):
        strategy_from_wire(value)


def test_beyond_the_depth_candidates_keep_their_relevance_order() -> None:
    frames = [("p", frame(f"f{n:04d}", 1 - n / 1000, f"text {n}")) for n in range(DEPTH + 20)]
    order = MaximalMarginalRelevance().order(frames)
    assert is_ranking_permutation(order, len(frames))
    assert order[DEPTH:] == list(range(DEPTH, DEPTH + 20))


@settings(max_examples=60, deadline=None)
@given(frame_pairs(max_size=8), st.floats(0, 1), st.randoms(use_true_random=False))
def test_mmr_is_a_pure_function_of_the_candidate_set(pairs, lam, rnd) -> None:
    policy = MaximalMarginalRelevance(lam)
    shuffled = list(pairs)
    rnd.shuffle(shuffled)
    first = compose_for_prompt(pairs, 400, strategy=policy)
    second = compose_for_prompt(shuffled, 400, strategy=policy)
    assert first.prompt == second.prompt
    assert first.audit.entry_dicts() == second.audit.entry_dicts()


def test_mmr_differs_from_score_only_by_order() -> None:
    frames = _near_duplicates()
    policies: list[Strategy] = [ScoreDescending(), MaximalMarginalRelevance()]
    for a, b in itertools.combinations(policies, 2):
        assert sorted(a.order(frames)) == sorted(b.order(frames))


# -- the greedy walk against a straightforward reference --------------------------------

_VOCAB = ["retry", "backoff", "socket", "cache", "frame", "budget", "日", "本", "語"]


def _reference_order(
    policy: MaximalMarginalRelevance, frames: list[tuple[str, ContextFrame]]
) -> list[int]:
    """MMR as its definition reads: at each step every candidate left is scored anew,
    ``λ·rel − (1 − λ)·max Jaccard`` against every candidate taken (0 when none shares a
    shingle), the largest value taken, ties to the earlier position by relevance."""
    c = CandidateSet.of(frames)
    rel = policy.relevance(c)
    by_rel = rank_desc(c.canonical(), rel)
    pool, rest = by_rel[:DEPTH], by_rel[DEPTH:]
    sets = [shingles(c.frames[i].content) for i in pool]
    lam = policy.lam
    taken: list[int] = []
    left = list(range(len(pool)))

    def value(k: int) -> float:
        sims = [len(sets[k] & sets[t]) / len(sets[k] | sets[t]) for t in taken if sets[k] & sets[t]]
        sim = max(sims, default=0.0)
        return lam * rel[pool[k]] - (1.0 - lam) * sim

    while left:
        best = max(left, key=lambda k: (value(k), -k))
        taken.append(best)
        left.remove(best)
    return [pool[k] for k in taken] + rest


@settings(max_examples=300, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.sampled_from(["dense", "lexical", "mcp"]),
            st.floats(0, 1),
            st.lists(st.sampled_from(_VOCAB), max_size=40),
        ),
        max_size=24,
    ),
    st.one_of(st.sampled_from([0.0, 0.3, 0.7, 1.0]), st.floats(0, 1)),
)
def test_mmr_orders_as_the_reference_walk(
    drawn: list[tuple[str, float, list[str]]], lam: float
) -> None:
    frames: list[tuple[str, ContextFrame]] = [
        (pid, frame(f"f{n:02d}", score, " ".join(words)))
        for n, (pid, score, words) in enumerate(drawn)
    ]
    policy = MaximalMarginalRelevance(lam)
    assert policy.order(frames) == _reference_order(policy, frames)
