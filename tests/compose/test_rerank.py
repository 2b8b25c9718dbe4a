"""``PrecomputedOrder`` and ``rerank_request``: the pure half of the rerank stage."""

from __future__ import annotations

import random

import pytest
from hypothesis import given
from hypothesis import strategies as st

from hostd.compose import (
    PrecomputedOrder,
    RoundRobinByRank,
    compose_for_prompt,
    rerank_request,
    strategy_from_wire,
)
from hostd.protocol import FrameId
from tests.compose._helpers import frame

POOL = [
    (pid, frame(f"{pid}{i}", score=1 - i / 10, content=f"{pid} text {i}", with_digest=True))
    for pid in ("a", "b", "c")
    for i in range(4)
]


def test_the_request_shows_the_best_by_round_robin_under_opaque_keys() -> None:
    request = rerank_request(POOL, 5)
    rr = RoundRobinByRank().order(POOL)[:5]
    assert list(request.keys) == [FrameId.of(*POOL[i]) for i in rr]
    assert [c["key"] for c in request.candidates] == ["0", "1", "2", "3", "4"]
    assert request.candidates[0] == {
        "key": "0",
        "kind": "snippet",
        "title": "label a0",
        "content": "a text 0",
    }


def test_a_verdict_skips_unknown_repeated_and_non_canonical_keys() -> None:
    request = rerank_request(POOL, 4)
    verdict = request.verdict(["3", "3", "03", "9", 1, "-1", "1"], "m@2")
    assert verdict.ranked == (request.keys[3], request.keys[1])
    assert (verdict.ignored, verdict.reason, verdict.candidates) == (5, "partial", 4)
    assert request.verdict(["1", "0", "3", "2"], "m").reason is None


@given(st.permutations(range(len(POOL))), st.lists(st.integers(0, len(POOL) - 1), max_size=8))
def test_the_order_is_a_pure_function_of_the_set_and_the_verdict(
    perm: list[int], named: list[int]
) -> None:
    verdict = PrecomputedOrder(tuple(FrameId.of(*POOL[i]) for i in named), "m", judged=True)
    shuffled = [POOL[i] for i in perm]
    a = compose_for_prompt(POOL, 300, strategy=verdict)
    b = compose_for_prompt(shuffled, 300, strategy=verdict)
    assert a.prompt == b.prompt
    order = verdict.order(shuffled)
    assert sorted(order) == list(range(len(POOL)))  # every candidate, once
    first = list(dict.fromkeys(FrameId.of(*POOL[i]) for i in named))
    assert [FrameId.of(*shuffled[i]) for i in order[: len(first)]] == first


def test_the_audit_spelling_round_trips() -> None:
    request = rerank_request(POOL, 100)
    keys = [str(k) for k in range(len(request.keys))]
    random.Random(7).shuffle(keys)
    verdict = request.verdict(keys[:5], "m@1")
    composed = compose_for_prompt(POOL, 200, strategy=verdict)
    assert strategy_from_wire(composed.audit.policy["strategy_params"]) == verdict
    assert strategy_from_wire("rerank") == PrecomputedOrder()


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ({"rerank": {"order": "x"}}, "order must be a list"),
        ({"rerank": {"order": [{"frame_id": "x"}]}}, "bad frame identity"),
        ({"rerank": {"order": [], "model": 3}}, "model must be a string"),
        ({"rerank": {"order": [], "candidates": -1}}, "are counts"),
        ({"rerank": {"best": 1}}, "unknown member"),
    ],
)
def test_a_bad_verdict_object_is_refused_by_name(value: object, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        strategy_from_wire(value)
