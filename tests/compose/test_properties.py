"""Properties of compose_for_prompt over arbitrary frame sets (hypothesis)."""

from __future__ import annotations

import random
from collections import Counter
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from hostd.compose import (
    EVIDENCE_PREAMBLE,
    PLACEMENTS,
    FloorsExceedBudget,
    MarginFusion,
    PerProviderQuota,
    ReciprocalRankFusion,
    RoundRobinByRank,
    ScoreDescending,
    Strategy,
    compose_for_prompt,
    ranking,
)
from hostd.compose._render import render_floor
from hostd.protocol import FrameId, canonical_token_cost

from ._helpers import PROVIDERS, fits, frame_pairs


def named_policies() -> list[object]:
    """One default instance of every policy class the ranking module exports."""
    out: list[object] = []
    for name in ranking.__all__:
        obj = getattr(ranking, name)
        if (
            isinstance(obj, type)
            and obj is not ranking.Strategy
            and callable(getattr(obj, "order", None))
            and isinstance(getattr(obj, "name", None), str)
        ):
            out.append(obj())
    return out


NAMED = named_policies()

STRATEGIES = st.sampled_from(
    [
        *NAMED,
        ScoreDescending(),
        RoundRobinByRank(),
        PerProviderQuota(1),
        ReciprocalRankFusion(),
        ReciprocalRankFusion(k=2, weights={"alpha": 0.0, "gamma": 2.5}),
        MarginFusion(),
        MarginFusion(k=0, weights={"beta": 0.0}),
    ]
)
CAPS = st.none() | st.dictionaries(
    PROVIDERS | st.just("*"), st.sampled_from([0.0, 0.3, 0.5, 1.0]), max_size=2
)
# From below the preamble's cost to room for a handful of fenced frames.
BUDGETS = st.integers(0, 40) | st.integers(fits() - 3, fits() + 200)
FLOORS = st.lists(
    st.tuples(
        st.sampled_from(["pin", "sel", "pin"]),
        st.sampled_from(["", "short", "x" * 40, "</frame>"]),
        st.sampled_from(["top", "bottom"]),
    ),
    max_size=2,
)
EXCLUDED = st.lists(
    st.tuples(
        st.builds(FrameId, PROVIDERS, st.sampled_from(["f1", "q"])),
        st.sampled_from(["quarantined", "stale", "digest_mismatch"]),
        st.just({"why": "earlier stage"}),
    ),
    max_size=3,
)


@settings(max_examples=150)
@given(
    frame_pairs(),
    BUDGETS,
    STRATEGIES,
    st.sampled_from(PLACEMENTS),
    CAPS,
    EXCLUDED,
    st.randoms(use_true_random=False),
)
def test_any_shuffle_of_the_input_gives_identical_bytes_and_audit(
    pairs: list,
    budget: int,
    strategy: Strategy | str,
    placement: str,
    caps: dict | None,
    excluded: list,
    rnd: random.Random,
) -> None:
    kw: dict[str, Any] = {"strategy": strategy, "placement": placement, "caps": caps}
    first = compose_for_prompt(pairs, budget, excluded=excluded, **kw)
    shuffled = list(pairs)
    rnd.shuffle(shuffled)
    again = compose_for_prompt(iter(shuffled), budget, excluded=excluded[::-1], **kw)
    assert again.prompt == first.prompt
    assert again.to_wire() == first.to_wire()


