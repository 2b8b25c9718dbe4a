"""plan_fan_out and judge as pure functions: no process, no clock, no event loop."""

from __future__ import annotations

import math
from collections.abc import Iterable

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from hostd.engine import (
    FanOutPlan,
    LegAction,
    LegReply,
    LegStatus,
    ProviderSpec,
    ProviderView,
    judge,
    judge_leg,
    plan_fan_out,
)
from hostd.engine._plan import asked_tokens, query_wire
from hostd.errors import BadRequest
from hostd.protocol import (
    Capabilities,
    ContextQuery,
    DataFlow,
    FrameId,
    ProviderInfo,
    canonical_token_cost,
    sha256_digest,
)


class Gate:
    """A consent gate over a fixed set of granted (provider, scope) pairs."""

    def __init__(self, granted: Iterable[tuple[str, str]] = ()) -> None:
        self.granted = set(granted)

    def missing_scopes(self, provider_id: str, scopes: Iterable[str]) -> list[str]:
        return [s for s in scopes if (provider_id, s) not in self.granted]


def spec(pid: str, *, weight: float = 1.0, timeout_ms: int = 2000) -> ProviderSpec:
    return ProviderSpec(pid, ["true"], weight=weight, timeout_ms=timeout_ms)


def live(pid: str, *, egress: list[str] | None = None, reps: list[str] | None = None, **kw):
    info = ProviderInfo(
        name=pid,
        version="1",
        data_flow=DataFlow(reads=True, egress=bool(egress), egress_scopes=egress or []),
    )
    return ProviderView(spec(pid, **kw), info, Capabilities(representations=reps or []))


QUERY = ContextQuery(goal="g", max_frames=10, max_tokens=0)


def test_a_named_ready_wait_bounds_the_readiness_wait_apart_from_timeout_ms() -> None:
    """``timeout_ms`` alone bounds a cold provider's start too (its leg does not wait for
    readiness); with ``ready_wait_ms`` beside it, that wait is bounded by the latter and
    ``timeout_ms`` bounds the query alone."""
    views = [ProviderView(spec("cold")), live("warm")]
    alone = plan_fan_out(QUERY, 300, views, Gate(), now=0.0, timeout_ms=1000)
    both = plan_fan_out(QUERY, 300, views, Gate(), now=0.0, timeout_ms=1000, ready_wait_ms=3000)
    wait = plan_fan_out(QUERY, 300, views, Gate(), now=0.0, ready_wait_ms=0)
    assert [leg.wait_ready for leg in alone.legs] == [False, False]
    assert [leg.wait_ready for leg in both.legs] == [True, True]
    assert [leg.limit_ms for leg in both.legs] == [1000, 1000]  # each query's own bound
    assert [leg.limit_ms for leg in wait.legs] == [2000, 2000]  # the spec's, as before
    assert (alone.ready_wait_ms, both.ready_wait_ms, wait.ready_wait_ms) == (None, 3000, 0)


def test_each_leg_gets_its_action_share_asked_and_deadline() -> None:
    views = [
        ProviderView(spec("cold", timeout_ms=500)),
        live("warm"),
        live("egress", egress=["net"]),
        ProviderView(spec("zero", weight=0)),
    ]
    plan = plan_fan_out(QUERY, 300, views, Gate(), now=100.0, overfetch=2.0, timeout_ms=1000)
    legs = {leg.provider_id: leg for leg in plan.legs}
    assert [leg.provider_id for leg in plan.legs] == sorted(legs)
    assert {p: leg.action for p, leg in legs.items()} == {
        "cold": LegAction.START,
        "egress": LegAction.NO_CONSENT,
        "warm": LegAction.SEND,
        "zero": LegAction.SKIP,
    }
    assert legs["egress"].missing_scopes == ("net",)
    # The provider refused for consent keeps its nominal share out of the split: the two
    # expected to answer share the budget (a weight of 0 takes none in any split).
    assert {p: leg.share for p, leg in legs.items()} == {
        "cold": 150,
        "egress": 100,
        "warm": 150,
        "zero": 0,
    }
    assert {p: leg.apart for p, leg in legs.items()} == {
        "cold": None,
        "egress": "no_consent",
        "warm": None,
        "zero": None,
    }
    assert legs["warm"].asked == 300 and legs["warm"].query.max_tokens == 300
    assert legs["warm"].wire is not None and legs["warm"].wire["max_tokens"] == 300
    # One deadline per provider: the request's timeout when it names one, longer or
    # shorter than the provider's own (cold's is 500 ms, warm's the default 2000 ms).
    assert legs["cold"].limit_ms == 1000 and legs["cold"].deadline == pytest.approx(101.0)
    assert legs["warm"].limit_ms == 1000 and legs["warm"].deadline == pytest.approx(101.0)
    plain = plan_fan_out(QUERY, 300, views, Gate(), now=100.0, overfetch=2.0)
    assert {leg.provider_id: leg.limit_ms for leg in plain.legs if leg.provider_id in legs} == {
        "cold": 500,
        "warm": 2000,
        "egress": 2000,
        "zero": 2000,
    }


