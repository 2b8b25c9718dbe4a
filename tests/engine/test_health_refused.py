"""A refused credential in the health decisions: parked at once, no failure counted, no
backoff; started again when the credential changes, after the cool-down, or on a
restart request. Sync functions driven with a fake clock."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from hostd.engine import (
    Health,
    ProviderState,
    RestartPolicy,
    StartAction,
    decide_start,
    record_failure,
    record_leg,
    record_refused,
    record_restart_requested,
    record_started,
    retry_due,
)

POLICY = RestartPolicy(base_delay_s=0.1, max_delay_s=1.0, max_attempts=4)
SAID = "unauthorized: remote provider refused the credential (HTTP 401): check the token in $T"


def _refused(now: float = 10.0) -> Health:
    return record_refused(record_started(Health()), now=now, error=SAID)


def test_a_refusal_parks_at_once_without_counting_a_failure() -> None:
    h = _refused()
    assert (h.state, h.refused, h.consecutive_failures) == (ProviderState.FAILED, True, 0)
    assert (h.last_failure, h.last_error) == (SAID, SAID)
    decision = decide_start(h, alive=False, now=10.001, policy=POLICY)
    # Not the crash backoff (a WAIT of 0.1 s): given up until its cool-down.
    assert decision.action is StartAction.GIVE_UP
    assert decision.delay_s == pytest.approx(POLICY.retry_failed_after_s - 0.001)


def test_a_refused_provider_starts_once_its_cool_down_has_passed() -> None:
    h = _refused(now=10.0)
    assert retry_due(h, POLICY) == 10.0 + POLICY.retry_failed_after_s
    after = decide_start(h, alive=False, now=10.0 + POLICY.retry_failed_after_s, policy=POLICY)
    assert after.action is StartAction.START


def test_a_changed_credential_starts_a_refused_provider_at_once() -> None:
    h = _refused()
    changed = decide_start(h, alive=False, now=10.001, policy=POLICY, credential_changed=True)
    assert changed.action is StartAction.START


def test_a_changed_credential_means_nothing_to_a_provider_parked_by_crashes() -> None:
    h = Health()
    for i in range(POLICY.max_attempts):
        h = record_failure(h, now=10.0, error=str(i), policy=POLICY)
    d = decide_start(h, alive=False, now=10.001, policy=POLICY, credential_changed=True)
    assert d.action is StartAction.GIVE_UP


def test_a_start_a_restart_request_or_a_crash_ends_the_refusal() -> None:
    h = _refused()
    assert record_started(h).refused is False
    assert record_restart_requested(h).refused is False
    assert record_restart_requested(h).state is ProviderState.CRASHED  # started before
    assert record_failure(h, now=11.0, error="x", policy=POLICY).refused is False


def test_legs_counted_while_refused_keep_it_refused() -> None:
    h = _refused()
    for status in ("unauthorized", "timeout", "error"):
        h = record_leg(h, status, error=f"{status}!")
    assert (h.refused, h.state, h.last_failure) == (True, ProviderState.FAILED, SAID)


@given(
    refusals=st.integers(min_value=1, max_value=20),
    crashes=st.integers(min_value=0, max_value=3),
    now=st.floats(min_value=0, max_value=1e6, allow_nan=False),
)
def test_refusals_never_earn_a_backoff_nor_use_up_restart_attempts(
    refusals: int, crashes: int, now: float
) -> None:
    h = Health()
    for i in range(crashes):
        h = record_failure(h, now=now, error=str(i), policy=POLICY)
    for _ in range(refusals):
        h = record_refused(h, now=now, error=SAID)
    assert h.consecutive_failures == crashes
    d = decide_start(h, alive=False, now=now, policy=POLICY)
    assert d.action is StartAction.GIVE_UP  # never WAIT: no backoff loop
    # Each refusal after the first was a retry's: its cool-down doubled, none a backoff.
    assert h.failed_retries == refusals - 1
    assert 0 < d.delay_s <= min(POLICY.retry_failed_after_s * 2 ** (refusals - 1), 3600.0)