@settings(max_examples=150)
@given(frame_pairs(), BUDGETS, STRATEGIES, CAPS, EXCLUDED)
def test_the_audit_is_a_total_partition_within_budget(
    pairs: list, budget: int, strategy: Strategy | str, caps: dict | None, excluded: list
) -> None:
    out = compose_for_prompt(pairs, budget, strategy=strategy, caps=caps, excluded=excluded)
    audit = out.audit
    offered = Counter([FrameId.of(p, f) for p, f in pairs] + [fid for fid, _, _ in excluded])
    assert Counter(e.frame for e in audit.entries) == offered
    included = [e for e in audit.entries if e.included]
    for e in audit.entries:
        assert e.disposition in ("included", "excluded")
        assert (e.reason is None) == e.included
    # tokens_used is what the prompt costs, and never above the budget
    assert audit.tokens_used == canonical_token_cost(out.prompt) <= budget
    assert audit.tokens_used <= fits() + sum(e.tokens or 0 for e in included)
    # the citations are exactly the included frames, in render (position) order
    assert [c.frame for c in out.citations] == [
        e.frame for e in sorted(included, key=lambda e: e.position or 0)
    ]
    positions = [e.position for e in included if e.position is not None]
    assert len(positions) == len(included)
    assert sorted(positions) == list(range(len(included)))
    # an included identity is never also excluded as a duplicate of itself... unless
    # it was offered twice, in which case one copy is the duplicate
    dup = [e for e in audit.entries if e.reason == "duplicate"]
    kept = {e.frame for e in audit.entries if e.reason != "duplicate"}
    assert all(e.detail["kept"] in kept for e in dup)


@settings(max_examples=100)
@given(frame_pairs(), BUDGETS, CAPS)
def test_caps_bound_every_providers_share(pairs: list, budget: int, caps: dict | None) -> None:
    out = compose_for_prompt(pairs, budget, caps=caps)
    used: Counter[str] = Counter()
    for e in out.audit.entries:
        if e.included:
            used[e.provider_id] += e.tokens or 0
    for provider, tokens in used.items():
        share = (caps or {}).get(provider, (caps or {}).get("*"))
        if share is not None:
            assert tokens <= int(share * max(0, budget - fits()))


@given(frame_pairs(), BUDGETS, STRATEGIES)
def test_every_included_rank_is_distinct_and_better_than_no_later_over_budget_fit(
    pairs: list, budget: int, strategy: Strategy | str
) -> None:
    out = compose_for_prompt(pairs, budget, strategy=strategy)
    ranked = [e for e in out.audit.entries if e.rank is not None]
    ranks = [e.rank for e in ranked if e.rank is not None]
    assert sorted(ranks) == list(range(len(ranked)))
    # greedy packing: an over-budget frame really did not fit when it was reached
    for e in ranked:
        if e.reason == "over_budget":
            assert e.detail["cost"] > e.detail["remaining"]


def test_every_named_policy_is_exercised() -> None:
    assert {type(p).__name__ for p in NAMED} >= {
        "ScoreDescending",
        "RoundRobinByRank",
        "PerProviderQuota",
        "ReciprocalRankFusion",
    }


@settings(max_examples=300)
@given(
    frame_pairs(),
    BUDGETS,
    st.sampled_from(NAMED),
    st.sampled_from(PLACEMENTS),
    CAPS,
    FLOORS,
    st.booleans(),
)
def test_the_prompt_never_costs_more_than_the_budget(
    pairs: list,
    budget: int,
    strategy: Strategy | str,
    placement: str,
    caps: dict | None,
    floors: list,
    unverifiable: bool,
) -> None:
    # every other frame unverifiable: its fence carries a mark that costs bytes too
    states = {"state": "unverifiable", "reason": "outside_trusted_roots"}
    verification = {FrameId.of(p, f): states for p, f in pairs[::2]} if unverifiable else None
    kw: dict[str, Any] = {
        "strategy": strategy,
        "placement": placement,
        "caps": caps,
        "floors": floors,
        "verification": verification,
    }
    try:
        out = compose_for_prompt(pairs, budget, **kw)
    except FloorsExceedBudget as err:
        # only when the preamble and the fenced floors alone overflow
        labels = [
            label if label not in [f[0] for f in floors[:i]] else f"{label} #2"
            for i, (label, _, _) in enumerate(floors)
        ]
        alone = EVIDENCE_PREAMBLE + "".join(
            render_floor(lb, content, pos)
            for lb, (_, content, pos) in zip(labels, floors, strict=True)
        )
        assert canonical_token_cost(alone) == err.total > budget
        return
    assert canonical_token_cost(out.prompt) == out.tokens_used <= budget
    # the size the usage reports is the packer's count: the prompt's own bytes
    assert out.prompt_usage()["bytes"] == len(out.prompt.encode("utf-8", "surrogatepass"))
    if out.prompt:
        assert out.prompt.startswith(EVIDENCE_PREAMBLE)
    else:
        assert not floors and not out.citations
