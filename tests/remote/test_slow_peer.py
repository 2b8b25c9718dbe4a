"""A remote provider that misses its deadlines, or is down a while, against a real server.

A remote provider has no process to restart: one that answers no query in time is never
"hung" (``is_hung``), so it keeps its connection, and no request waits for a new
handshake with the same slow server. One whose server stops and comes back is started
again after the backoff, not parked: requests that come while it is down do not spend
its restart attempts. The server is a real process
(``tests.fixtures.closing_http_server``) that says what it saw; every step waits for
an event (a line it printed, a log event), never for a time.
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import anyio
import pytest
from anyio.abc import Process

from hostd._hints import down_state
from hostd.engine import Host, LegStatus, ProviderSpec, ProviderState, RestartPolicy
from tests.engine._helpers import query
from tests.fixtures.log_events import events
from tests.fixtures.procs import ROOT
from tests.remote._servers import consented

pytestmark = pytest.mark.anyio


class Server:
    """One run of ``closing_http_server``: its port, and what it printed (read once
    it has stopped)."""

    def __init__(self, process: Process, port: int) -> None:
        self.process, self.port = process, port
        self.said: list[str] = []

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    async def stop(self) -> None:
        with anyio.CancelScope(shield=True):
            if self.process.returncode is None:
                self.process.kill()
            await self.process.wait()
            assert self.process.stdout is not None
            rest = b""
            with anyio.fail_after(60):  # hang guard: it has exited, its stdout ends
                async for chunk in self.process.stdout:
                    rest += chunk
            self.said = [line for line in rest.decode().splitlines() if line]


async def _start(mode: str, port: int = 0) -> Server:
    cmd = [sys.executable, "-m", "tests.fixtures.closing_http_server", mode, str(port)]
    process = await anyio.open_process(
        cmd, cwd=ROOT, stdin=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    assert process.stdout is not None
    line = b""
    with anyio.fail_after(60):  # hang guard: the line comes once its socket listens
        while not line.endswith(b"\n"):
            line += await process.stdout.receive(1)
    return Server(process, int(line.split()[1]))


@asynccontextmanager
async def _server(mode: str) -> AsyncIterator[Server]:
    server = await _start(mode)
    try:
        yield server
    finally:
        await server.stop()


async def test_a_remote_provider_that_answers_no_query_in_time_keeps_its_connection(
    tmp_path: Path,
) -> None:
    """Past ``max_consecutive_timeouts`` misses in a row, a remote provider is not
    handshaken again as "hung": each leg times out on its own bound and no request waits
    for a new handshake with the same server."""
    policy = RestartPolicy(max_consecutive_timeouts=3)
    turns = policy.max_consecutive_timeouts + 2
    with anyio.fail_after(60), events() as seen:  # a hang guard
        async with _server("hang") as server:
            # 200 ms: the server holds every query, so each leg ends on it.
            spec = ProviderSpec("remote", url=server.url, timeout_ms=200, start_timeout_s=30.0)
            consent = consented(tmp_path, spec.id)
            async with Host([spec], consent=consent, restart_policy=policy) as host:
                reports = []
                for _ in range(turns):  # each sent after the one before it timed out
                    fan = await host.query_all(query(), 1000)
                    reports.append(fan.reports[spec.id])
                health = host.health(spec.id)
                state = host.providers_list()[0]["state"]
    assert [r.status for r in reports] == [LegStatus.TIMEOUT] * turns
    # Its first leg waited for its first start within its own bound (a request naming
    # no timeout_ms waits for a start): every message is the plain one.
    assert [r.error_message for r in reports[1:]] == ["no reply within 200 ms"] * (turns - 1)
    assert seen.count("provider.hung.restart") == 0
    assert seen.count("provider.handshake.ok") == 1
    assert (health.starts, health.restarts, health.consecutive_failures) == (1, 0, 0)
    assert (health.timeouts, health.consecutive_timeouts) == (turns, turns)
    assert state == ProviderState.READY.value and health.last_failure is None
    # One handshake answered, every query held: the server was never asked to shake again.
    assert [line for line in server.said if line in ("answered", "held")] == [
        "answered",
        *["held"] * turns,
    ]


async def test_a_remote_provider_whose_server_comes_back_within_its_backoff_is_not_parked(
    tmp_path: Path,
) -> None:
    """The server stops while requests keep coming, and is started again on the same
    port after the second failed start: the requests do not spend the restart attempts
    (each start waits its backoff, 0.5 s doubling), so the provider is back, not parked,
    and the next request is answered."""
    policy = RestartPolicy()  # the default backoff and attempts, as a daemon has them
    with anyio.fail_after(60), events() as seen:  # a hang guard
        server = await _start("always")
        try:
            spec = ProviderSpec("remote", url=server.url, timeout_ms=30_000, start_timeout_s=30.0)
            consent = consented(tmp_path, spec.id)
            async with Host(
                [spec], consent=consent, restart_policy=policy, restart_idle=True
            ) as host:
                first = (await host.query_all(query(), 1000)).reports[spec.id]
                await server.stop()
                down = []
                # The connection refused: the leg meets it (a failure), then each start
                # on its own after the backoff fails too. Requests come between them.
                for attempt in (1, 2):
                    for _ in range(3):
                        down.append((await host.query_all(query(), 1000)).reports[spec.id])
                    await seen.wait("provider.start.failed", attempt)
                between = host.health(spec.id)
                server = await _start("always", server.port)  # back, on the same port
                await seen.wait("provider.recovered", 1)
                back = (await host.query_all(query(), 1000)).reports[spec.id]
                health = host.health(spec.id)
        finally:
            await server.stop()
    assert first.status is LegStatus.OK and back.status is LegStatus.OK, back
    assert LegStatus.OK not in [r.status for r in down]
    # The leg's failure and the two failed starts: nothing a request did added one.
    assert between.consecutive_failures == 3 and between.state is ProviderState.CRASHED
    assert seen.count("provider.parked") == 0
    assert (health.state, health.consecutive_failures) == (ProviderState.READY, 0)


async def test_a_remote_provider_whose_server_is_down_past_its_restart_attempts_is_not_parked(
    tmp_path: Path,
) -> None:
    """The server stops for longer than a local provider's restart attempts last (more
    failed checks than ``max_attempts``; the schedule made short by the policy, whose
    cool-down stays the default minute), then starts again on the same port: the
    provider is checked on its short backoff, never parked, the check after the server
    is back brings it up, and the next compose is answered."""
    policy = RestartPolicy(base_delay_s=0.05)  # checks 0.1, 0.2, 0.4, 0.4 … s apart
    with anyio.fail_after(60), events() as seen:  # a hang guard
        server = await _start("always")
        try:
            spec = ProviderSpec("remote", url=server.url, timeout_ms=30_000, start_timeout_s=30.0)
            consent = consented(tmp_path, spec.id)
            async with Host(
                [spec], consent=consent, restart_policy=policy, restart_idle=True
            ) as host:
                first = (await host.query_all(query(), 1000)).reports[spec.id]
                await server.stop()
                # The leg meets the refused connection, then each check fails on its own.
                down = (await host.query_all(query(), 1000)).reports[spec.id]
                past = policy.max_attempts + 2

                def failed_or_parked() -> bool:
                    return (
                        seen.count("provider.start.failed") >= past
                        or seen.count("provider.parked") > 0
                    )

                await seen.until(failed_or_parked)
                assert seen.count("provider.parked") == 0, "parked while its server was down"
                between = host.health(spec.id)
                # No request waits for a check of a server that is down: it fails at once.
                meanwhile = (await host.query_all(query(), 1000)).reports[spec.id]
                server = await _start("always", server.port)  # back, on the same port
                await seen.wait("provider.recovered", 1)
                back = (await host.query_all(query(), 1000)).reports[spec.id]
                health = host.health(spec.id)
        finally:
            await server.stop()
    assert first.status is LegStatus.OK and back.status is LegStatus.OK, back
    assert down.status is LegStatus.CRASHED and down.error_code == "transport"
    assert between.consecutive_failures > policy.max_attempts
    assert between.state is ProviderState.CRASHED
    # The code of what its last check found (a refused connection), never "crashed".
    assert (meanwhile.status, meanwhile.error_code) == (LegStatus.CRASHED, "transport")
    assert "not waited for: its server was not reached" in (meanwhile.error_message or "")
    assert seen.count("provider.parked") == 0
    assert (health.state, health.consecutive_failures) == (ProviderState.READY, 0)
    # The first failed check said at warning; each repeat of the same words at debug.
    failed = [e for e in seen.seen if e["event"] == "provider.start.failed"]
    assert failed[0]["log_level"] == "warning"
    assert {e["log_level"] for e in failed[1:]} == {"debug"}
    assert all("next_check_in_s" in e and "retry_in_s" not in e for e in failed)


async def test_a_request_while_its_server_is_down_fails_at_once_saying_when_it_is_checked(
    tmp_path: Path,
) -> None:
    """From the first failure on, no request waits for a check of a server that is down
    (a backoff, then a handshake that may wait out its deadline): its leg fails at once
    with the failure's words and when the next check comes, which ``providers/list``
    (``next_check_in_s``) and ``hostd status`` say too. A request that finds a check due
    begins it in the background. The health clock is the test's: each step is decided by
    the clock it sets, none by how fast the machine is."""
    clock = [100.0]
    with anyio.fail_after(60), events() as seen:  # a hang guard
        server = await _start("always")
        try:
            spec = ProviderSpec("remote", url=server.url, timeout_ms=30_000, start_timeout_s=30.0)
            consent = consented(tmp_path, spec.id)
            async with Host([spec], consent=consent, health_clock=lambda: clock[0]) as host:
                first = (await host.query_all(query(), 1000)).reports[spec.id]
                await server.stop()
                broke = (await host.query_all(query(), 1000)).reports[spec.id]
                at_once = (await host.query_all(query(), 1000)).reports[spec.id]
                waiting = host.providers_list()[0]
                clock[0] += 0.5  # the first check is due: the next request begins it
                due = (await host.query_all(query(), 1000)).reports[spec.id]
                await seen.wait("provider.start.failed", 1)  # the check, behind it
                checked = host.providers_list()[0]
        finally:
            await server.stop()
    assert first.status is LegStatus.OK
    assert (broke.status, broke.error_code) == (LegStatus.CRASHED, "transport")
    last = f"transport: {broke.error_message}"
    # The code of the failure that put it down, not a crash of a process it does not have.
    assert (at_once.status, at_once.error_code) == (LegStatus.CRASHED, "transport")
    assert at_once.error_message == (
        f"not waited for: its server was not reached ({last}); the next check in 500 ms"
    )
    assert waiting["state"] == "crashed"
    assert waiting["health"]["next_check_in_s"] == 0.5
    assert "retry_in_s" not in waiting["health"]
    assert down_state(waiting) == f"crashed 0 s ago: {last}; next check in under 1 s"
    assert (due.status, due.error_code) == (LegStatus.CRASHED, "transport")
    assert due.error_message == (
        f"not waited for: its server was not reached ({last}); checked again in the background"
    )
    # The check failed too: the next one 1 s after it (check_delay doubles, then holds).
    assert checked["health"]["consecutive_failures"] == 2
    assert checked["health"]["next_check_in_s"] == 1.0