def test_a_granted_scope_lets_the_request_go_and_p5_trims_what_is_not_advertised() -> None:
    query = QUERY.model_copy(update={"representation_preferences": ["summary", "full"]})
    views = [live("e", egress=["net"], reps=[])]
    plan = plan_fan_out(query, 100, views, Gate({("e", "net")}), now=0.0)
    (leg,) = plan.legs
    assert leg.action is LegAction.SEND
    assert leg.query.representation_preferences == ["full"]
    assert leg.wire is not None and leg.wire["representation_preferences"] == ["full"]


def test_without_a_gate_every_egress_scope_is_missing() -> None:
    plan = plan_fan_out(QUERY, 100, [live("e", egress=["a", "b"])], None, now=0.0)
    assert plan.legs[0].action is LegAction.NO_CONSENT
    assert plan.legs[0].missing_scopes == ("a", "b")


@pytest.mark.parametrize("overfetch", [0.5, float("nan"), float("inf")])
def test_a_bad_overfetch_is_a_bad_request(overfetch: float) -> None:
    with pytest.raises(BadRequest):
        plan_fan_out(QUERY, 100, [live("a")], None, now=0.0, overfetch=overfetch)


def test_a_budget_that_cannot_be_split_is_a_bad_request() -> None:
    with pytest.raises(BadRequest):
        plan_fan_out(QUERY, 100, [ProviderView(spec("a", weight=0))], None, now=0.0)


@settings(max_examples=80, deadline=None)
@given(
    budget=st.integers(0, 10_000),
    weights=st.lists(st.sampled_from([0.0, 0.5, 1.0, 3.0]), min_size=1, max_size=6),
    overfetch=st.sampled_from([1.0, 1.5, 2.0, 10.0]),
    timeout=st.none() | st.integers(1, 5000),
    seed=st.randoms(use_true_random=False),
)
def test_plans_are_total_ordered_and_independent_of_input_order(
    budget: int, weights: list[float], overfetch: float, timeout: int | None, seed
) -> None:
    if sum(weights) == 0:
        weights[0] = 1.0
    views = [live(f"p{i}", weight=w, timeout_ms=1000 + i) for i, w in enumerate(weights)]
    shuffled = list(views)
    seed.shuffle(shuffled)

    def plan_of(ordered: list[ProviderView]) -> FanOutPlan:
        return plan_fan_out(
            QUERY, budget, ordered, Gate(), now=5.0, overfetch=overfetch, timeout_ms=timeout
        )

    plan = plan_of(views)
    assert plan == plan_of(shuffled)
    assert sum(leg.share for leg in plan.legs) == budget
    for leg in plan.legs:
        assert leg.asked == (0 if leg.share == 0 else min(budget, math.ceil(leg.share * overfetch)))
        assert leg.action is (LegAction.SKIP if leg.asked == 0 else LegAction.SEND)
        own = 1000 + int(leg.provider_id[1:])  # p<i>'s configured timeout_ms
        assert leg.limit_ms == (own if timeout is None else timeout)
        assert leg.deadline == 5.0 + leg.limit_ms / 1000


# -- judge --------------------------------------------------------------------------


def raw(pid: str, i: int, **over) -> dict:
    content = f"{pid} frame {i}"
    frame = {
        "id": f"{pid}:{i}",
        "kind": "snippet",
        "title": f"t{i}",
        "content": content,
        "citation_label": f"c{i}",
        "score": 0.5,
        "token_cost": canonical_token_cost(content),
        "content_digest": sha256_digest(content.encode()),
    }
    frame.update(over)
    return frame


def _plan(*pids: str, budget: int = 1000):
    return plan_fan_out(QUERY, budget, [live(p) for p in pids], Gate(), now=0.0)


def test_a_failed_reply_is_a_report_with_what_the_leg_was_asked() -> None:
    plan = _plan("a")
    reply = LegReply("a", plan.legs[0].query, status=LegStatus.TIMEOUT, error_code="timeout")
    judged = judge_leg(plan.legs[0], reply)
    assert judged.audit is None
    report = judged.report
    assert (report.status, report.error_code, report.max_tokens, report.share) == (
        LegStatus.TIMEOUT,
        "timeout",
        1000,
        1000,
    )


