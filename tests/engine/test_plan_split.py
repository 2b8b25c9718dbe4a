"""The budget split over the providers expected to answer (``plan_fan_out``): pure, no
process, no clock. A provider that cannot answer (no consent, a crash loop, one down or
whose warm-up failed) or is not ready (warming, starting) keeps its nominal share out of
the split, so the others are asked for what it would have had."""

from __future__ import annotations

import logging
from types import SimpleNamespace
from typing import Any, cast

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from hostd import _log
from hostd.engine import (
    Expect,
    LegAction,
    LegReply,
    LegStatus,
    ProviderView,
    judge,
    judge_leg,
    plan_fan_out,
)
from hostd.engine._health import Health, RestartPolicy
from hostd.engine._host import _expect_down, _log_leg, _view
from hostd.engine._plan import asked_tokens
from hostd.engine._pool import ProviderPool, Slot
from hostd.errors import ProviderCrashed
from hostd.protocol import ContextQuery
from tests.engine.test_fanout_plan import Gate, live, spec
from tests.fixtures.log_events import events

QUERY = ContextQuery(goal="g", max_frames=10, max_tokens=0)

#: Every way a provider is not expected to answer, as its view says it (``no_consent``
#: is the plan's own finding on a live view).
NOT_EXPECTED = [e for e in Expect if e is not Expect.ANSWERS]


def view(pid: str, expect: Expect = Expect.ANSWERS, **kw) -> ProviderView:
    """A provider as the pool shows it: live and ready (``answers``, ``failed``) with its
    handshake, else its spec alone (a ``start`` leg)."""
    if expect in (Expect.ANSWERS, Expect.FAILED):
        ready = live(pid, **kw)
        return ProviderView(ready.spec, ready.info, ready.capabilities, expect)
    return ProviderView(spec(pid, **kw), expect=expect)


def shares(plan) -> dict[str, tuple[int, int, str | None]]:
    return {leg.provider_id: (leg.share, leg.asked, leg.apart) for leg in plan.legs}


@pytest.mark.parametrize("expect", NOT_EXPECTED)
def test_the_others_are_asked_for_what_a_provider_not_expected_would_have_had(
    expect: Expect,
) -> None:
    """The walkthrough's four providers at 800 tokens, overfetch 2: one not expected to
    answer keeps its nominal 200 (asked 400, in case it answers after all), the three
    others share the 800 (267, 267, 266: largest remainder, ties to the earlier id)."""
    views = [view("files"), view("memory"), view("mine"), view("semantic", expect)]
    plan = plan_fan_out(QUERY, 800, views, Gate(), now=0.0, overfetch=2.0)
    assert shares(plan) == {
        "files": (267, 534, None),
        "memory": (267, 534, None),
        "mine": (266, 532, None),
        "semantic": (200, 400, str(expect)),
    }
    # Without it every one has its nominal share, as before.
    every = plan_fan_out(QUERY, 800, [view(p) for p in shares(plan)], Gate(), now=0.0)
    assert {leg.share for leg in every.legs} == {200}


def test_a_provider_without_consent_gives_its_share_to_the_others() -> None:
    views = [live("a"), live("egress", egress=["net"]), live("b")]
    plan = plan_fan_out(QUERY, 600, views, Gate(), now=0.0, overfetch=1.0)
    assert shares(plan) == {
        "a": (300, 300, None),
        "b": (300, 300, None),
        "egress": (200, 200, "no_consent"),
    }
    legs = {leg.provider_id: leg for leg in plan.legs}
    assert legs["egress"].action is LegAction.NO_CONSENT
    assert legs["a"].wire is not None and legs["a"].wire["max_tokens"] == 300
    # Granted, it answers: no one is apart.
    granted = plan_fan_out(QUERY, 600, views, Gate({("egress", "net")}), now=0.0)
    assert shares(granted) == dict.fromkeys(("a", "b", "egress"), (200, 200, None))


