"""A long-running host starts a provider that is down again on its own: no request
needs to come first. The providers are real children; each test waits for the
handshake it expects by an event, under a hang guard."""

from __future__ import annotations

import os
import signal
from pathlib import Path

import anyio
import pytest

from hostd.engine import Host, ProviderSpec, RestartPolicy
from hostd.protocol import HandshakeAck
from tests.engine._helpers import child_pid, healthy

pytestmark = pytest.mark.anyio


def handshakes(host: Host) -> list[anyio.Event]:
    """An event per handshake to come, set in turn: ``events[n]`` once n+1 were made."""
    events = [anyio.Event() for _ in range(8)]
    made = 0

    def heard(spec: ProviderSpec, ack: HandshakeAck) -> None:
        nonlocal made
        events[made].set()
        made += 1

    host.pool.handshake_listeners.append(heard)
    return events


async def test_a_provider_killed_while_idle_is_up_again_with_no_request() -> None:
    policy = RestartPolicy(base_delay_s=0.01)
    async with Host(
        [healthy("idle")], start="lazy", restart_policy=policy, restart_idle=True
    ) as host:
        heard = handshakes(host)
        await host.start_all()
        slot = host.pool.slots["idle"]
        pid = child_pid(slot.conn)
        assert pid is not None
        os.kill(pid, signal.SIGKILL)  # as the OOM killer does, no request out
        with anyio.fail_after(60):  # a hang guard, never the thing tested
            await heard[1].wait()
        health = slot.health
        assert (health.starts, health.restarts, health.crashes, health.legs) == (2, 1, 0, 0)
        assert "killed by SIGKILL" in (health.last_failure or "")
        assert child_pid(slot.live()) not in (None, pid)


async def test_a_provider_whose_restarts_fail_is_started_until_one_works(
    tmp_path: Path,
) -> None:
    counter = tmp_path / "starts"
    flaky = healthy("flaky", "--fail-starts", "2", "--counter", str(counter))
    policy = RestartPolicy(base_delay_s=0.01)
    async with Host([flaky], start="lazy", restart_policy=policy, restart_idle=True) as host:
        heard = handshakes(host)
        await host.start_all()  # its first start fails; the next two come on their own
        with anyio.fail_after(60):
            await heard[0].wait()
        assert int(counter.read_text()) == 3
        assert host.health("flaky").legs == 0 and host.health("flaky").consecutive_failures == 2


async def test_providers_restart_replaces_a_parked_providers_pending_retry(
    tmp_path: Path,
) -> None:
    counter = tmp_path / "starts"
    flaky = healthy("flaky", "--fail-starts", "1", "--counter", str(counter))
    # Parked at its first failure, retried in an hour: that retry waits, pending.
    policy = RestartPolicy(max_attempts=1, retry_failed_after_s=3600)
    async with Host([flaky], start="lazy", restart_policy=policy, restart_idle=True) as host:
        await host.start_all()
        slot = host.pool.slots["flaky"]
        pending = slot.revive
        assert pending is not None and host.providers_list()[0]["state"] == "failed"
        row = await host.restart_provider("flaky")
        assert row["state"] == "ready" and int(counter.read_text()) == 2
        assert pending.cancel_called and slot.revive is None  # one start, not two
    assert int(counter.read_text()) == 2


async def test_closing_the_host_cancels_a_pending_retry(tmp_path: Path) -> None:
    counter = tmp_path / "starts"
    flaky = healthy("flaky", "--fail-starts", "1", "--counter", str(counter))
    policy = RestartPolicy(max_attempts=1, retry_failed_after_s=3600)
    async with Host([flaky], start="lazy", restart_policy=policy, restart_idle=True) as host:
        await host.start_all()
        pending = host.pool.slots["flaky"].revive
        assert pending is not None
    # Its task ended with the host (no task outlives it), and started nothing.
    assert host.pool.slots["flaky"].revive is None and int(counter.read_text()) == 1


async def test_a_one_shot_hosts_provider_waits_for_a_request_to_start_again(
    tmp_path: Path,
) -> None:
    counter = tmp_path / "starts"
    flaky = healthy("flaky", "--fail-starts", "1", "--counter", str(counter))
    async with Host([flaky], start="lazy", restart_policy=RestartPolicy(base_delay_s=0.01)) as host:
        await host.start_all()
        assert host.pool.slots["flaky"].revive is None  # nothing pending: a request starts it
        assert host.providers_list()[0]["state"] == "crashed"
