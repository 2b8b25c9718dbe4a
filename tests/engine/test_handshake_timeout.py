"""A child provider whose handshake gets no reply is told the usual causes.

Its reply waits in a stdout buffer never flushed, or its set-up runs before it answers
(``hostd._hints.NO_HANDSHAKE``): said by the timeout itself, so the leg, the status and
the log event carry it, once, and the compose summary does not say it twice (a remote
provider's timeout says what to check instead: tests/remote/test_handshake_timeout.py);
what its stderr ended with is a field of its own (``stderr_tail``), beside them.
Against a real child that reads its handshake and never answers it: the start deadline
always runs out, however fast the machine is.
"""

from __future__ import annotations

import anyio
import pytest
import structlog

from hostd._hints import NO_HANDSHAKE
from hostd.cli._outcome import leg_failures
from hostd.engine import MAX_ERROR_CHARS, Host, LegStatus
from hostd.errors import MAX_STDERR_TAIL_CHARS
from tests.engine._helpers import adversary, query

pytestmark = pytest.mark.anyio

_MISSED = f"no handshake reply within 500 ms; {NO_HANDSHAKE}"


async def test_a_child_handshake_never_answered_says_its_usual_causes() -> None:
    spec = adversary("slow_handshake", "silent", start_timeout_s=0.5)
    with anyio.fail_after(60), structlog.testing.capture_logs() as logs:  # a hang guard
        async with Host([spec], grace_period_s=1.0) as host:
            fan = await host.query_all(query(), 1000)
            (row,) = host.providers_list()
    report = fan.reports[spec.id]
    assert (report.status, report.error_code) == (LegStatus.TIMEOUT, "handshake_timeout")
    assert report.error_message == _MISSED
    assert row["health"]["last_failure"] == f"timeout: {_MISSED}"  # what status shows
    (failed,) = [e for e in logs if e["event"] == "provider.start.failed"]
    assert failed["error"] == _MISSED
    (line,) = leg_failures({"providers": [report.to_wire()], "prompt": ""})
    assert line == (
        f"  {spec.id}: timeout: {_MISSED}; if it is only slow, raise its [[provider]] "
        "start_timeout_s"
    )


async def test_a_long_stderr_goes_in_its_own_field_and_the_causes_stay_whole() -> None:
    # The causes, whole, are the text; what its stderr ended with (where its error is)
    # is its own field, in the leg, its health (what `hostd providers` shows) and the
    # log events: none of it squeezed in after the causes.
    spec = adversary("noisy_slow_handshake", "noisy", start_timeout_s=0.5)
    with anyio.fail_after(60), structlog.testing.capture_logs() as logs:  # a hang guard
        async with Host([spec], grace_period_s=1.0) as host:
            fan = await host.query_all(query(), 1000)
            (row,) = host.providers_list()
    report = fan.reports[spec.id]
    assert report.error_message == _MISSED
    tail = report.stderr_tail or ""
    assert tail.startswith("loading part 0 of the index"), tail  # all of it fits
    assert tail.endswith(" | IndexLocked: the index is locked"), tail
    assert len(tail) <= MAX_STDERR_TAIL_CHARS
    assert report.to_wire()["error"] == {
        "code": "handshake_timeout",
        "message": _MISSED,
        "stderr_tail": tail,
    }
    health = row["health"]
    assert (health["last_failure"], health["stderr_tail"]) == (f"timeout: {_MISSED}", tail)
    assert len(health["last_failure"]) <= MAX_ERROR_CHARS
    (failed,) = [e for e in logs if e["event"] == "provider.start.failed"]
    assert (failed["error"], failed["stderr_tail"]) == (_MISSED, tail)
    (leg,) = [e for e in logs if e["event"] == "provider.leg.failed"]
    assert (leg["message"], leg["stderr_tail"]) == (_MISSED, tail)


async def test_a_silent_provider_has_no_stderr_tail() -> None:
    spec = adversary("slow_handshake", "silent", start_timeout_s=0.5)
    with anyio.fail_after(60):  # a hang guard
        async with Host([spec], grace_period_s=1.0) as host:
            fan = await host.query_all(query(), 1000)
            (row,) = host.providers_list()
    assert fan.reports[spec.id].stderr_tail is None
    assert "stderr_tail" not in fan.reports[spec.id].to_wire()["error"]
    assert row["health"]["stderr_tail"] is None