@pytest.mark.parametrize(
    ("expect", "action"),
    [
        (Expect.WARMING, LegAction.START),
        (Expect.STARTING, LegAction.START),
        (Expect.RESTARTING, LegAction.START),
        (Expect.DOWN, LegAction.START),
        (Expect.FAILED, LegAction.SEND),
    ],
)
def test_a_provider_kept_apart_keeps_its_action_and_is_asked_its_nominal_share(
    expect: Expect, action: LegAction
) -> None:
    """What its leg does is the run's to find (a start, a crash loop told at once, a
    refusal): the plan only leaves its share out of the others' split. If it answers after
    all, it is asked for its nominal share (an ask is an upper bound)."""
    plan = plan_fan_out(QUERY, 300, [view("a"), view("z", expect)], Gate(), now=0.0, overfetch=2.0)
    legs = {leg.provider_id: leg for leg in plan.legs}
    assert legs["z"].action is action
    assert (legs["z"].share, legs["z"].asked, legs["z"].query.max_tokens) == (150, 300, 300)
    assert (legs["a"].share, legs["a"].asked, legs["a"].query.max_tokens) == (300, 300, 300)


def test_weights_are_respected_among_the_providers_that_answer() -> None:
    views = [
        view("a", weight=1.0),
        view("b", weight=3.0),
        view("c", Expect.WARMING, weight=2.0),
        view("d", Expect.RESTARTING, weight=2.0),
    ]
    plan = plan_fan_out(QUERY, 800, views, Gate(), now=0.0, overfetch=1.5)
    # a and b split 800 1:3; c and d keep their nominal 800 × 2/8.
    assert shares(plan) == {
        "a": (200, 300, None),
        "b": (600, 800, None),  # asked at most the budget
        "c": (200, 300, "warming"),
        "d": (200, 300, "restarting"),
    }


def test_largest_remainder_decides_the_odd_tokens_among_those_that_answer() -> None:
    views = [view("a"), view("b"), view("c"), view("w", Expect.STARTING)]
    plan = plan_fan_out(QUERY, 100, views, Gate(), now=0.0)
    assert [leg.share for leg in plan.legs] == [34, 33, 33, 25]


@pytest.mark.parametrize("expect", list(Expect))
def test_a_single_provider_is_asked_for_the_whole_budget_whatever_its_state(
    expect: Expect,
) -> None:
    """No one to give its share to: its nominal share is the whole budget, nothing apart."""
    plan = plan_fan_out(QUERY, 500, [view("only", expect)], Gate(), now=0.0, overfetch=2.0)
    assert shares(plan) == {"only": (500, 500, None)}


def test_with_no_provider_expected_to_answer_the_split_is_the_nominal_one() -> None:
    views = [
        view("a", Expect.WARMING),
        view("b", Expect.RESTARTING),
        live("c", egress=["net"]),
        view("z", weight=0.0),  # answers, with no share in any split
    ]
    plan = plan_fan_out(QUERY, 300, views, Gate(), now=0.0)
    assert shares(plan) == {
        "a": (100, 100, None),
        "b": (100, 100, None),
        "c": (100, 100, None),
        "z": (0, 0, None),
    }
    zero = plan.leg("z")
    assert zero is not None and zero.action is LegAction.SKIP


def test_a_weight_zero_provider_is_never_apart_and_a_small_budget_still_skips() -> None:
    views = [view("a"), view("b", Expect.WARMING, weight=2.0), view("z", weight=0.0)]
    plan = plan_fan_out(QUERY, 2, views, Gate(), now=0.0)
    assert shares(plan) == {"a": (2, 2, None), "b": (1, 1, "warming"), "z": (0, 0, None)}
    # c's nominal share at a budget of 1 is 0: skipped, and apart all the same.
    tiny = plan_fan_out(
        QUERY, 1, [view("a"), view("b"), view("c", Expect.WARMING)], Gate(), now=0.0
    )
    assert shares(tiny) == {"a": (1, 1, None), "b": (0, 0, None), "c": (0, 0, "warming")}
    assert [leg.action for leg in tiny.legs] == [LegAction.SEND, LegAction.SKIP, LegAction.SKIP]


