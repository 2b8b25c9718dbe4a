"""A failed provider is not lost for good: parked after its restart attempts, it is
retried after a cool-down, and ``restart_provider`` brings it back at once. The
provider is a real child that fails its first starts, then works; the cool-down is
crossed by moving the host's health clock, never by waiting it out."""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import signal
import sys
import tempfile
import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest

from hostd._hints import parked_restart
from hostd.client import RpcError
from hostd.engine import Host, LegStatus, ProviderState, RestartPolicy
from hostd.errors import HostdError
from tests.engine._helpers import healthy, query

pytestmark = pytest.mark.anyio

PID = "flaky"


class Clock:
    """anyio's clock plus an offset the test moves."""

    def __init__(self) -> None:
        self.offset = 0.0

    def __call__(self) -> float:
        return anyio.current_time() + self.offset


def flaky(counter: Path, fails: int):
    return healthy(PID, "--fail-starts", str(fails), "--counter", str(counter))


def starts(counter: Path) -> int:
    return int(counter.read_text()) if counter.exists() else 0


@contextlib.asynccontextmanager
async def parked_host(
    tmp_path: Path, *, fails: int, attempts: int, retry_after: float
) -> AsyncIterator[tuple[Host, Path, Clock]]:
    """A host whose provider fails its first ``fails`` starts, started until its
    ``attempts`` are spent (each ``ensure`` waits for one failed start: failed starts in
    a row are a crash loop, which neither a query nor ``warm_all`` waits for): parked."""
    counter, clock = tmp_path / "starts", Clock()
    policy = RestartPolicy(
        base_delay_s=0.0, max_attempts=attempts, retry_failed_after_s=retry_after
    )
    async with Host(
        [flaky(counter, fails)], restart_policy=policy, health_clock=clock, start_timeout_s=30
    ) as host:
        for i in range(attempts):
            with pytest.raises(HostdError):
                await host.pool.ensure(host.pool.slots[PID])
            assert starts(counter) == i + 1
        assert host.health(PID).state is ProviderState.FAILED
        yield host, counter, clock


async def test_a_parked_provider_is_retried_after_its_cool_down_and_serves_again(
    tmp_path: Path,
) -> None:
    async with parked_host(tmp_path, fails=4, attempts=3, retry_after=60) as parked:
        host, counter, clock = parked
        # Within the cool-down a query gives up at once: no start is tried.
        fan = await host.query_all(query(), 1000)
        report = fan.reports[PID]
        assert report.status is LegStatus.CRASHED and starts(counter) == 3
        # 60 s less the real time since the failure, rounded: 59 on a busy machine.
        within = re.compile(r"next retry in (59|60) s")
        assert within.search(report.error_message or "")
        assert "restart attempts exhausted (3); next retry in " in (report.error_message or "")
        # What brings it back sooner, once fixed: the CLI's command, or a reload.
        assert parked_restart(PID) in (report.error_message or "")
        assert f"`hostd providers restart {PID}`" in parked_restart(PID)
        (row,) = host.providers_list()
        assert row["state"] == "failed" and 59 < row["health"]["retry_in_s"] <= 60
        # Past it: one start, which fails (the 4th), so it is parked for another one.
        clock.offset += 60
        fan = await host.query_all(query(), 1000)
        assert fan.reports[PID].status is not LegStatus.OK and starts(counter) == 4
        assert host.health(PID).state is ProviderState.FAILED
        assert host.health(PID).retries == 1
        fan = await host.query_all(query(), 1000)
        assert starts(counter) == 4  # the new cool-down counts from that failure
        # It is twice as long (a retry failed): a minute on, still no start.
        (row,) = host.providers_list()
        assert 119 < row["health"]["retry_in_s"] <= 120 and row["health"]["failed_retries"] == 1
        clock.offset += 60
        fan = await host.query_all(query(), 1000)
        assert within.search(fan.reports[PID].error_message or "")
        assert starts(counter) == 4
        # Past the second: the 5th start works and the provider serves again.
        clock.offset += 60
        fan = await host.query_all(query(), 1000)
        assert fan.reports[PID].status is LegStatus.OK, fan.reports[PID]
        assert [pid for pid, _ in fan.accepted] == [PID] * 3 and starts(counter) == 5
        health = host.health(PID)
        assert (health.state, health.consecutive_failures, health.retries) == (
            ProviderState.READY,
            0,
            2,
        )
        (row,) = host.providers_list()
        assert "retry_in_s" not in row["health"]


async def test_with_the_cool_down_off_a_restart_request_brings_it_back_at_once(
    tmp_path: Path,
) -> None:
    async with parked_host(tmp_path, fails=2, attempts=2, retry_after=0) as parked:
        host, counter, clock = parked
        clock.offset += 1e9  # no cool-down ever ends
        fan = await host.query_all(query(), 1000)
        said = fan.reports[PID].error_message or ""
        assert f"no retry on its own; {parked_restart(PID)}" in said
        assert starts(counter) == 2
        row = await host.restart_provider(PID)
        assert row["state"] == "ready" and starts(counter) == 3
        assert row["health"]["restarts_requested"] == 1
        assert row["health"]["consecutive_failures"] == 0
        fan = await host.query_all(query(), 1000)
        assert fan.reports[PID].status is LegStatus.OK
        # A running provider is restarted too: a fresh process, the old one torn down.
        first = host.connection(PID)
        assert first is not None
        row = await host.restart_provider(PID)
        second = host.connection(PID)
        assert second is not None and second is not first and second.alive
        assert row["state"] == "ready" and row["health"]["restarts_requested"] == 2
        assert starts(counter) == 4


