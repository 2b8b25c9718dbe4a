"""Restart and health decisions: sync functions driven with a fake clock."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from hostd.engine import (
    MAX_ERROR_CHARS,
    Health,
    ProviderState,
    RestartPolicy,
    StartAction,
    backoff_delay,
    bounded_error,
    decide_start,
    is_hung,
    is_warming_leg,
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


HUNG = RestartPolicy(max_consecutive_timeouts=3)


def test_timeouts_in_a_row_make_a_running_provider_hung_and_an_answer_resets_them() -> None:
    h = record_started(Health())
    for _ in range(2):
        h = record_leg(h, "timeout")
    assert h.consecutive_timeouts == 2 and not is_hung(h, HUNG)
    assert is_hung(record_leg(h, "timeout"), HUNG)
    for answered in ("ok", "quarantined"):
        assert record_leg(h, answered).consecutive_timeouts == 0
    # A refusal or an error is not a timeout, and does not wipe the streak either.
    assert record_leg(h, "error").consecutive_timeouts == 2


def test_only_a_ready_provider_is_hung_and_zero_turns_the_check_off() -> None:
    h = Health(state=ProviderState.READY, consecutive_timeouts=5)
    assert is_hung(h, HUNG)
    assert not is_hung(h, RestartPolicy(max_consecutive_timeouts=0))
    for state in (ProviderState.CRASHED, ProviderState.FAILED, ProviderState.IDLE):
        assert not is_hung(Health(state=state, consecutive_timeouts=5), HUNG)
    # The restart a hung provider earns is a failure like a crash, and clears the streak.
    after = record_failure(h, now=1.0, error="hung", policy=HUNG)
    assert after.consecutive_timeouts == 0 and after.consecutive_failures == 1


@given(st.text(max_size=3000), st.integers(1, 50))
def test_recorded_errors_stay_bounded_however_often_they_are_quoted(text: str, rounds: int) -> None:
    h = Health()
    for _ in range(rounds):
        h = record_failure(h, now=0.0, error=f"x: {text} {h.last_error}", policy=POLICY)
        h = record_leg(h, "crashed", error=f"exhausted; last: {h.last_failure} {h.last_error}")
    assert len(h.last_error or "") <= MAX_ERROR_CHARS
    assert len(h.last_failure or "") <= MAX_ERROR_CHARS
    assert bounded_error(text) == text or len(bounded_error(text)) == MAX_ERROR_CHARS


def test_warming_legs_never_count_toward_a_hang_or_a_failure() -> None:
    policy = RestartPolicy(max_consecutive_timeouts=2)
    health = record_started(Health())
    health = record_leg(health, "timeout")
    for _ in range(10):
        health = record_leg(health, "warming", error="warming: embed 64/449")
    assert is_warming_leg("warming") and not is_warming_leg("timeout")
    assert health.consecutive_timeouts == 0 and not is_hung(health, policy)
    assert (health.warming, health.timeouts, health.consecutive_failures) == (10, 1, 0)
    assert health.to_wire()["warming"] == 10
