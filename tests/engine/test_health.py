"""Restart and health decisions: sync functions driven with a fake clock."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from hostd.engine import (
    Health,
    ProviderState,
    RestartPolicy,
    StartAction,
    backoff_delay,
    decide_start,
    record_failure,
    record_leg,
    record_started,
)

POLICY = RestartPolicy(base_delay_s=0.1, max_delay_s=1.0, max_attempts=4)


def test_a_live_connection_is_used() -> None:
    assert decide_start(Health(), alive=True, now=0, policy=POLICY).action is StartAction.USE


def test_a_never_started_provider_starts_at_once() -> None:
    decision = decide_start(Health(), alive=False, now=0, policy=POLICY)
    assert decision.action is StartAction.START


def test_after_a_crash_the_next_start_waits_out_the_backoff() -> None:
    h = record_failure(record_started(Health()), now=10.0, error="crashed", policy=POLICY)
    early = decide_start(h, alive=False, now=10.05, policy=POLICY)
    assert early.action is StartAction.WAIT
    assert abs(early.delay_s - 0.05) < 1e-9
    assert decide_start(h, alive=False, now=10.1, policy=POLICY).action is StartAction.START


def test_backoff_doubles_and_is_capped() -> None:
    assert [backoff_delay(n, POLICY) for n in range(6)] == [0.0, 0.1, 0.2, 0.4, 0.8, 1.0]


def test_restart_attempts_are_bounded() -> None:
    h = Health()
    for i in range(POLICY.max_attempts):
        h = record_failure(h, now=float(i), error="boom", policy=POLICY)
    assert h.state is ProviderState.FAILED
    assert decide_start(h, alive=False, now=1e9, policy=POLICY).action is StartAction.GIVE_UP


def test_a_served_leg_resets_the_failure_streak() -> None:
    h = record_failure(Health(), now=0, error="x", policy=POLICY)
    h = record_started(h)
    assert h.restarts == 0 and h.starts == 1
    h = record_leg(h, "ok")
    assert h.consecutive_failures == 0 and h.ok == 1 and h.legs == 1


def test_restarts_count_every_start_after_the_first() -> None:
    h = record_started(Health())
    h = record_failure(h, now=0, error="x", policy=POLICY)
    h = record_started(h)
    assert (h.starts, h.restarts, h.state) == (2, 1, ProviderState.READY)


def test_leg_statuses_are_counted_by_kind() -> None:
    h = Health(state=ProviderState.READY)
    for status in ("timeout", "crashed", "error", "quarantined", "no_consent", "ok"):
        h = record_leg(h, status, error=f"{status}!")
    wire = h.to_wire()
    assert [wire[k] for k in ("timeouts", "crashes", "errors", "quarantines", "no_consent")] == [
        1
    ] * 5
    assert wire["legs"] == 6 and wire["last_error"] == "ok!"


def test_a_timeout_does_not_reset_or_extend_the_failure_streak() -> None:
    h = record_failure(Health(), now=0, error="x", policy=POLICY)
    assert record_leg(h, "timeout").consecutive_failures == 1


@given(
    failures=st.integers(min_value=0, max_value=20),
    now=st.floats(min_value=0, max_value=1e6, allow_nan=False),
    alive=st.booleans(),
)
def test_decisions_are_total_and_waits_never_exceed_the_cap(
    failures: int, now: float, alive: bool
) -> None:
    h = Health()
    for i in range(failures):
        h = record_failure(h, now=now, error=str(i), policy=POLICY)
    d = decide_start(h, alive=alive, now=now, policy=POLICY)
    if alive:
        assert d.action is StartAction.USE
    elif failures >= POLICY.max_attempts:
        assert d.action is StartAction.GIVE_UP
    elif failures == 0:
        assert d.action is StartAction.START
    else:
        assert d.action is StartAction.WAIT and 0 < d.delay_s <= POLICY.max_delay_s
