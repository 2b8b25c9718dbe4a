"""Cool-down decisions for a peer asked once per request (a rerank server): sync
functions driven with a fake clock, no I/O."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from hostd.engine import (
    MAX_ERROR_CHARS,
    CoolDownPolicy,
    Health,
    ProviderState,
    StartAction,
    ask_cool_down_s,
    cool_down_s,
    decide_ask,
    failure_text,
    record_answer,
    record_down,
    record_retry,
)

POLICY = CoolDownPolicy(after=3, base_s=2.0, max_s=30.0)


def _down(h: Health, now: float, times: int = 1, status: str = "timeout") -> Health:
    for _ in range(times):
        h = record_down(h, status, now=now, error=f"{status}: no verdict", policy=POLICY)
    return h


def test_a_peer_never_asked_or_failing_below_the_threshold_is_asked() -> None:
    assert decide_ask(Health(), now=0.0, policy=POLICY).action is StartAction.USE
    h = _down(Health(), now=5.0, times=2)
    assert (h.state, h.consecutive_failures) == (ProviderState.CRASHED, 2)
    assert decide_ask(h, now=5.0, policy=POLICY).action is StartAction.USE


def test_at_the_threshold_it_is_skipped_until_its_cool_down_has_passed() -> None:
    h = _down(Health(), now=10.0, times=3)
    assert h.state is ProviderState.FAILED and h.failed_at == 10.0
    early = decide_ask(h, now=11.5, policy=POLICY)
    assert early.action is StartAction.GIVE_UP and early.delay_s == pytest.approx(0.5)
    assert decide_ask(h, now=12.0, policy=POLICY).action is StartAction.START


def test_each_failed_try_doubles_the_cool_down_up_to_its_cap() -> None:
    assert [cool_down_s(n, POLICY) for n in range(9)] == [0, 0, 0, 2, 4, 8, 16, 30, 30]
    h = _down(Health(), now=0.0, times=3)
    h = _down(record_retry(h), now=2.0)  # the try after the first cool-down failed too
    assert decide_ask(h, now=5.9, policy=POLICY).action is StartAction.GIVE_UP
    assert decide_ask(h, now=6.0, policy=POLICY).action is StartAction.START
    assert h.retries == 1


def test_one_try_at_a_time_once_the_cool_down_has_passed() -> None:
    h = _down(Health(), now=0.0, times=3)
    busy = decide_ask(h, now=100.0, policy=POLICY, probing=True)
    assert (busy.action, busy.delay_s) == (StartAction.GIVE_UP, 0.0)
    # Below the threshold nothing waits for anything: every request asks.
    below = _down(Health(), now=0.0, times=2)
    assert decide_ask(below, now=0.0, policy=POLICY, probing=True).action is StartAction.USE


def test_a_verdict_resets_the_failures_and_an_answer_without_one_keeps_its_cool_down() -> None:
    h = _down(Health(), now=0.0, times=4)
    refused = record_answer(h, "error", error="error: HTTP 401")
    # Reachable (it answered), yet its failures in a row and cool-down stand.
    assert (refused.consecutive_failures, refused.state) == (4, ProviderState.READY)
    assert refused.errors == 1 and refused.last_error == "error: HTTP 401"
    assert decide_ask(refused, now=1.0, policy=POLICY).action is StartAction.GIVE_UP
    ok = record_answer(h)
    assert (ok.consecutive_failures, ok.state, ok.ok) == (0, ProviderState.READY, 1)
    assert decide_ask(ok, now=1.0, policy=POLICY).action is StartAction.USE
    # A first answer makes a never-asked peer ready, verdict or not.
    assert record_answer(Health(), "error", error="x").state is ProviderState.READY


def test_an_answer_to_an_ask_sent_before_a_later_failure_does_not_clear_it() -> None:
    # Asks 1 and 2 are out; 2 finds the server gone, then 1's verdict comes.
    down = record_down(
        Health(), "crashed", now=5.0, error="unavailable: gone", policy=POLICY, ask=2
    )
    assert (down.state, down.down_ask) == (ProviderState.CRASHED, 2)
    for late in (record_answer(down, ask=1), record_answer(down, "error", error="x", ask=1)):
        assert (late.state, late.consecutive_failures) == (ProviderState.CRASHED, 1)
        assert late.last_failure == "unavailable: gone" and late.legs == 2
    assert record_answer(down, ask=1).ok == 1  # counted, as an answer
    # An ask sent after the failure is news: it is back.
    back = record_answer(down, ask=3)
    assert (back.state, back.consecutive_failures) == (ProviderState.READY, 0)
    # An ask that failed earlier in send order than the latest failure keeps its mark.
    earlier = record_down(down, "timeout", now=6.0, error="timeout: x", policy=POLICY, ask=1)
    assert earlier.down_ask == 2
    assert "down_ask" not in down.to_wire()


def test_an_answer_after_no_connection_makes_the_peer_ready_with_the_newest_error() -> None:
    unreachable = _down(Health(), now=0.0, status="crashed")
    assert unreachable.state is ProviderState.CRASHED
    refused = record_answer(unreachable, "error", error="error: HTTP 400: refused")
    assert refused.state is ProviderState.READY
    assert refused.last_error == "error: HTTP 400: refused"
    assert (refused.failing_legs, refused.consecutive_failures) == (2, 1)


def test_failures_are_counted_by_kind_and_the_last_is_kept_bounded() -> None:
    h = Health()
    for status in ("timeout", "crashed", "error"):
        h = record_down(h, status, now=1.0, error=status + "!" * 1000, policy=POLICY)
    assert (h.timeouts, h.crashes, h.errors, h.legs) == (1, 1, 1, 3)
    assert h.last_failure is not None and len(h.last_failure) == MAX_ERROR_CHARS
    assert h.last_failure.startswith("error!") and h.last_error == h.last_failure


def test_a_certificate_failure_cools_down_at_once_for_the_longest_without_growing() -> None:
    error = failure_text("certificate", "certificate not trusted (…): set ca_file")
    assert error == "certificate: not trusted (…): set ca_file"  # the word said once
    h = record_down(Health(), "crashed", now=10.0, error=error, policy=POLICY, untrusted=True)
    assert (h.state, h.untrusted, h.last_failure) == (ProviderState.FAILED, True, error)
    assert ask_cool_down_s(h, POLICY) == POLICY.max_s  # one failure: no answer cures it
    skipped = decide_ask(h, now=11.0, policy=POLICY)
    assert (skipped.action, skipped.delay_s) == (StartAction.GIVE_UP, POLICY.max_s - 1.0)
    assert decide_ask(h, now=10.0 + POLICY.max_s, policy=POLICY).action is StartAction.START
    # Its try fails the same way: the same cool-down again, not a doubled one.
    again = record_down(
        record_retry(h), "crashed", now=50.0, error=error, policy=POLICY, untrusted=True
    )
    assert decide_ask(again, now=51.0, policy=POLICY).delay_s == POLICY.max_s - 1.0
    # An answer is a TLS handshake that passed; a failure of another kind is its own.
    assert not record_answer(again).untrusted
    other = record_down(again, "timeout", now=60.0, error="timeout: x", policy=POLICY)
    assert not other.untrusted
    assert ask_cool_down_s(other, POLICY) == cool_down_s(other.consecutive_failures, POLICY)
    # The cool-down turned off stays off.
    off = CoolDownPolicy(after=0)
    h = record_down(Health(), "crashed", now=0.0, error=error, policy=off, untrusted=True)
    assert decide_ask(h, now=0.0, policy=off).action is StartAction.USE


def test_zero_turns_the_cool_down_off() -> None:
    off = CoolDownPolicy(after=0)
    h = Health()
    for _ in range(50):
        h = record_down(h, "timeout", now=0.0, error="x", policy=off)
    assert h.state is ProviderState.CRASHED
    assert decide_ask(h, now=0.0, policy=off).action is StartAction.USE


_EVENTS = st.lists(
    st.tuples(
        st.sampled_from(["down", "ok", "answer", "retry"]),
        st.floats(min_value=0, max_value=100, allow_nan=False),
    ),
    max_size=60,
)


@given(
    events=_EVENTS,
    after=st.integers(min_value=0, max_value=5),
    base=st.sampled_from([0.5, 1.0, 7.0]),
    cap=st.sampled_from([0.25, 10.0, 600.0]),
    probing=st.booleans(),
)
def test_a_peer_is_skipped_exactly_while_it_cools_down(
    events: list[tuple[str, float]], after: int, base: float, cap: float, probing: bool
) -> None:
    policy = CoolDownPolicy(after=after, base_s=base, max_s=cap)
    h, now, streak, answered = Health(), 0.0, 0, False
    for event, step in events:
        now += step
        if event == "down":
            h = record_down(h, "timeout", now=now, error="timeout: x", policy=policy)
            streak, answered = streak + 1, False
        elif event == "ok":
            h, streak = record_answer(h), 0
        elif event == "answer":
            h, answered = record_answer(h, "error", error="error: HTTP 400"), True
        else:
            h = record_retry(h)
        assert h.consecutive_failures == streak
        d = decide_ask(h, now=now, policy=policy, probing=probing)
        if after == 0 or streak < after:
            assert d.action is StartAction.USE
            continue
        # Cooling down it is ``failed``, until an answer says it is reachable.
        assert h.state is (ProviderState.READY if answered else ProviderState.FAILED)
        assert h.failed_at is not None
        cool = min(base * 2 ** (streak - after), cap)
        assert cool_down_s(streak, policy) == cool
        due = h.failed_at + cool
        if now >= due:
            expected = StartAction.GIVE_UP if probing else StartAction.START
            assert d.action is expected and d.delay_s == 0.0
        else:
            assert d.action is StartAction.GIVE_UP and 0 < d.delay_s <= cool
            assert d.delay_s == pytest.approx(due - now)


@given(st.integers(min_value=0, max_value=10**9))
def test_the_cool_down_is_total_and_capped_however_long_a_peer_stays_down(n: int) -> None:
    assert 0 <= cool_down_s(n, POLICY) <= POLICY.max_s
