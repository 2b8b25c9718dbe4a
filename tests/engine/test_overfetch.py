"""Over-fetch: each provider asked for share × overfetch (capped), B1 judged on that figure."""

from __future__ import annotations

import math

import pytest

from hostd.compose import compose_for_prompt, strategy_from_wire
from hostd.engine import Host, LegStatus
from hostd.errors import BadRequest
from tests.engine._helpers import adversary, healthy, query

pytestmark = pytest.mark.anyio


async def test_each_provider_is_asked_for_its_share_times_overfetch_capped_at_the_budget() -> None:
    specs = [healthy("a", "--frames", "50"), healthy("b", "--frames", "50", weight=3.0)]
    async with Host(specs) as host:
        fan = await host.query_all(query(max_frames=50), 400, overfetch=2.5)
    assert fan.shares == {"a": 100, "b": 300}
    # a: ceil(100 × 2.5) = 250; b: 750 capped at the global budget 400.
    assert fan.asked == {"a": 250, "b": 400}
    assert fan.reports["a"].max_tokens == 250 and fan.reports["b"].max_tokens == 400
    assert fan.reports["a"].share == 100 and fan.reports["b"].share == 300
    assert fan.reports["a"].to_wire()["max_tokens"] == 250
    assert fan.reports["a"].to_wire()["share"] == 100
    assert fan.overfetch == 2.5 and fan.to_wire()["overfetch"] == 2.5
    # Honest providers used the room: together they offer more than the global budget.
    assert all(r.status is LegStatus.OK for r in fan.reports.values())
    assert fan.reports["a"].tokens_accepted > fan.shares["a"]
    assert fan.usage_report()["budget_consumed"] > 400


async def test_overfetch_one_keeps_the_plain_split() -> None:
    async with Host([healthy("a", "--frames", "50"), healthy("b", "--frames", "50")]) as host:
        fan = await host.query_all(query(max_frames=50), 301)
    assert fan.asked == fan.shares
    assert fan.overfetch == 1.0
    assert fan.usage_report()["budget_consumed"] <= 301


async def test_a_fractional_overfetch_rounds_the_asked_figure_up() -> None:
    async with Host([healthy("a"), healthy("b"), healthy("c")]) as host:
        fan = await host.query_all(query(), 100, overfetch=1.1)
    for pid, share in fan.shares.items():
        assert fan.asked[pid] == min(100, math.ceil(share * 1.1))


async def test_with_overfetch_the_composed_prompt_still_respects_the_global_budget() -> None:
    specs = [healthy(pid, "--frames", "40", "--size", "120") for pid in ("a", "b", "c")]
    async with Host(specs) as host:
        fan = await host.query_all(query(max_frames=40), 600, overfetch=3.0)
    assert fan.usage_report()["budget_consumed"] > 600  # the budget really is contested
    for wire in ("score", "round_robin", {"rrf": {"k": 60}}):
        composed = compose_for_prompt(fan.accepted, 600, strategy=strategy_from_wire(wire))
        audit = composed.to_wire()["audit"]
        assert 0 < audit["tokens_used"] <= 600
        assert any(e["disposition"] != "included" for e in audit["entries"])


async def test_b1_is_judged_against_what_the_provider_was_actually_asked() -> None:
    # over_budget answers max_tokens + 10 honest tokens: over the asked figure, not the share.
    async with Host([adversary("over_budget", "adv"), healthy("ok")]) as host:
        fan = await host.query_all(query(), 400, overfetch=2.0)
    report = fan.reports["adv"]
    assert report.status is LegStatus.QUARANTINED
    assert report.max_tokens == fan.asked["adv"] == 400 and report.share == 200
    assert "over the query's max_tokens 400" in (report.error_message or "")
    assert fan.reports["ok"].status is LegStatus.OK


@pytest.mark.parametrize("bad", [0.5, 0.0, -1.0, float("nan"), float("inf")])
async def test_an_overfetch_below_one_or_not_finite_is_a_named_bad_request(bad: float) -> None:
    async with Host([healthy("a")]) as host:
        with pytest.raises(BadRequest) as info:
            await host.query_all(query(), 100, overfetch=bad)
    assert info.value.data.get("field") == "overfetch"
    assert "overfetch" in info.value.message
