"""The budget a refusal names, by the split the providers are asked under: the least
budget at which a provider is asked for a cost (``least_budget``, against every
budget counted by hand) and the hint of a composition that included nothing."""

from __future__ import annotations

from typing import Any

import pytest

from hostd.compose import budget_split
from hostd.engine import LegReport, LegStatus, asked_at, least_budget
from hostd.engine._plan import asked_tokens
from hostd.pipeline._advice import budget_hint

WEIGHTS = [
    {"files": 1.0},
    {"files": 1.0, "memory": 1.0, "semantic": 1.0},
    {"files": 3.0, "memory": 0.5, "semantic": 1.0},
    {"files": 0.1, "git": 7.0},
]


def _asked(pid: str, weights: dict[str, float], budget: int, overfetch: float, held: int) -> int:
    """What ``pid`` is asked for at ``budget``, counted apart: the split of what the
    floors leave, times the over-fetch, never over it."""
    ids = sorted(weights)
    contested = max(0, budget - held)
    share = budget_split(contested, len(ids), [weights[p] for p in ids])[ids.index(pid)]
    return asked_tokens(share, contested, overfetch)


@pytest.mark.parametrize("weights", WEIGHTS)
@pytest.mark.parametrize("overfetch", [1.0, 1.5, 2.0])
@pytest.mark.parametrize(("need", "at_least", "held"), [(1, 0, 0), (55, 142, 0), (61, 0, 30)])
def test_the_least_budget_is_the_first_that_asks_for_the_need(
    weights: dict[str, float], overfetch: float, need: int, at_least: int, held: int
) -> None:
    for pid in weights:
        found = least_budget(pid, weights, need, overfetch=overfetch, at_least=at_least, held=held)
        assert found >= at_least
        assert _asked(pid, weights, found, overfetch, held) >= need
        assert asked_at(pid, weights, found, overfetch=overfetch, held=held) >= need
        # Every smaller budget (from at_least) asks for less.
        assert all(_asked(pid, weights, b, overfetch, held) < need for b in range(at_least, found))


def test_a_provider_with_weight_zero_has_no_least_budget() -> None:
    with pytest.raises(ValueError, match="'memory' has weight 0"):
        least_budget("memory", {"files": 1.0, "memory": 0.0}, 10, overfetch=2.0)


def _entry(pid: str, frame_id: str, cost: int, remaining: int = 0) -> dict[str, Any]:
    return {
        "frame": {"provider_id": pid, "frame_id": frame_id},
        "provider": pid,
        "disposition": "excluded",
        "reason": "over_budget",
        "detail": {"cost": cost, "remaining": remaining},
        "tokens": cost,
    }


def test_a_frame_of_the_smaller_weight_provider_gets_a_budget_that_asks_it_for_it() -> None:
    # git outweighs files 70 to 1: holding the preamble and the block (87 + 40) would ask
    # files for 2 tokens, not the 30 its frame costs.
    weights = {"files": 0.1, "git": 7.0}
    entries = [_entry("files", "a.md#1", 40)]
    hint = budget_hint(
        entries, {}, {("files", "a.md#1"): 30}, weights, overfetch=1.5, fixed=87, held=0
    )
    assert hint is not None
    assert hint["budget"] > 87 + 40
    assert hint["budget"] == least_budget("files", weights, 30, overfetch=1.5, at_least=127)
    assert hint["asked"] == asked_at("files", weights, hint["budget"], overfetch=1.5) >= 30
    assert (hint["provider"], hint["cost"], hint["fixed"]) == ("files", 40, 87)


def test_the_hint_names_the_frame_that_needs_the_least_budget() -> None:
    # git's block is cheaper, but files is asked for a frame's cost at a smaller budget.
    weights = {"files": 1.0, "git": 0.05}
    entries = [_entry("git", "g1", 50), _entry("files", "f1", 60)]
    costs = {("git", "g1"): 40, ("files", "f1"): 45}
    hint = budget_hint(entries, {}, costs, weights, overfetch=2.0, fixed=87, held=0)
    assert hint is not None and hint["provider"] == "files"
    assert hint["budget"] == 87 + 60
    git = least_budget("git", weights, 40, overfetch=2.0, at_least=87 + 50)
    assert git > hint["budget"]


def test_no_hint_when_something_was_included_or_nothing_was_left_out() -> None:
    included = {"disposition": "included", "provider": "files"}
    entry = _entry("files", "f", 10)
    assert (
        budget_hint([included, entry], {}, {}, {"files": 1.0}, overfetch=2, fixed=87, held=0)
        is None
    )
    empty = LegReport("files", LegStatus.OK, max_tokens=10, share=5)
    assert (
        budget_hint([], {"files": empty}, {}, {"files": 1.0}, overfetch=2, fixed=87, held=0) is None
    )


def test_a_provider_that_left_frames_out_gets_the_least_budget_one_could_fit() -> None:
    weights = {"files": 1.0, "memory": 0.5, "semantic": 1.0}
    files = LegReport("files", LegStatus.OK, max_tokens=8, share=4, nothing_fit=True)
    memory = LegReport("memory", LegStatus.SKIPPED, max_tokens=0, share=0)
    hint = budget_hint(
        [], {"files": files, "memory": memory}, {}, weights, overfetch=2.0, fixed=87, held=0
    )
    assert hint is not None
    # Each frame files has costs more than 8: the prompt's lines and 9 tokens, files asked for 9.
    assert hint["budget"] == least_budget("files", weights, 9, overfetch=2.0, at_least=87 + 9)
    assert (hint["provider"], hint["had"]) == ("files", 8)
    assert hint["asked"] == asked_at("files", weights, hint["budget"], overfetch=2.0) >= 9


def test_the_hint_asks_by_the_split_the_fan_out_was_planned_with() -> None:
    """A provider kept out of the split (warming) left its share to files: the budget
    named asks files for its frame with files alone in the split; a frame of the one kept
    apart is named by its nominal split, over every provider."""
    weights = {"files": 1.0, "semantic": 1.0}
    files = LegReport("files", LegStatus.OK, max_tokens=400, share=400)
    warming = LegReport(
        "semantic", LegStatus.WARMING, max_tokens=200, share=200, share_apart="warming"
    )
    reports = {"files": files, "semantic": warming}
    entry = [_entry("files", "f1", 310)]
    hint = budget_hint(
        entry, reports, {("files", "f1"): 300}, weights, overfetch=1, fixed=87, held=0
    )
    assert hint is not None and (hint["budget"], hint["asked"]) == (397, 397)
    # Both in the split, as when semantic answers: files is asked for half (the odd token
    # its own, the earlier id).
    both = budget_hint(
        entry, {"files": files}, {("files", "f1"): 300}, weights, overfetch=1, fixed=87, held=0
    )
    assert both is not None and (both["budget"], both["asked"]) == (599, 300)
    own = [_entry("semantic", "s1", 310)]
    kept = budget_hint(
        own, reports, {("semantic", "s1"): 300}, weights, overfetch=1, fixed=87, held=0
    )
    assert kept is not None and (kept["provider"], kept["budget"]) == ("semantic", 600)
