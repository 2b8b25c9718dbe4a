"""A provider that accepts its input but never answers the handshake costs one start
deadline, once: later requests do not wait for its next start, which follows the
backoff and parking of any failure, in the background.

Decided by events, not time: every start after the first is held by the test until the
request that began it has returned, so a request that waited for it would never return
(the hang guard would fail the test)."""

from __future__ import annotations

from typing import Any

import anyio
import pytest

from hostd.engine import Host, LegStatus, ProviderSpec, ProviderState, RestartPolicy
from hostd.errors import HostdError
from tests.engine._helpers import adversary, healthy, query
from tests.fixtures.procs import ROOT, marked_env, python

pytestmark = pytest.mark.anyio


async def test_a_stuck_handshake_is_a_failed_start_once_not_once_per_request() -> None:
    policy = RestartPolicy(base_delay_s=0.0, max_attempts=3, retry_failed_after_s=0)
    # A short start deadline for the stuck one only: the healthy one's start is not timed.
    specs = [adversary("slow_handshake", "stuck", start_timeout_s=0.5), healthy("healthy")]
    async with Host(specs, start="lazy", grace_period_s=0.5, restart_policy=policy) as host:
        pool = host.pool
        slot = pool.slots["stuck"]
        real_open = pool.launcher.open
        releases: list[anyio.Event] = []

        async def held_open(spec: Any, **kw: Any) -> Any:
            if spec.id == "stuck":
                release = anyio.Event()
                releases.append(release)
                if len(releases) > 1:  # every start after the first waits for the test
                    await release.wait()
            return await real_open(spec, **kw)

        pool.launcher.open = held_open  # type: ignore[method-assign]  # the test's hook

        # The first request names no timeout_ms: it waits out the start deadline, once.
        with anyio.fail_after(60):  # a hang guard
            first = await host.query_all(query(), 1000)
        assert first.reports["stuck"].status is LegStatus.TIMEOUT
        assert first.reports["stuck"].error_code == "handshake_timeout"
        assert first.reports["healthy"].status is LegStatus.OK
        assert slot.health.start_timed_out and slot.health.consecutive_failures == 1

        for attempt in (2, 3):
            with anyio.fail_after(60):  # would hang: the start it began is held
                fan = await host.query_all(query(), 1000)
            report = fan.reports["stuck"]
            assert report.status is LegStatus.CRASHED, report
            message = report.error_message or ""
            assert "not waited for" in message and "no handshake reply within 500 ms" in message
            assert fan.reports["healthy"].status is LegStatus.OK
            start = slot.starting
            assert start is not None and len(releases) == attempt  # begun, not waited for
            # A request meanwhile does not join it either, nor start another.
            with anyio.fail_after(60):
                again = (await host.query_all(query(), 1000)).reports["stuck"]
            assert again.status is LegStatus.CRASHED and "a start is under way" in (
                again.error_message or ""
            )
            assert len(releases) == attempt
            releases[-1].set()
            with anyio.fail_after(60):
                await start.done.wait()
            assert slot.health.consecutive_failures == attempt

        # Its attempts spent, it is parked: a request starts nothing and waits for nothing.
        assert slot.state is ProviderState.FAILED
        with anyio.fail_after(60):
            parked = (await host.query_all(query(), 1000)).reports["stuck"]
        assert parked.status is LegStatus.CRASHED
        assert "restart attempts exhausted (3)" in (parked.error_message or "")
        assert len(releases) == 3 and slot.starting is None


async def test_a_restart_asked_for_waits_for_the_start_again() -> None:
    """``providers/restart`` forgets the stuck start: its own start is waited for (here it
    times out again, and is recorded as one more stuck start)."""
    policy = RestartPolicy(base_delay_s=0.0, max_attempts=5)
    async with Host(
        [adversary("slow_handshake", "stuck", start_timeout_s=0.5)],
        start="lazy",
        grace_period_s=0.5,
        restart_policy=policy,
    ) as host:
        slot = host.pool.slots["stuck"]
        with anyio.fail_after(60):
            await host.query_all(query(), 1000)
        assert slot.health.start_timed_out
        with anyio.fail_after(60), pytest.raises(HostdError) as caught:
            await host.pool.restart(slot)
        assert "not waited for" not in caught.value.message  # it was waited for
        start = slot.starting
        if start is not None:  # the restart's own bound may end before the start's
            with anyio.fail_after(60):
                await start.done.wait()
        assert slot.health.restarts_requested == 1
        assert slot.health.consecutive_failures == 1 and slot.health.start_timed_out


async def test_a_boot_start_that_timed_out_is_told_to_the_first_leg_as_it_failed() -> None:
    """A one-shot command (``hostd compose``) starts its providers at boot, then asks
    once: the leg says what failed (the handshake's own words), not that its start
    was not waited for, nor when a next start comes (none will: the command ends).
    Later legs are the daemon's: not waited for, quoting the last failure.

    The provider (on the CGP SDK, run under the default JSON-RPC binding) never answers
    the JSON-RPC handshake, so its start deadline ends it, whatever its length; it
    exits when its input closes, well within the boot wait (its deadline and a grace
    that is only a hang guard)."""
    spec = ProviderSpec(
        "sdk",
        python("tests.fixtures.sdk_provider"),
        env=marked_env(),
        cwd=str(ROOT),
        start_timeout_s=0.3,
    )
    with anyio.fail_after(60):  # a hang guard
        async with Host([spec], start="boot", grace_period_s=10.0) as host:
            first = (await host.query_all(query(), 1000)).reports["sdk"]
            second = (await host.query_all(query(), 1000)).reports["sdk"]
    assert first.status is LegStatus.TIMEOUT, first
    assert first.error_code == "handshake_timeout"
    assert first.error_message == (
        "no handshake reply within 300 ms; it answers the CGP envelope handshake instead: "
        "a provider built with a CGP SDK (contextgraph-sdk) speaks the envelope wire and "
        'needs binding = "cgp" in its [[provider]]'
    )
    assert second.status is LegStatus.CRASHED, second
    assert "not waited for: its last start failed (timeout: no handshake reply" in (
        second.error_message or ""
    )