def test_an_answer_is_audited_against_the_query_sent() -> None:
    plan = _plan("a", budget=6)
    leg = plan.legs[0]
    frames = [raw("a", 1), raw("a", 2)]  # 3 tokens each: 6 fits, one more would not (B1)
    ok = judge_leg(leg, LegReply("a", leg.query, frames=frames)).report
    assert ok.status is LegStatus.OK and ok.frames_accepted == 2 and ok.tokens_accepted == 6
    over = judge_leg(leg, LegReply("a", leg.query, frames=[*frames, raw("a", 3)])).report
    assert over.status is LegStatus.QUARANTINED
    assert over.error_message is not None and over.error_message.startswith("B1")


def test_a_quarantine_message_names_each_rule_once() -> None:
    plan = _plan("a", budget=100)
    leg = plan.legs[0]
    lie = raw("a", 1, token_cost=1)  # its content costs 3 (B3)
    report = judge_leg(leg, LegReply("a", leg.query, frames=[lie])).report
    assert report.status is LegStatus.QUARANTINED
    assert report.error_message == (
        "B3 frames[0].token_cost: declared token_cost 1 but ceil(utf8 bytes/4) is 3"
    )


def test_a_quarantine_message_counts_the_breaches_it_does_not_spell_out() -> None:
    plan = _plan("a", budget=100)
    leg = plan.legs[0]
    lies = [raw("a", i, token_cost=1) for i in range(7)]
    message = judge_leg(leg, LegReply("a", leg.query, frames=lies)).report.error_message
    assert message is not None and message.count("B3 frames[") == 5
    assert message.endswith("; and 2 more (B3)")


@settings(max_examples=40, deadline=None)
@given(st.permutations(["a", "b", "c"]), st.randoms(use_true_random=False))
def test_judge_orders_by_provider_and_frame_id_whatever_the_arrival(order, rnd) -> None:
    plan = _plan("a", "b", "c")
    legs = {leg.provider_id: leg for leg in plan.legs}
    judged = {}
    for pid in order:
        frames = [raw(pid, i) for i in range(3)]
        rnd.shuffle(frames)
        judged[pid] = judge_leg(legs[pid], LegReply(pid, legs[pid].query, frames=frames))
    fan = judge(plan, judged)
    assert list(fan.reports) == ["a", "b", "c"]
    ids = [FrameId.of(p, f) for p, f in fan.accepted]
    assert ids == sorted(ids) and len(ids) == 9
    assert set(fan.verification) == set(ids)
    assert all(v["state"] == "unverified" for v in fan.verification.values())
    assert fan.asked == {"a": 334, "b": 333, "c": 333} == fan.shares


def test_an_answer_with_nothing_that_fit_says_so() -> None:
    plan = _plan("a", budget=6)
    leg = plan.legs[0]
    empty = judge_leg(leg, LegReply("a", leg.query, frames=[], truncated=True, dropped=3)).report
    assert empty.status is LegStatus.OK and empty.frames_accepted == 0
    assert (
        empty.note == "nothing fit: no frame within its share of 6 tokens (it left out 3 frame(s))"
    )
    assert empty.to_wire()["note"] == empty.note
    # Nothing left out, or something given: nothing to explain.
    plain = judge_leg(leg, LegReply("a", leg.query, frames=[])).report
    some = judge_leg(leg, LegReply("a", leg.query, frames=[raw("a", 1)], truncated=True)).report
    assert plain.note is None and some.note is None and "note" not in plain.to_wire()


def test_an_answer_asked_only_for_kinds_its_provider_does_not_declare_says_so() -> None:
    plan = _plan("a")
    leg = plan.legs[0]
    query = leg.query.model_copy(update={"kinds": ["nosuchkind", "x"]})
    declared = ("snippet", "doc", "<its own kind>")
    empty = judge_leg(leg, LegReply("a", query, frames=[], declared_kinds=declared)).report
    assert empty.status is LegStatus.OK
    assert empty.note == (
        "no frame: none of the kinds asked (nosuchkind, x) is among the 3 it declares "
        "(doc, snippet and 1 other(s))"
    )  # the protocol's kinds are named, so the caller knows what to ask
    assert "its own kind" not in empty.note  # a kind of its own is its text: not quoted
    # A kind it declares asked, no kind asked, or any kind declared: nothing to explain.
    overlap = query.model_copy(update={"kinds": ["doc", "x"]})
    for q, kinds in ((overlap, declared), (leg.query, declared), (query, ())):
        plain = judge_leg(leg, LegReply("a", q, frames=[], declared_kinds=kinds)).report
        assert plain.note is None, (q.kinds, kinds)


