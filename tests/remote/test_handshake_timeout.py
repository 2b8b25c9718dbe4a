"""A remote provider whose handshake gets no reply at all is told what to check.

A child's handshake that times out is told its usual causes (a reply never flushed,
set-up before the handshake); a remote provider has no pipe, so its timeout names what
to check instead (the url answers, TLS, the token, a proxy): in the leg, the status, the
log event and the compose summary, never a credential nor anything the peer sent. Against
a real loopback HTTPS server that reads the handshake and never answers it: the start
deadline always runs out, however fast the machine is.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import structlog

from hostd._hints import NO_HANDSHAKE, NO_REMOTE_HANDSHAKE
from hostd.cli._outcome import leg_failures
from hostd.engine import Host, LegStatus, bounded_error
from tests.engine._helpers import query
from tests.remote._servers import TOKEN, consented, make_tls, remote_spec, serving, silent

pytestmark = pytest.mark.anyio

#: The server read the request: the handshake stalled waiting for its response head.
_STALLED = "stalled waiting for the response head, the request sent (ReadTimeout)"
_MISSED = f"no handshake reply within 500 ms: {_STALLED}; {NO_REMOTE_HANDSHAKE}"


@pytest.fixture(autouse=True)
def _token(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HOSTD_TEST_REMOTE_TOKEN", TOKEN)


async def test_a_remote_handshake_never_answered_says_what_to_check(tmp_path: Path) -> None:
    tls = make_tls(tmp_path)
    async with serving(silent, tls) as (url, rec):
        spec = remote_spec(url, tls, start_timeout_s=0.5)
        with structlog.testing.capture_logs() as logs:
            async with Host([spec], consent=consented(tmp_path, spec.id)) as host:
                fan = await host.query_all(query(), 1000)
                (row,) = host.providers_list()
    report = fan.reports[spec.id]
    assert rec.kinds() == ["handshake"]  # it reached the server, which never answered
    assert (report.status, report.error_code) == (LegStatus.TIMEOUT, "handshake_timeout")
    assert report.error_message == _MISSED
    assert row["health"]["last_failure"] == f"timeout: {_MISSED}"  # what status shows
    (failed,) = [e for e in logs if e["event"] == "provider.start.failed"]
    assert failed["error"] == _MISSED
    # The compose summary gives it as it is: a pipe's causes would send the reader after
    # a stdout buffer the provider does not have.
    (line,) = leg_failures({"providers": [report.to_wire()], "prompt": ""})
    assert NO_HANDSHAKE not in line
    assert line == (
        f"  {spec.id}: timeout: {_MISSED}; if it is only slow, raise its [[provider]] "
        "start_timeout_s"
    )
    shown = f"{report.error_message} {row} {logs}"
    assert TOKEN not in shown and "Bearer" not in shown


async def test_a_leg_not_waiting_for_the_next_check_says_the_timeout_that_put_it_down(
    tmp_path: Path,
) -> None:
    """The handshake timed out, so the server is checked again behind the requests and
    none waits for it: the next leg fails at once with the code of what the check found
    (``handshake_timeout``), not a ``crashed`` of a process that does not exist, and says
    when the next check comes. The health clock is the test's: the check is not due."""
    tls = make_tls(tmp_path)
    clock = [100.0]
    async with serving(silent, tls) as (url, rec):
        spec = remote_spec(url, tls, start_timeout_s=0.5)
        async with Host(
            [spec], consent=consented(tmp_path, spec.id), health_clock=lambda: clock[0]
        ) as host:
            first = (await host.query_all(query(), 1000)).reports[spec.id]
            again = (await host.query_all(query(), 1000)).reports[spec.id]
    assert rec.kinds() == ["handshake"]  # the second leg did not wait for a check
    assert (first.status, first.error_code) == (LegStatus.TIMEOUT, "handshake_timeout")
    assert (again.status, again.error_code) == (LegStatus.TIMEOUT, "handshake_timeout")
    assert again.error_message == (
        f"not waited for: its last check timed out waiting for the reply (timeout: {_MISSED}); "
        "the next check in 500 ms"
    )


async def test_legs_not_waiting_for_the_next_check_are_no_missed_deadlines_of_its_own(
    tmp_path: Path,
) -> None:
    """A server whose handshake timed out is down until its next check: the legs that
    meet it meanwhile fail at once, never sent, so none is one more missed deadline
    (``timeouts``, ``consecutive_timeouts``: what ``is_hung`` reads) nor one more failing
    leg; each is counted as a leg, its message kept. The health clock is the test's: the
    check is never due."""
    tls = make_tls(tmp_path)
    clock = [100.0]
    async with serving(silent, tls) as (url, rec):
        spec = remote_spec(url, tls, start_timeout_s=0.5)
        async with Host(
            [spec], consent=consented(tmp_path, spec.id), health_clock=lambda: clock[0]
        ) as host:
            first = (await host.query_all(query(), 1000)).reports[spec.id]
            before = host.health(spec.id)
            legs = [(await host.query_all(query(), 1000)).reports[spec.id] for _ in range(4)]
            after = host.health(spec.id)
    assert rec.kinds() == ["handshake"]  # none of those legs reached the server
    assert first.sent and (first.status, first.error_code) == (
        LegStatus.TIMEOUT,
        "handshake_timeout",
    )
    for report in legs:
        assert (report.status, report.error_code) == (LegStatus.TIMEOUT, "handshake_timeout")
        assert not report.sent, report
    # Kept as a health keeps any error: bounded (it quotes the whole handshake timeout).
    assert after.legs == before.legs + 4
    assert after.last_error == bounded_error(legs[-1].error_message or "")
    figures = ("timeouts", "consecutive_timeouts", "failing_legs", "crashes")
    assert {f: getattr(after, f) for f in figures} == {f: getattr(before, f) for f in figures}
    assert after.consecutive_failures == before.consecutive_failures == 1
