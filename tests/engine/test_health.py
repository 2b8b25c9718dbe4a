"""Restart and health decisions: sync functions driven with a fake clock."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from hostd.engine import (
    MAX_ERROR_CHARS,
    Health,
    ProviderState,
    RestartPolicy,
    StartAction,
    awaits_start,
    backoff_delay,
    bounded_error,
    check_delay,
    check_due,
    decide_parked,
    decide_start,
    idle_restart_in,
    is_hung,
    is_parked,
    is_warming_leg,
    record_failure,
    record_leg,
    record_refusals,
    record_refused,
    record_restart_requested,
    record_retry,
    record_started,
    record_untrusted,
    restart_due,
    restarts_behind,
    retry_cool_down_s,
    retry_due,
)
from hostd.errors import MAX_STDERR_TAIL_CHARS

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


def test_the_default_backoff_spreads_the_five_attempts_over_seconds() -> None:
    policy = RestartPolicy()
    waits = [backoff_delay(n, policy) for n in range(1, policy.max_attempts)]
    # Between the 5 attempts: long enough to outlast a cause that passes in seconds.
    assert (waits, sum(waits)) == ([0.5, 1.0, 2.0, 4.0], 7.5)
    # A first wait above the cap is not cut below itself.
    slow = RestartPolicy(base_delay_s=10.0, max_delay_s=5.0)
    assert [backoff_delay(n, slow) for n in range(1, 4)] == [10.0, 10.0, 10.0]


def _parked(policy: RestartPolicy = POLICY, at: float = 3.0) -> Health:
    h = Health()
    for i in range(policy.max_attempts):
        now = at - policy.max_attempts + 1 + i
        h = record_failure(h, now=now, error=f"boom {i}", policy=policy)
    return h


def test_restart_attempts_are_bounded_then_the_provider_is_parked() -> None:
    h = _parked()
    assert h.state is ProviderState.FAILED and is_parked(h, POLICY) and h.failed_at == 3.0
    # Within the cool-down every leg gives up at once, told how long is left.
    for now in (3.0, 30.0, 62.9):
        d = decide_start(h, alive=False, now=now, policy=POLICY)
        assert d.action is StartAction.GIVE_UP and abs(d.delay_s - (63.0 - now)) < 1e-9


def test_a_crashed_provider_is_due_again_when_its_backoff_lets_a_start_begin() -> None:
    h = record_failure(Health(), now=10.0, error="boom", policy=POLICY)
    h = record_failure(h, now=11.0, error="boom", policy=POLICY)
    due = restart_due(h, POLICY)
    assert due == 11.0 + backoff_delay(2, POLICY)
    assert idle_restart_in(h, now=11.0, policy=POLICY) == due - 11.0
    assert decide_start(h, alive=False, now=due, policy=POLICY).action is StartAction.START
    # Not for one up, parked (``retry_due``) or never started.
    assert restart_due(record_started(h), POLICY) is None
    assert restart_due(_parked(), POLICY) is None and restart_due(Health(), POLICY) is None


def test_a_parked_provider_gets_one_start_once_its_cool_down_has_passed() -> None:
    h = _parked()
    assert retry_due(h, POLICY) == 63.0
    for now in (63.0, 1e9):
        assert decide_start(h, alive=False, now=now, policy=POLICY).action is StartAction.START
    assert record_retry(h).retries == 1 and record_retry(record_retry(h)).retries == 2


def test_a_failed_retry_parks_it_for_another_cool_down_twice_as_long() -> None:
    h = record_retry(_parked())
    h = record_failure(h, now=70.0, error="still broken", policy=POLICY)
    assert h.state is ProviderState.FAILED and h.consecutive_failures == POLICY.max_attempts + 1
    assert h.failed_retries == 1 and h.to_wire()["failed_retries"] == 1
    assert retry_due(h, POLICY) == 190.0
    assert decide_start(h, alive=False, now=189.0, policy=POLICY).action is StartAction.GIVE_UP
    assert decide_start(h, alive=False, now=190.0, policy=POLICY).action is StartAction.START


def _fail_retries(h: Health, n: int, policy: RestartPolicy = POLICY) -> tuple[Health, float]:
    """``h`` (parked) after ``n`` retries that each failed as soon as its cool-down passed."""
    now = h.failed_at or 0.0
    for _ in range(n):
        now = retry_due(h, policy) or now
        h = record_failure(record_retry(h), now=now, error="still broken", policy=policy)
    return h, now


def test_a_provider_whose_every_retry_fails_is_tried_less_and_less_often_up_to_an_hour() -> None:
    h = _parked(at=3.0)
    waits = []
    for n in range(9):
        retried, now = _fail_retries(h, n)
        waits.append(idle_restart_in(retried, now=now, policy=POLICY))
    # 60 s, then twice as long after each failed retry, never more than the hour.
    assert waits == [60.0, 120.0, 240.0, 480.0, 960.0, 1920.0, 3600.0, 3600.0, 3600.0]
    assert RestartPolicy().retry_failed_max_s == 3600.0
    # A day of it: about 30 retries, not the 1,440 a fixed minute would make.
    day, retries = _parked(at=0.0), 0
    while (due := retry_due(day, POLICY)) is not None and due < 86_400:
        day, _ = _fail_retries(day, 1)
        retries += 1
    assert retries < 30


def test_a_start_that_succeeds_or_a_restart_asked_makes_the_cool_down_its_first_again() -> None:
    grown, now = _fail_retries(_parked(at=3.0), 3)
    assert retry_cool_down_s(grown, POLICY) == 480.0
    started = record_started(record_retry(grown))
    assert started.failed_retries == 0
    # It started, then crashed before answering: parked again, for the first cool-down.
    again = record_failure(started, now=now, error="crashed", policy=POLICY)
    assert again.state is ProviderState.FAILED and retry_due(again, POLICY) == now + 60.0
    asked = record_restart_requested(grown)
    assert asked.failed_retries == 0 and retry_cool_down_s(asked, POLICY) == 60.0


def test_a_retry_refused_again_doubles_the_cool_down_as_a_failed_one_does() -> None:
    refused = record_refused(record_started(Health()), now=5.0, error="unauthorized: 401")
    assert refused.failed_retries == 0 and retry_due(refused, POLICY) == 65.0
    again = record_refused(record_retry(refused), now=65.0, error="unauthorized: 401")
    assert again.failed_retries == 1 and retry_due(again, POLICY) == 185.0


def test_the_longest_cool_down_is_never_shorter_than_the_first() -> None:
    short_cap = RestartPolicy(max_attempts=1, retry_failed_after_s=60.0, retry_failed_max_s=10.0)
    h, _ = _fail_retries(_parked(short_cap), 5, short_cap)
    assert retry_cool_down_s(h, short_cap) == 60.0
    # Failed retries counted past where 2.0 ** n overflows: the cap, no error.
    assert retry_cool_down_s(Health(failed_retries=5000), POLICY) == 3600.0
    assert backoff_delay(5000, POLICY) == POLICY.max_delay_s


def test_a_retry_that_starts_and_answers_ends_the_parking() -> None:
    h = record_started(record_retry(_parked()))
    assert h.state is ProviderState.READY
    # Started, not yet proven: one more failure parks it again, with no backoff ladder.
    again = record_failure(h, now=100.0, error="x", policy=POLICY)
    assert again.state is ProviderState.FAILED
    served = record_leg(h, "ok")
    assert served.consecutive_failures == 0 and not is_parked(served, POLICY)
    crashed = record_failure(served, now=100.0, error="x", policy=POLICY)
    assert crashed.state is ProviderState.CRASHED  # a fresh streak: backoff, not parking
    assert decide_start(crashed, alive=False, now=100.0, policy=POLICY).action is StartAction.WAIT


def test_a_zero_cool_down_never_retries_on_its_own() -> None:
    off = RestartPolicy(base_delay_s=0.1, max_delay_s=1.0, max_attempts=4, retry_failed_after_s=0)
    h = _parked(off)
    assert retry_due(h, off) is None
    d = decide_parked(h, now=1e12, policy=off)
    assert d.action is StartAction.GIVE_UP and d.delay_s == float("inf")


def test_the_cool_down_is_one_minute_by_default() -> None:
    assert RestartPolicy().retry_failed_after_s == 60.0


def test_a_provider_that_is_not_parked_has_no_retry() -> None:
    for h in (Health(), record_failure(Health(), now=0, error="x", policy=POLICY)):
        assert not is_parked(h, POLICY) and retry_due(h, POLICY) is None


def test_a_restart_request_clears_the_failures_and_starts_at_once_keeping_the_counters() -> None:
    backing_off = record_failure(record_started(Health()), now=5.0, error="x", policy=POLICY)
    running = record_leg(record_started(Health()), "ok")
    never = Health()
    for h in (_parked(), backing_off, running, never):
        after = record_restart_requested(h)
        assert (after.consecutive_failures, after.failed_at, after.consecutive_timeouts) == (
            0,
            None,
            0,
        )
        assert not is_parked(after, POLICY)
        assert decide_start(after, alive=False, now=5.0, policy=POLICY).action is StartAction.START
        kept = ("starts", "restarts", "legs", "ok", "crashes", "last_failure", "retries")
        assert [getattr(after, k) for k in kept] == [getattr(h, k) for k in kept]
        assert after.restarts_requested == h.restarts_requested + 1
    assert record_restart_requested(never).state is ProviderState.IDLE
    assert record_restart_requested(_parked()).state is ProviderState.IDLE  # never started
    ran = _parked(at=3.0)
    ran = record_failure(record_started(ran), now=4.0, error="x", policy=POLICY)
    assert record_restart_requested(ran).state is ProviderState.CRASHED
    assert record_restart_requested(running).state is ProviderState.READY


def test_new_counters_survive_every_leg_and_reach_the_wire() -> None:
    h = record_restart_requested(record_retry(_parked()))
    for status in ("ok", "timeout", "error", "crashed"):
        h = record_leg(h, status)
    assert (h.retries, h.restarts_requested) == (1, 1)
    wire = h.to_wire()
    assert (wire["retries"], wire["restarts_requested"]) == (1, 1)


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
        assert d.action is StartAction.GIVE_UP  # the cool-down counts from this failure
        # Each failure past the attempts was a retry's: 60 s, doubled for each, at most 1 h.
        cool = min(60.0 * 2 ** (failures - POLICY.max_attempts), 3600.0)
        assert retry_cool_down_s(h, POLICY) == cool
        # (t + cool) - t is cool to within float rounding, never more (the code clamps).
        assert d.delay_s == pytest.approx(cool, rel=1e-12)
        assert d.delay_s <= cool
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


def test_a_late_reply_ends_the_run_of_misses_so_a_slow_provider_is_never_hung() -> None:
    h = record_started(Health())
    for _ in range(2):
        h = record_leg(h, "timeout")
    # A reply to a given-up leg came since: the process answers, late; this miss is
    # the first of a new run, and a miss after each late reply never makes it hung.
    h = record_leg(h, "timeout", late=1)
    assert (h.consecutive_timeouts, h.late_replies, h.timeouts) == (1, 1, 3)
    for _ in range(10):
        h = record_leg(h, "timeout", late=1)
        assert not is_hung(h, HUNG)
    assert h.late_replies == 11 and h.to_wire()["late_replies"] == 11
    # With no reply at all, late or not, the misses add up as before.
    for _ in range(2):
        h = record_leg(h, "timeout")
    assert is_hung(h, HUNG)


def test_legs_out_together_that_time_out_together_are_one_miss() -> None:
    h = record_started(Health())
    # A burst: five legs sent before any timed out (each read the same mark).
    sent = h.timeout_mark
    for _ in range(5):
        h = record_leg(h, "timeout", sent_mark=sent)
        assert not is_hung(h, HUNG)
    assert (h.consecutive_timeouts, h.timeouts) == (1, 5)
    # Requests each sent after the one before it timed out: misses in a row, hung.
    for n in (2, 3):
        h = record_leg(h, "timeout", sent_mark=h.timeout_mark)
        assert h.consecutive_timeouts == n
    assert is_hung(h, HUNG)
    # An answer ends the run; a leg that was out across it is the first of a new one.
    out_across = h.timeout_mark
    h = record_leg(h, "ok")
    h = record_leg(h, "timeout", sent_mark=out_across)
    assert h.consecutive_timeouts == 1 and not is_hung(h, HUNG)


def test_only_a_ready_provider_is_hung_and_zero_turns_the_check_off() -> None:
    h = Health(state=ProviderState.READY, consecutive_timeouts=5)
    assert is_hung(h, HUNG)
    assert not is_hung(h, RestartPolicy(max_consecutive_timeouts=0))
    for state in (ProviderState.CRASHED, ProviderState.FAILED, ProviderState.IDLE):
        assert not is_hung(Health(state=state, consecutive_timeouts=5), HUNG)
    # The restart a hung provider earns is a failure like a crash, and clears the streak.
    after = record_failure(h, now=1.0, error="hung", policy=HUNG)
    assert after.consecutive_timeouts == 0 and after.consecutive_failures == 1


@given(st.integers(0, 50))
def test_a_provider_with_no_process_is_never_hung(timeouts: int) -> None:
    # A remote provider: no process to replace, and a new handshake with the same slow
    # server only costs the next request its wait; its legs time out as they do.
    h = Health(state=ProviderState.READY, consecutive_timeouts=timeouts)
    assert not is_hung(h, HUNG, has_process=False)
    assert is_hung(h, HUNG) is (timeouts >= HUNG.max_consecutive_timeouts)


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


def test_a_leg_that_never_ran_is_counted_as_neither_a_failure_nor_an_answer() -> None:
    """A crash loop's leg (``crashed``, code ``restarting``, answered at once while the
    restart runs behind): a leg and its message, no crash, no failing leg, no answer
    (its failures in a row and its missed deadlines stand)."""
    policy = RestartPolicy(max_consecutive_timeouts=2)
    health = record_started(Health())
    health = record_leg(health, "timeout")
    for _ in range(2):
        health = record_failure(health, now=0.0, error="crashed: exited", policy=policy)
    before = health
    for _ in range(5):
        health = record_leg(health, "crashed", error="provider restarting …", ran=False)
    assert health.legs == before.legs + 5 and health.last_error == "provider restarting …"
    told = {"legs", "last_error"}  # every other figure as it was
    assert {k: v for k, v in health.to_wire().items() if k not in told} == {
        k: v for k, v in before.to_wire().items() if k not in told
    }


_EVENTS = st.lists(
    st.tuples(
        st.sampled_from(["fail", "start", "ok", "error", "timeout", "restart"]),
        st.floats(min_value=0, max_value=200, allow_nan=False),
    ),
    max_size=40,
)


@given(
    events=_EVENTS,
    cool_down=st.sampled_from([0.0, 0.5, 60.0]),
    cap=st.sampled_from([0.0, 2.0, 3600.0]),
    attempts=st.integers(min_value=1, max_value=6),
)
def test_a_parked_provider_is_retried_exactly_when_its_cool_down_has_passed(
    events: list[tuple[str, float]], cool_down: float, cap: float, attempts: int
) -> None:
    policy = RestartPolicy(
        base_delay_s=0.1,
        max_delay_s=1.0,
        max_attempts=attempts,
        retry_failed_after_s=cool_down,
        retry_failed_max_s=cap,
    )
    h, now, failed_retries = Health(), 0.0, 0
    for event, step in events:
        now += step
        if event == "fail":
            # A failure while parked is its retry's: the next cool-down doubles.
            failed_retries += h.state is ProviderState.FAILED
            h = record_failure(h, now=now, error="x", policy=policy)
        elif event == "start":
            failed_retries = 0
            h = record_started(h)
        elif event == "restart":
            failed_retries = 0
            h = record_restart_requested(h)
        else:
            h = record_leg(h, event)
        d = decide_start(h, alive=False, now=now, policy=policy)
        parked = h.state is ProviderState.FAILED or h.consecutive_failures >= attempts
        assert is_parked(h, policy) is parked
        if not parked:
            assert d.action is not StartAction.GIVE_UP
            assert d.delay_s <= policy.max_delay_s
            continue
        # Parked: never waited on by a leg; started again only after a whole cool-down.
        assert d.action in (StartAction.GIVE_UP, StartAction.START)
        assert h.failed_at is not None
        due = h.failed_at + min(cool_down * 2**failed_retries, max(cap, cool_down))
        if cool_down == 0:
            assert d.action is StartAction.GIVE_UP and d.delay_s == float("inf")
        elif now >= due:
            assert d.action is StartAction.START
        else:
            assert d.action is StartAction.GIVE_UP and abs(d.delay_s - (due - now)) < 1e-6
        if event == "restart":
            raise AssertionError("a restart request never leaves the provider parked")


def test_after_a_start_outlives_its_deadline_no_request_waits_for_the_next() -> None:
    fresh = Health()
    assert awaits_start(fresh)
    stuck = record_failure(fresh, now=1.0, error="timeout", policy=POLICY, start_timed_out=True)
    assert not awaits_start(stuck)
    # Its next starts follow the same backoff and parking as any failure.
    assert decide_start(stuck, alive=False, now=1.0, policy=POLICY).action is StartAction.WAIT
    assert decide_start(stuck, alive=False, now=1.2, policy=POLICY).action is StartAction.START
    assert not awaits_start(record_leg(stuck, "crashed", error="not waited for"))
    # A start that succeeds, a crash of another kind, or a restart asked for: waited again.
    assert awaits_start(record_started(stuck))
    assert awaits_start(record_failure(stuck, now=2.0, error="crashed", policy=POLICY))
    assert awaits_start(record_restart_requested(stuck))
    assert stuck.to_wire()["start_timed_out"] is True


def test_the_last_failure_keeps_its_time_after_a_recovery() -> None:
    crashed = record_failure(
        record_started(Health()), now=100.0, error="exited with status 3", policy=POLICY
    )
    assert crashed.to_wire(now=112.34)["last_failure_s_ago"] == 12.3
    healed = record_leg(record_started(crashed), "ok")
    wire = healed.to_wire(now=700.0)
    # History, and how old it is: a reader tells it from a fresh failure.
    assert wire["state"] == "ready" and wire["last_failure"] == "exited with status 3"
    assert wire["last_failure_s_ago"] == 600.0
    assert Health().to_wire(now=5.0)["last_failure_s_ago"] is None
    assert crashed.to_wire()["last_failure_s_ago"] is None  # no clock given: no age


def test_failing_legs_counts_failed_queries_in_a_row_until_one_is_ok() -> None:
    health = Health(state=ProviderState.READY)
    for status in ("error", "quarantined", "timeout", "warming", "no_consent", "crashed"):
        health = record_leg(health, status, error=f"{status}: why")
    # warming and no_consent are no query failures: they neither count nor reset it
    assert health.failing_legs == 4 and health.to_wire()["failing_legs"] == 4
    assert record_leg(health, "ok").failing_legs == 0


def test_partial_legs_counts_short_answers_in_a_row_until_a_whole_one() -> None:
    health = Health(state=ProviderState.READY)
    lost = "1 of 2 tools gave no results: always_fails (isError)"
    for status in ("ok", "timeout", "ok", "warming", "ok"):
        health = record_leg(health, status, lost=lost if status == "ok" else None)
    # An answer that was not an answer (a timeout, a warm-up) neither counts nor resets it.
    assert health.partial_legs == 3 and health.to_wire()["partial_legs"] == 3
    assert health.last_error == lost and health.failing_legs == 0
    assert record_leg(health, "ok").partial_legs == 0
    # Only an ok leg can be short: a failed one's ``lost`` is no answer's loss.
    assert record_leg(Health(), "error", error="e", lost=lost).partial_legs == 0


def test_invalid_legs_counts_answers_whose_frames_were_all_refused_until_another() -> None:
    health = Health(state=ProviderState.READY)
    why = "invalid_frame 2 of 2 (schema frames[0].title: missing)"
    for status in ("ok", "timeout", "ok", "warming", "ok"):
        health = record_leg(health, status, invalid=why if status == "ok" else None)
    # A leg that is no answer (a timeout, a warm-up) neither counts nor resets it, and an
    # answer is no failed query: the provider is up, yet nothing it offers is usable.
    assert health.invalid_legs == 3 and health.to_wire()["invalid_legs"] == 3
    assert health.last_error == why and health.failing_legs == 0
    assert record_leg(health, "ok").invalid_legs == 0  # a later good answer clears it
    # Only an answer's frames can be refused.
    assert record_leg(Health(), "error", error="e", invalid=why).invalid_legs == 0


def test_invalid_legs_told_after_verification_count_as_those_told_at_once() -> None:
    # A leg counted before its frames are verified leaves the run as it was; what
    # verification leaves of them decides it (record_refusals), as ``invalid`` does.
    why = "digest_mismatch 2 of 2"
    health = record_leg(Health(state=ProviderState.READY), "ok", invalid=why)
    health = record_leg(health, "ok", refusals_later=True)
    assert health.invalid_legs == 1  # neither counted nor ended yet
    health = record_refusals(health, why)
    assert (health.invalid_legs, health.last_error) == (2, why)
    health = record_leg(health, "ok", refusals_later=True)
    assert record_refusals(health, None).invalid_legs == 0  # a usable frame ends the run


def test_found_nothing_is_the_last_answers_emptiness_until_one_gives_a_frame() -> None:
    health = Health(state=ProviderState.READY)
    empty = "none of its 3 resources matched the goal"
    health = record_leg(health, "ok", empty=empty)
    # A leg that is no answer (a failure, a warm-up) says nothing of what it would find.
    for status in ("error", "timeout", "warming"):
        health = record_leg(health, status, error="e", empty="other")
    assert health.found_nothing == empty and health.to_wire()["found_nothing"] == empty
    assert record_leg(health, "ok").found_nothing is None
    long = record_leg(health, "ok", empty="x" * 10_000).found_nothing
    assert long is not None and len(long) == MAX_ERROR_CHARS


def test_a_command_that_cannot_run_is_parked_at_its_first_failure() -> None:
    # Not found, not executable: a restart would meet the same error, so the next
    # requests do not start it again one by one; its cool-down or a restart does.
    h = record_failure(Health(), now=5.0, error="x", policy=POLICY, cannot_run=True)
    assert h.state is ProviderState.FAILED and is_parked(h, POLICY)
    d = decide_start(h, alive=False, now=5.0, policy=POLICY)
    assert d.action is StartAction.GIVE_UP and d.delay_s == POLICY.retry_failed_after_s
    assert decide_start(h, alive=False, now=65.0, policy=POLICY).action is StartAction.START
    # Fixed and run: one that then crashes starts a fresh streak, with its backoff.
    served = record_leg(record_started(record_retry(h)), "ok")
    crashed = record_failure(served, now=70.0, error="x", policy=POLICY)
    assert crashed.state is ProviderState.CRASHED


def test_only_a_provider_that_failed_again_since_its_restart_restarts_behind() -> None:
    assert not restarts_behind(Health(), POLICY)  # a first start is waited for
    crashed = record_failure(Health(starts=1), now=1.0, error="crashed: exit 3", policy=POLICY)
    assert not restarts_behind(crashed, POLICY)  # a first failure's restart: waited for
    again = record_failure(record_started(crashed), now=2.0, error="crashed", policy=POLICY)
    assert restarts_behind(again, POLICY)  # restarted, crashed again before any answer
    failed_start = record_failure(crashed, now=2.0, error="start failed", policy=POLICY)
    assert restarts_behind(failed_start, POLICY)  # its restart failed: a loop too
    assert restarts_behind(record_started(again), POLICY)  # up, not answered yet
    answered = record_leg(record_started(again), "ok")
    assert not restarts_behind(answered, POLICY)  # an answer ends the loop
    crashed_after = record_failure(answered, now=3.0, error="crashed", policy=POLICY)
    assert not restarts_behind(crashed_after, POLICY)  # a first failure since: waited
    assert not restarts_behind(record_restart_requested(again), POLICY)  # asked for
    # Parked: its legs fail at once, and the one start after a cool-down is waited for.
    parked = again
    while not is_parked(parked, POLICY):
        parked = record_failure(parked, now=4.0, error="crashed", policy=POLICY)
    assert not restarts_behind(parked, POLICY)
    # A start that outlived its deadline keeps its own rule (awaits_start).
    stuck = record_failure(crashed, now=2.0, error="t", policy=POLICY, start_timed_out=True)
    assert not restarts_behind(stuck, POLICY) and not awaits_start(stuck)


def test_a_provider_down_starts_on_its_own_only_once_its_backoff_has_passed() -> None:
    # Not down: never started, running, or stopped by the host: nothing to start.
    assert idle_restart_in(Health(), now=0.0, policy=POLICY) is None
    up = record_started(Health())
    assert idle_restart_in(up, now=0.0, policy=POLICY) is None
    stopped = Health(state=ProviderState.STOPPED, starts=1)
    assert idle_restart_in(stopped, now=0.0, policy=POLICY) is None
    # Crashed while idle: after its backoff, as a request would start it.
    crashed = record_failure(up, now=10.0, error="crashed", policy=POLICY)
    assert idle_restart_in(crashed, now=10.0, policy=POLICY) == pytest.approx(0.1)
    assert idle_restart_in(crashed, now=10.05, policy=POLICY) == pytest.approx(0.05)
    assert idle_restart_in(crashed, now=10.1, policy=POLICY) == 0.0


def test_a_parked_provider_starts_on_its_own_only_after_its_cool_down() -> None:
    parked = _parked(at=3.0)
    cool = POLICY.retry_failed_after_s
    assert idle_restart_in(parked, now=3.0, policy=POLICY) == pytest.approx(cool)
    assert idle_restart_in(parked, now=3.0 + cool, policy=POLICY) == 0.0
    # The cool-down off: only providers/restart starts it, never on its own.
    off = RestartPolicy(base_delay_s=0.1, max_delay_s=1.0, max_attempts=4, retry_failed_after_s=0)
    assert idle_restart_in(_parked(off), now=1e9, policy=off) is None
    # A refused credential is parked as well: tried again after its cool-down only.
    refused = record_refused(record_started(Health()), now=5.0, error="unauthorized: 401")
    assert idle_restart_in(refused, now=5.0, policy=POLICY) == pytest.approx(cool)


@given(
    failures=st.integers(min_value=1, max_value=12),
    elapsed=st.floats(min_value=0.0, max_value=200.0, allow_nan=False),
)
def test_no_start_on_its_own_comes_sooner_than_a_request_could_begin_one(
    failures: int, elapsed: float
) -> None:
    h = record_started(Health())
    for i in range(failures):
        h = record_failure(h, now=100.0 + i * 1e-3, error="crashed", policy=POLICY)
    assert h.failed_at is not None
    now = h.failed_at + elapsed
    wait = idle_restart_in(h, now=now, policy=POLICY)
    decision = decide_start(h, alive=False, now=now, policy=POLICY)
    assert wait is not None  # the cool-down is on: a parked one is retried too
    assert (wait == 0.0) == (decision.action is StartAction.START)
    if decision.action is not StartAction.START:
        assert wait == pytest.approx(decision.delay_s)


@given(st.text(max_size=3000), st.integers(1, 20))
def test_the_stderr_tail_is_the_last_failures_and_stays_bounded(tail: str, rounds: int) -> None:
    h = Health()
    for i in range(rounds):
        said = f"{tail} {h.stderr_tail} {i}"
        h = record_failure(h, now=float(i), error="x", policy=POLICY, stderr_tail=said)
        h = record_leg(record_leg(h, "crashed", error="y"), "ok")
        assert h.stderr_tail is not None and len(h.stderr_tail) <= MAX_STDERR_TAIL_CHARS
        assert h.stderr_tail.endswith(f" {i}")  # this failure's, by its end
        assert h.to_wire()["stderr_tail"] == h.stderr_tail


def test_a_failure_with_no_stderr_clears_the_last_ones_tail() -> None:
    h = record_failure(Health(), now=0.0, error="crashed: x", policy=POLICY, stderr_tail="a | b")
    assert record_failure(h, now=1.0, error="hung", policy=POLICY).stderr_tail is None
    assert record_refused(h, now=1.0, error="unauthorized: x").stderr_tail is None
    assert record_started(h).stderr_tail == "a | b"  # kept with last_failure, as history


# -- a remote server that was not reached: checked on a short backoff, never parked ------


def _unreached(failures: int, policy: RestartPolicy = POLICY) -> Health:
    h = record_started(Health())
    for i in range(failures):
        h = record_failure(
            h, now=100.0 + i, error="transport: ConnectError", policy=policy, unreachable=True
        )
    return h


def test_a_remote_server_not_reached_is_never_parked_however_often() -> None:
    h = _unreached(POLICY.max_attempts * 10)
    assert h.state is ProviderState.CRASHED and not is_parked(h, POLICY)
    assert h.consecutive_failures == POLICY.max_attempts * 10
    assert h.failed_at is not None
    due = h.failed_at + check_delay(h.consecutive_failures, POLICY)
    assert decide_start(h, alive=False, now=due, policy=POLICY).action is StartAction.START
    assert idle_restart_in(h, now=due, policy=POLICY) == 0.0


def test_the_checks_of_a_server_not_reached_double_twice_then_hold() -> None:
    assert [check_delay(n, RestartPolicy()) for n in range(7)] == [0, 0.5, 1, 2, 2, 2, 2]
    # never a busy loop, even when a local process is restarted at once
    assert check_delay(9, RestartPolicy(base_delay_s=0.0)) == pytest.approx(0.4)
    # never past max_delay_s, unless the base itself is
    assert check_delay(9, RestartPolicy(base_delay_s=2.0, max_delay_s=5.0)) == 5.0
    assert check_delay(9, RestartPolicy(base_delay_s=8.0, max_delay_s=5.0)) == 8.0


@given(st.integers(1, 500))
def test_a_check_waits_no_longer_than_its_cap(failures: int) -> None:
    h = _unreached(failures)
    assert h.failed_at is not None
    decision = decide_start(h, alive=False, now=h.failed_at, policy=POLICY)
    assert decision.action is StartAction.WAIT
    assert decision.delay_s <= 4 * POLICY.base_delay_s + 1e-9


def test_no_request_waits_for_a_check_of_a_server_not_reached() -> None:
    assert awaits_start(record_started(Health()))
    # Its first failure included: a request would spend a backoff and maybe a
    # handshake's deadline on a server that was just found down.
    assert not awaits_start(_unreached(1))
    assert not awaits_start(_unreached(2))
    assert not restarts_behind(_unreached(3), POLICY)  # down, not a crash loop
    assert awaits_start(record_started(_unreached(3)))
    assert awaits_start(record_restart_requested(_unreached(3)))
    assert not record_restart_requested(_unreached(3)).unreachable


def test_a_server_that_answers_wrongly_after_an_outage_follows_the_usual_attempts() -> None:
    h = record_failure(_unreached(2), now=200.0, error="wire: bad body", policy=POLICY)
    assert not h.unreachable and h.state is ProviderState.CRASHED
    h = record_failure(h, now=201.0, error="wire: bad body", policy=POLICY)
    assert h.state is ProviderState.FAILED and is_parked(h, POLICY)


def test_a_local_providers_failures_still_park_it() -> None:
    h = record_started(Health())
    for i in range(POLICY.max_attempts):
        h = record_failure(h, now=float(i), error="crashed", policy=POLICY)
    assert h.state is ProviderState.FAILED and not h.unreachable


def test_a_server_not_reached_is_due_for_its_check_after_check_delay() -> None:
    h = _unreached(3)
    assert h.failed_at is not None
    assert check_due(h, POLICY) == h.failed_at + check_delay(3, POLICY)
    assert check_due(record_started(h), POLICY) is None  # up: nothing to check
    assert check_due(Health(), POLICY) is None
    crashed = record_failure(record_started(Health()), now=5.0, error="crashed", policy=POLICY)
    assert check_due(crashed, POLICY) is None  # a local crash: a restart, not a check


# -- a server's certificate that failed verification: parked, checked each cool-down ------

CERT = "certificate: not trusted (…; CERTIFICATE_VERIFY_FAILED): set ca_file"


def test_a_certificate_failure_parks_at_once_counting_no_failure() -> None:
    h = record_untrusted(record_started(Health()), now=10.0, error=CERT)
    assert h.state is ProviderState.FAILED and is_parked(h, POLICY)
    assert (h.untrusted, h.unreachable, h.consecutive_failures) == (True, False, 0)
    assert h.last_failure == CERT
    assert check_due(h, POLICY) is None  # parked: its retry, not a check on a backoff
    # No request starts it before its cool-down: a check now would meet the same
    # certificate.
    decision = decide_start(h, alive=False, now=11.0, policy=POLICY)
    assert decision.action is StartAction.GIVE_UP
    assert decision.delay_s == pytest.approx(POLICY.retry_failed_after_s - 1.0)
    due = 10.0 + POLICY.retry_failed_after_s
    assert decide_start(h, alive=False, now=due, policy=POLICY).action is StartAction.START


def test_a_certificate_checked_again_and_failing_keeps_the_first_cool_down() -> None:
    """A renewed certificate is taken within one cool-down however long it was wrong:
    its retries do not double as a crashed provider's do."""
    h = record_untrusted(record_started(Health()), now=0.0, error=CERT)
    for i in range(1, 10):
        h = record_untrusted(record_retry(h), now=float(i) * 60, error=CERT)
        assert retry_cool_down_s(h, POLICY) == POLICY.retry_failed_after_s
    assert h.retries == 9 and h.consecutive_failures == 0


def test_a_certificate_failure_is_forgotten_by_a_start_a_restart_or_another_failure() -> None:
    h = record_untrusted(record_started(Health()), now=0.0, error=CERT)
    assert not record_started(h).untrusted
    assert not record_restart_requested(h).untrusted
    assert not record_failure(h, now=1.0, error="x", policy=POLICY).untrusted
    assert not record_refused(h, now=1.0, error="unauthorized: x").untrusted
    assert record_leg(h, "crashed", error="y").untrusted
