"""The engine's bounds, with real child providers: a request's deadline is the bound
on every leg, a hung provider is restarted rather than waited on forever, and a
failed provider's error stays the same size however many requests meet it."""

from __future__ import annotations

import re
from pathlib import Path

import anyio
import pytest
from structlog.testing import capture_logs

from hostd._hints import NO_HANDSHAKE
from hostd.engine import MAX_ERROR_CHARS, Host, LegStatus, RestartPolicy
from tests.engine._helpers import adversary, healthy, local, query
from tests.fixtures.procs import leftovers

pytestmark = pytest.mark.anyio


def _cmdline(pid: int) -> bytes:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return b""


async def test_a_give_up_message_does_not_grow_with_every_request() -> None:
    policy = RestartPolicy(base_delay_s=0.001, max_delay_s=0.001, max_attempts=1)
    async with Host([adversary("crash", "c")], restart_policy=policy) as host:
        messages = []
        for _ in range(12):
            fan = await host.query_all(query(), 500)
            messages.append(fan.reports["c"].error_message or "")
        health = host.health("c")
    assert "restart attempts exhausted" in messages[1]
    # The same text each time, never re-wrapped. Only the countdown to the next
    # retry may tick between requests (a slow request can cross a second).
    countdown = re.compile(r"next retry in \d+ s")
    assert all(countdown.search(message) for message in messages[1:])
    assert len({countdown.sub("next retry in N s", m) for m in messages[1:]}) == 1
    assert len(health.last_error or "") <= MAX_ERROR_CHARS
    assert (health.last_error or "").count("restart attempts exhausted") <= 1


async def test_a_handshake_that_never_completes_costs_a_leg_its_deadline_only() -> None:
    # The provider never answers its handshake and ignores its shutdown message, so
    # tearing it down walks the whole grace period. That walk is the pool's, after
    # the leg has already reported: when the fan-out returns, the child still runs.
    specs = [adversary("slow_handshake", "slow"), healthy("ok")]
    with anyio.fail_after(120):  # a hang guard, not a timing assertion
        async with Host(specs, start_timeout_s=30.0, grace_period_s=1.0) as host:
            await host.query_all(query(), 500, providers=["ok"])  # started, and ready
            # The request's deadline is each leg's, the slow one's start included.
            fan = await host.query_all(query(), 500, timeout_ms=2000)
            slow_alive = any(b"slow_handshake" in _cmdline(pid) for pid in leftovers())
    report = fan.reports["slow"]
    # Within its start deadline the provider is starting, not failing (never killed).
    assert report.status is LegStatus.WARMING and report.error_code == "starting"
    assert report.error_message == "provider starting, not ready within 2000 ms"
    assert fan.reports["ok"].status is LegStatus.OK
    assert slow_alive
    assert leftovers() == []


async def test_a_provider_that_answers_nothing_is_restarted_after_timeouts_in_a_row() -> None:
    policy = RestartPolicy(base_delay_s=0.001, max_consecutive_timeouts=2)
    spec = adversary("hang", "h", timeout_ms=300)
    with anyio.fail_after(90):  # a hang guard
        async with Host(
            [spec],
            start="boot",
            start_timeout_s=30.0,
            grace_period_s=0.3,
            restart_policy=policy,
        ) as host:
            first_pid = local(host.connection("h")).child.pid
            for _ in range(2):
                fan = await host.query_all(query(), 500)
                assert fan.reports["h"].status is LegStatus.TIMEOUT
            assert host.connection("h") is None  # torn down in the background
            hung = host.providers_list()[0]
            # The third request starts a fresh process; its leg may give up (300 ms)
            # before that start is done, which goes on in the pool: join it, by event.
            third = await host.query_all(query(), 500)
            await host.start_all()
            second_pid = local(host.connection("h")).child.pid
            health = host.health("h")
    assert hung["state"] == "crashed"
    assert hung["health"]["last_failure"] == "hung: no reply to 2 requests in a row"
    assert third.reports["h"].status is LegStatus.TIMEOUT
    assert second_pid != first_pid and health.starts == 2 and health.restarts == 1
    assert leftovers() == []


async def test_a_boot_start_that_times_out_is_logged_once_naming_its_deadline() -> None:
    # The provider never answers its handshake and ignores its shutdown message, so its
    # teardown walks the whole grace period: the boot wait (start deadline + grace) and
    # the start's own failure race. Either way the failure is one event, with the text
    # and the reason of the typed error. The grace is generous so the handshake's own
    # deadline passes before the host closes, however slow the spawn (a hang guard).
    spec = adversary("slow_handshake", "slow", start_timeout_s=0.3)
    with anyio.fail_after(60), capture_logs() as logs:  # a hang guard
        async with Host([spec], start="boot", grace_period_s=2.0) as host:
            pass
        health = host.health("slow")
    failed = [e for e in logs if e["event"] == "provider.start.failed"]
    assert len(failed) == 1, failed
    assert failed[0]["provider"] == "slow" and failed[0]["reason"] == "timeout"
    assert failed[0]["error"] == f"no handshake reply within 300 ms; {NO_HANDSHAKE}"
    assert health.last_failure == f"timeout: no handshake reply within 300 ms; {NO_HANDSHAKE}"
    assert leftovers() == []


async def test_a_parked_providers_legs_are_logged_at_info_after_one_parked_warning() -> None:
    policy = RestartPolicy(base_delay_s=0.001, max_delay_s=0.001, max_attempts=1)
    with capture_logs() as logs:
        async with Host([adversary("crash", "c")], restart_policy=policy) as host:
            reports = [(await host.query_all(query(), 500)).reports["c"] for _ in range(6)]
    assert reports[-1].status is LegStatus.CRASHED and reports[-1].error_code == "parked"
    legs = [e for e in logs if e["event"].startswith("provider.leg") and e["provider"] == "c"]
    parked = [e for e in legs if e["error_code"] == "parked"]
    assert len(parked) >= 4 and {e["event"] for e in parked} == {"provider.leg"}
    assert {e["log_level"] for e in parked} == {"info"}
    # The fault itself was a warning, told once: the crash's leg and the parking.
    assert [e["event"] for e in legs if e["log_level"] == "warning"] == ["provider.leg.failed"]
    assert len([e for e in logs if e["event"] == "provider.parked"]) == 1