# --- through the daemon: host.retry_failed_after_s, providers/restart, the CLI ------------


def _daemon_config(workdir: Path, marker: str, counter: Path, retry_after: float) -> str:
    from tests.server.conftest import ROOT

    command = [sys.executable, "-m", "tests.fixtures.healthy_provider", "--name"]
    command += [f"{PID}-{marker}", "--fail-starts", "5", "--counter", str(counter)]
    return (
        f'[host]\nsocket = "{workdir / "run" / "hostd.sock"}"\n'
        f'state_dir = "{workdir / "state"}"\nretry_failed_after_s = {retry_after}\n'
        # Its 5 failed starts 10 ms apart, doubling (the default's 7.5 s is for users).
        "restart_backoff_s = 0.01\n"
        # Started by a request, then again after each failure with no request asking.
        'start_providers = "lazy"\n\n'
        f'[[provider]]\nid = "{PID}"\ncommand = {json.dumps(command)}\n'
        f'timeout_ms = 30000\ncwd = "{ROOT}"\n'
    )


@pytest.fixture
def daemon_dir() -> Iterator[tuple[Path, str]]:
    from tests.server.conftest import marked_processes

    path = Path(tempfile.mkdtemp(prefix="hd-"))  # short: AF_UNIX paths are ~108 bytes
    marker = f"m{uuid.uuid4().hex[:12]}"
    yield path, marker
    left = marked_processes(marker)
    for pid in left:
        os.kill(pid, signal.SIGKILL)
    shutil.rmtree(path, ignore_errors=True)
    assert left == [], f"provider processes left behind: {left}"


async def _statuses(client: Any, n: int) -> list[str]:
    """The provider's leg status in ``n`` compositions, each waiting for the start it
    meets (a first one, or a parked provider's retry: neither is a crash loop's)."""
    out = []
    for _ in range(n):
        result = await client.compose("retry policy", budget=300)
        out.append(result.providers[0].status)
    return out


@contextlib.asynccontextmanager
async def _parked(daemon_dir: tuple[Path, str], retry_after: float) -> AsyncIterator[Any]:
    """A serving daemon whose one provider failed its five starts (the daemon's limit),
    parked: yields ``(daemon, client, counter)``. One request starts it (lazily); the
    daemon starts it again on its own after each failure, with no other request, until
    it is parked (``provider.parked``). On the way out the daemon is stopped
    (exit status 0), or killed if the body failed first."""
    from hostd.client import connect
    from tests.server.conftest import DaemonProc

    workdir, marker = daemon_dir
    counter = workdir / "starts"
    daemon = DaemonProc(workdir, marker, _daemon_config(workdir, marker, counter, retry_after))
    async with anyio.create_task_group() as tg:
        await daemon.start(tg)
        try:
            async with connect(daemon.socket) as client:
                assert await _statuses(client, 1) != ["ok"]
                await daemon.logged("provider.parked", provider=PID)
                yield daemon, client, counter
            assert await daemon.stop() == 0
        finally:
            process = daemon.process
            if process is not None and process.returncode is None:
                daemon.signal(signal.SIGKILL)
                with anyio.CancelScope(shield=True):
                    await process.wait()
            tg.cancel_scope.cancel()


async def test_providers_restart_brings_a_parked_provider_back_over_the_wire_and_the_cli(
    daemon_dir: tuple[Path, str],
) -> None:
    from tests.server.conftest import ROOT, daemon_command

    async with _parked(daemon_dir, 0) as (daemon, client, counter):
        # With the cool-down off it stays parked, answering at once without a start.
        result = await client.compose("retry policy", budget=300)
        failure = result.providers[0].error
        assert failure is not None
        error = failure.message
        assert f"no retry on its own; {parked_restart(PID)}" in error and starts(counter) == 5
        with pytest.raises(RpcError) as refused:
            await client.call("providers/restart", {"provider": "nope"})
        assert refused.value.rpc_code == -32602
        assert refused.value.remote_reason == "unknown_provider"
        cli = [*daemon_command(daemon.config, "providers", "restart", PID)]
        done = await anyio.run_process(
            [*cli, "--connect", str(daemon.socket), "--json"], cwd=ROOT, check=False
        )
        assert done.returncode == 0, done.stderr.decode()
        row = json.loads(done.stdout)
        assert row["id"] == PID and row["state"] == "ready" and starts(counter) == 6
        assert await _statuses(client, 1) == ["ok"]
        # The wire method itself, on a running provider: a fresh process.
        again = await client.call("providers/restart", {"provider": PID})
        assert again["provider"]["state"] == "ready"
        assert again["provider"]["health"]["restarts_requested"] == 2
        assert starts(counter) == 7
        assert await _statuses(client, 1) == ["ok"]
    requested = daemon.events("provider.restart.requested")
    assert [e["provider"] for e in requested] == [PID, PID]
    assert requested[0]["state"] == "failed"


async def test_a_tiny_cool_down_retries_a_parked_provider_as_the_log_shows(
    daemon_dir: tuple[Path, str],
) -> None:
    async with _parked(daemon_dir, 0.001) as (daemon, client, counter):
        # Decided by events: ask until it serves (a bound against a hang, not a clock).
        for _ in range(20):
            if await _statuses(client, 1) == ["ok"]:
                break
        else:
            raise AssertionError("the parked provider was never retried")
    assert starts(counter) == 6
    (retry,) = daemon.events("provider.retry")
    assert retry["provider"] == PID and retry["retries"] == 1
    assert retry["consecutive_failures"] == 5