@settings(max_examples=400, deadline=None)
@given(
    share=st.integers(-3, 2**32),
    budget=st.integers(0, 2**32),
    overfetch=st.one_of(
        st.integers(1, 1000),
        st.integers(1, 1000).map(float),
        st.floats(1.0, 1000.0),
    ),
)
def test_the_tokens_asked_are_the_share_times_overfetch_rounded_up_capped_at_the_budget(
    share: int, budget: int, overfetch: float
) -> None:
    """An integral overfetch multiplies without rounding: the same figure as
    ``ceil(share * overfetch)``, whatever the overfetch's type."""
    want = 0 if share <= 0 else min(budget, math.ceil(share * overfetch))
    assert asked_tokens(share, budget, overfetch) == want


@settings(max_examples=80, deadline=None)
@given(
    max_tokens=st.integers(0, 5000),
    budget=st.integers(1, 5000),
    weights=st.lists(st.sampled_from([0.5, 1.0, 3.0]), min_size=1, max_size=4),
    overfetch=st.sampled_from([1.0, 1.5, 2.0, 10.0]),
)
def test_each_leg_query_is_the_request_query_with_the_tokens_asked(
    max_tokens: int, budget: int, weights: list[float], overfetch: float
) -> None:
    """Every leg's query (and its wire form) is the request's with ``max_tokens`` the
    figure asked, whether a copy was needed or the request's already said so."""
    query = QUERY.model_copy(update={"max_tokens": max_tokens})
    views = [live(f"p{i}", weight=w) for i, w in enumerate(weights)]
    plan = plan_fan_out(query, budget, views, Gate(), now=0.0, overfetch=overfetch)
    for leg in plan.legs:
        assert leg.query.to_wire() == {**query.to_wire(), "max_tokens": leg.asked}
        if leg.wire is not None:
            assert dict(leg.wire) == leg.query.to_wire()


@settings(max_examples=200, deadline=None)
@given(
    budget=st.integers(0, 2**40),
    weights=st.lists(st.sampled_from([0.0, 0.5, 1.0, 3.0]), min_size=1, max_size=5),
    overfetch=st.one_of(
        st.integers(1, 1000).map(float), st.floats(1.0, 1000.0), st.sampled_from([1.0, 2.0])
    ),
)
def test_each_leg_asks_what_asked_tokens_says_for_its_share(
    budget: int, weights: list[float], overfetch: float
) -> None:
    """The plan reads a whole ``overfetch`` once for all its legs: every leg's figure is
    still ``asked_tokens`` of its share, whole or not, past 2**43 or not."""
    if sum(weights) == 0:
        weights[0] = 1.0
    views = [live(f"p{i}", weight=w) for i, w in enumerate(weights)]
    plan = plan_fan_out(QUERY, budget, views, Gate(), now=0.0, overfetch=overfetch)
    for leg in plan.legs:
        assert leg.asked == asked_tokens(leg.share, budget, overfetch)


_TEXT = st.text(max_size=12)


@settings(max_examples=300, deadline=None)
@given(
    fields=st.fixed_dictionaries(
        {
            "goal": _TEXT,
            "max_frames": st.integers(0, 2**32 - 1),
            "max_tokens": st.integers(0, 2**32 - 1),
        },
        optional={
            "query_text": st.none() | _TEXT,
            "embedding": st.none() | st.lists(st.floats(allow_nan=True), max_size=3),
            "kinds": st.lists(_TEXT, max_size=3),
            "anchors": st.lists(_TEXT, max_size=3),
            "as_of": st.none() | _TEXT,
            "representation_preferences": st.none() | st.lists(_TEXT, max_size=3),
        },
    )
)
def test_a_query_wire_form_built_from_its_fields_is_its_to_wire(fields: dict) -> None:
    """``query_wire`` (the plan's template) is ``to_wire()``: the same members in the
    same order (so the same bytes), lists that are copies, not the query's own."""
    query = ContextQuery(**fields)
    fast, full = query_wire(query), query.to_wire()
    assert list(fast.items()) == list(full.items())
    assert orjson.dumps(fast) == orjson.dumps(full)
    for name in ("kinds", "anchors", "representation_preferences"):
        if fast.get(name) is not None:
            assert fast[name] is not getattr(query, name)


def test_the_query_wire_form_knows_every_field_of_the_query() -> None:
    # ``query_wire`` names the query's fields one by one: a field added to the model
    # must be added there (and to the property test above) before this passes.
    assert set(ContextQuery.model_fields) == {
        "goal",
        "query_text",
        "embedding",
        "kinds",
        "anchors",
        "max_frames",
        "max_tokens",
        "as_of",
        "representation_preferences",
    }