def test_the_report_says_why_a_share_was_apart_and_only_then() -> None:
    views = [view("a"), view("w", Expect.WARMING)]
    plan = plan_fan_out(QUERY, 400, views, Gate(), now=0.0, overfetch=2.0)
    legs = {leg.provider_id: leg for leg in plan.legs}
    ok = judge_leg(legs["a"], LegReply("a", legs["a"].query, frames=[])).report
    warm = judge_leg(
        legs["w"],
        LegReply("w", legs["w"].query, status=LegStatus.WARMING, error_code="warming"),
    ).report
    assert (ok.share, ok.max_tokens, ok.share_apart) == (400, 400, None)
    assert (warm.share, warm.max_tokens, warm.share_apart) == (200, 400, "warming")
    assert "share_apart" not in ok.to_wire()
    assert warm.to_wire()["share_apart"] == "warming"
    warming = LegReply("w", legs["w"].query, status=LegStatus.WARMING)
    answered = LegReply("a", legs["a"].query, frames=[])
    fan = judge(plan, {"a": judge_leg(legs["a"], answered), "w": judge_leg(legs["w"], warming)})
    assert fan.shares == {"a": 400, "w": 200} and fan.asked == {"a": 400, "w": 400}


def test_the_leg_s_log_event_says_why_a_share_was_apart_and_only_then(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """An operator reading ``provider.leg`` sees why a provider was asked for its nominal
    share; the common leg's event keeps the fields it always had."""
    monkeypatch.setattr(_log.level, "at", logging.INFO)  # provider.leg is built at info
    views = [view("a"), view("w", Expect.WARMING)]
    plan = plan_fan_out(QUERY, 400, views, Gate(), now=0.0, overfetch=2.0)
    legs = {leg.provider_id: leg for leg in plan.legs}
    ok = judge_leg(legs["a"], LegReply("a", legs["a"].query, frames=[])).report
    warm = judge_leg(legs["w"], LegReply("w", legs["w"].query, status=LegStatus.WARMING)).report
    with events() as seen:
        _log_leg(ok)
        _log_leg(warm)
    logged = {e["provider"]: e for e in seen.seen if e["event"] == "provider.leg"}
    assert logged["w"]["share_apart"] == "warming"
    assert list(logged["a"]) == [*_LEG_FIELDS, "event", "log_level"]


#: The fields of ``provider.leg`` for a leg whose share was part of the split.
_LEG_FIELDS = [
    "provider",
    "status",
    "latency_ms",
    "frames_offered",
    "frames_accepted",
    "max_tokens",
    "error_code",
    "message",
    "stderr_tail",
    "violations",
]


def test_a_plan_with_every_provider_expected_is_the_one_it_always_was() -> None:
    """The common request: the same split, the same bytes on the wire."""
    views = [live("a", weight=2.0), live("b")]
    plan = plan_fan_out(QUERY, 999, views, Gate(), now=0.0, overfetch=2.0)
    assert shares(plan) == {"a": (666, 999, None), "b": (333, 666, None)}
    legs = {leg.provider_id: leg for leg in plan.legs}
    report = judge_leg(legs["b"], LegReply("b", legs["b"].query, frames=[])).report
    assert orjson.dumps(report.to_wire()) == orjson.dumps(
        {
            "provider_id": "b",
            "status": "ok",
            "frames_offered": 0,
            "frames_accepted": 0,
            "latency_ms": 0.0,
            "tokens_accepted": 0,
            "violations": [],
            "max_tokens": 666,
            "share": 333,
        }
    )


@settings(max_examples=150, deadline=None)
@given(
    budget=st.integers(0, 100_000),
    states=st.lists(
        st.tuples(st.sampled_from(list(Expect)), st.sampled_from([0.0, 0.5, 1.0, 3.0])),
        min_size=1,
        max_size=6,
    ),
    overfetch=st.sampled_from([1.0, 1.5, 2.0]),
    seed=st.randoms(use_true_random=False),
)
def test_the_split_is_deterministic_and_gives_the_expected_providers_the_budget(
    budget: int, states: list[tuple[Expect, float]], overfetch: float, seed
) -> None:
    if not any(w for _, w in states):
        states[0] = (states[0][0], 1.0)
    views = [view(f"p{i}", e, weight=w) for i, (e, w) in enumerate(states)]
    shuffled = list(views)
    seed.shuffle(shuffled)
    plan = plan_fan_out(QUERY, budget, views, Gate(), now=0.0, overfetch=overfetch)
    assert plan == plan_fan_out(QUERY, budget, shuffled, Gate(), now=0.0, overfetch=overfetch)
    # Every provider expected: the nominal split.
    every = [live(v.spec.id, weight=v.spec.weight) for v in views]
    nominal = plan_fan_out(QUERY, budget, every, Gate(), now=0.0, overfetch=overfetch)
    weighed = [(leg, v) for leg, v in zip(plan.legs, views, strict=True) if v.spec.weight > 0]
    expected = [leg for leg, v in weighed if v.expect is Expect.ANSWERS]
    for leg, before in zip(plan.legs, nominal.legs, strict=True):
        assert leg.asked == asked_tokens(leg.share, budget, overfetch)
        if leg.apart is not None:
            assert leg.share == before.share  # its nominal share
        else:
            # Never less than its nominal share but for a token of rounding.
            assert leg.share >= before.share - 1
    if expected:
        assert sum(leg.share for leg in expected) == budget
        assert {leg.provider_id: leg.apart for leg in plan.legs if leg.apart} == {
            leg.provider_id: str(v.expect) for leg, v in weighed if v.expect is not Expect.ANSWERS
        }
    else:  # no one to give a share to
        assert [(leg.share, leg.apart) for leg in plan.legs] == [
            (leg.share, None) for leg in nominal.legs
        ]


# -- what the pool tells the plan (``_view``): sync decisions, no process ------------------


class _Pool:
    """The pool as ``_view`` reads it: its restart policy, its clock, its launcher."""

    def __init__(self, now: float = 100.0, changed: bool = False) -> None:
        self.settings = SimpleNamespace(restart_policy=RestartPolicy())
        self.launcher = SimpleNamespace(credential_changed=lambda _spec: changed)
        self.now = lambda: now


def _slot(**health: Any) -> Slot:
    slot = Slot(spec("p"))
    slot.health = Health(**health)
    return slot


@pytest.mark.parametrize(
    ("health", "expect"),
    [
        ({}, Expect.STARTING),  # never started: its leg starts it and waits
        ({"consecutive_failures": 1, "failed_at": 99.0}, Expect.STARTING),  # one crash: waited
        ({"consecutive_failures": 2, "failed_at": 99.0}, Expect.RESTARTING),  # a crash loop
        ({"consecutive_failures": 5, "failed_at": 99.0}, Expect.DOWN),  # parked
        ({"consecutive_failures": 5, "failed_at": 0.0}, Expect.STARTING),  # its cool-down over
        ({"consecutive_failures": 1, "start_timed_out": True}, Expect.DOWN),  # not waited for
        ({"consecutive_failures": 3, "unreachable": True, "failed_at": 99.0}, Expect.DOWN),
    ],
)
def test_a_provider_not_running_is_expected_as_its_leg_will_meet_it(
    health: dict[str, Any], expect: Expect
) -> None:
    links: dict[str, Any] = {}
    got = _view(_slot(**health), links, cast(ProviderPool, _Pool()))
    assert got.expect is expect and got.info is None and links == {}


def test_a_removed_or_refused_provider_is_down_until_its_credential_changes() -> None:
    retired = _slot()
    retired.retired = ProviderCrashed("removed by a reload")
    assert _expect_down(retired, cast(ProviderPool, _Pool())) is Expect.DOWN
    refused = _slot(refused=True, consecutive_failures=5, failed_at=99.0)
    assert _expect_down(refused, cast(ProviderPool, _Pool())) is Expect.DOWN
    assert _expect_down(refused, cast(ProviderPool, _Pool(changed=True))) is Expect.STARTING


def test_a_start_under_way_is_waited_for_unless_a_crash_loop_runs_it_behind() -> None:
    starting = _slot()
    starting.starting = cast(Any, object())
    assert _expect_down(starting, cast(ProviderPool, _Pool())) is Expect.STARTING
    looping = _slot(consecutive_failures=2, failed_at=99.0)
    looping.starting = cast(Any, object())
    assert _expect_down(looping, cast(ProviderPool, _Pool())) is Expect.RESTARTING
