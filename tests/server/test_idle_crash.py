"""A provider or a reranker killed while idle says why at once, and is up again before
any request asks for it; one in a crash loop is started no more often than its
backoff and bounded attempts allow.

A real daemon starts both at boot; each child is killed (``kill -9``, as the OOM killer
does) while no request is out. The daemon sees each exit and counts it as a crash met
by a request is (``provider.exited``, with the signal and the stderr's tail), then
starts each again on its own after its backoff (``provider.recovered``), with no
composition sent. Decided by the daemon's log events, under hang guards.
"""

from __future__ import annotations

import json
import os
import re
import signal
from pathlib import Path
from typing import Any

import anyio
import pytest

from hostd.client import connect
from tests.fixtures.cli import run_hostd
from tests.fixtures.procs import ROOT
from tests.server.test_rerank import reranker_table

pytestmark = pytest.mark.anyio


async def test_a_provider_and_a_reranker_killed_while_idle_are_up_again_with_no_request(
    start_daemon: Any, marker: str
) -> None:
    extra = reranker_table("reverse", marker, say="reranker model loaded")
    providers = {"alpha": {"say": "alpha index loaded"}}
    daemon = await start_daemon(providers=providers, extra=extra, start_providers="boot")
    for pid in ("alpha", "reranker"):
        await daemon.logged("provider.handshake.ok", provider=pid)
    async with connect(daemon.socket) as client:
        (alpha,) = (await client.call("providers/list", {}))["providers"]
        reranker = (await client.call("host/status", {}))["reranker"]
    for row in (alpha, reranker):
        assert row["state"] == "ready", row
        os.kill(row["health"]["pid"], signal.SIGKILL)
    for pid, say in (("alpha", "alpha index loaded"), ("reranker", "reranker model loaded")):
        exited = await daemon.logged("provider.exited", provider=pid)
        assert exited["error"] == (
            f"{'reranker' if pid == 'reranker' else 'provider'} process ended; "
            f"killed by SIGKILL; its stderr's last lines: {say}"
        )
        await daemon.logged("provider.recovered", provider=pid, was="crashed")

    done = await anyio.to_thread.run_sync(
        lambda: run_hostd("--config", str(daemon.config), "status")
    )
    assert done.returncode == 0, done.stdout  # both up again: nothing is down
    assert not daemon.events("provider.leg")  # and no composition asked for either
    assert await daemon.stop() == 0


async def test_a_crash_after_serving_is_not_worded_as_caused_by_its_ready_line(
    start_daemon: Any, marker: str
) -> None:
    """A provider that started well, served a query, then exited 1 with no error
    written: its stderr ends with the ready line it wrote at start. The crash quotes that
    as its stderr's last lines, not as its ``stderr:`` (the words of a start that failed,
    where what it wrote is the cause); ``hostd status`` shows the line under it once,
    and when its backoff lets it start again."""
    command = ["python", "-m", "tests.fixtures.adversarial_provider", "exit_after_query", marker]
    table = (
        f'[[provider]]\nid = "alpha"\ncommand = {json.dumps(command)}\n'
        f'timeout_ms = 60000\ncwd = "{ROOT}"\n'
    )
    # Not started again within the test: its crash is what ``hostd status`` says.
    daemon = await start_daemon(
        providers={}, extra=table, start_providers="boot", restart_backoff_s=60
    )
    await daemon.logged("provider.handshake.ok", provider="alpha")
    async with connect(daemon.socket) as client:
        await client.call("context/compose", {"goal": "find the retry policy", "budget": 400})
    exited = await daemon.logged("provider.exited", provider="alpha")
    assert exited["error"] == (
        "provider process ended; exited with status 1; its stderr's last lines: serving on stdio"
    )
    assert exited["stderr_tail"] == "serving on stdio"

    done = await anyio.to_thread.run_sync(
        lambda: run_hostd("--config", str(daemon.config), "status")
    )
    lines = [line.strip() for line in done.stdout.splitlines()]
    # The line once, under the crash: the crash's own words do not repeat it. Its
    # restart waits out its backoff (60 s): when it comes is said.
    (down,) = [line for line in lines if line.startswith("provider alpha: crashed")]
    said, _, nxt = down.partition("; next try in ")
    assert said.endswith("ago: provider process ended; exited with status 1"), lines
    assert re.fullmatch(r"\d+ s|1 min 0 s", nxt), lines
    at = lines.index("alpha: its stderr ended with:")
    assert lines[at + 1] == "serving on stdio", lines
    assert await daemon.stop() == 0


async def test_a_crash_loop_with_no_request_is_started_as_often_as_its_backoff_allows(
    start_daemon: Any, workdir: Path
) -> None:
    counter = workdir / "starts"
    providers = {"alpha": {"fail_starts": "1000", "counter": str(counter)}}
    # Parked after its 5 failed starts in a row (10 ms apart, doubling: a test's backoff),
    # then one start after a 0.25 s cool-down, the next after 0.5 s.
    daemon = await start_daemon(
        providers=providers,
        start_providers="boot",
        restart_backoff_s=0.01,
        retry_failed_after_s=0.25,
    )
    parked = await daemon.logged("provider.parked", provider="alpha")
    assert parked["failures"] == 5
    second = await daemon.logged("provider.retry", provider="alpha", retries=2)
    # Up to the second retry: the 5 starts of its attempts and the first retry, no more.
    assert second["consecutive_failures"] == 6
    before = daemon.log[: daemon.log.index(second)]  # in the daemon's own order
    assert sum(e.get("event") == "provider.start.failed" for e in before) == 6
    assert sum(e.get("event") == "provider.retry" for e in before) == 1
    assert not daemon.events("provider.leg")  # no request asked for any of them
    assert await daemon.stop() == 0


async def test_a_provider_is_parked_after_the_restart_attempts_its_config_gives(
    start_daemon: Any, workdir: Path
) -> None:
    """``host.restart_attempts``: a flaky provider may be given more starts in a row (or
    fewer) than the 5 before it is parked; each start that fails says so."""
    counter = workdir / "starts"
    providers = {"alpha": {"fail_starts": "1000", "counter": str(counter)}}
    daemon = await start_daemon(
        providers=providers,
        start_providers="boot",
        restart_backoff_s=0.01,
        restart_backoff_max_s=0.02,
        restart_attempts=7,
        retry_failed_after_s=0,  # parked for good: no retry after it
    )
    parked = await daemon.logged("provider.parked", provider="alpha")
    assert parked["failures"] == 7 and parked["retry_in_s"] is None
    assert await daemon.stop() == 0
    # Its 7 starts and no other: parked for good, nothing starts it again.
    assert len(daemon.events("provider.start.failed")) == 7


async def test_a_provider_that_never_starts_is_retried_less_and_less_often_as_the_log_says(
    start_daemon: Any, workdir: Path
) -> None:
    """One provider exits 1 at every start, another's command does not exist: each retry
    that fails doubles its cool-down, up to ``retry_failed_max_s``, and each failed
    start that parks it says when the next retry comes."""
    counter = workdir / "starts"
    providers = {"alpha": {"fail_starts": "1000", "counter": str(counter)}}
    gone = f'[[provider]]\nid = "gone"\ncommand = ["{workdir / "no-such-command"}"]\n'
    daemon = await start_daemon(
        providers=providers,
        extra=gone,
        start_providers="boot",
        restart_backoff_s=0.01,
        retry_failed_after_s=0.05,
        retry_failed_max_s=0.2,
    )
    for pid in ("alpha", "gone"):
        await daemon.logged("provider.retry", provider=pid, retries=5)
    assert await daemon.stop() == 0

    def retry_in(pid: str, event: str) -> list[float | None]:
        return [e.get("retry_in_s") for e in daemon.events(event) if e["provider"] == pid]

    cool = [0.05, 0.1, 0.2, 0.2, 0.2]  # the first cool-down, doubled per failed retry
    # alpha: 5 failed starts in a row (the 5th parks it), then its failed retries.
    assert retry_in("alpha", "provider.start.failed")[:9] == [None] * 4 + cool
    assert retry_in("alpha", "provider.parked") == [0.05]
    # gone: its command cannot run, so it is parked at its first failed start.
    assert retry_in("gone", "provider.start.failed")[:5] == cool
    assert retry_in("gone", "provider.parked") == [0.05]


async def test_the_logged_provider_pid_is_the_process_to_kill(
    start_daemon: Any, marker: str
) -> None:
    # An operator matches the log's pid with ps, top or an OOM-killer line, and kills
    # it: it must be the provider's own process (its command), not the reaper shim's.
    daemon = await start_daemon(providers={"alpha": {}}, start_providers="boot")
    started = await daemon.logged("provider.process.started", provider="alpha")
    pid = started["pid"]
    cmdline = (await anyio.Path(f"/proc/{pid}/cmdline").read_bytes()).split(b"\0")
    assert b"tests.fixtures.healthy_provider" in cmdline and b"-S" not in cmdline, cmdline
    assert started.get("reaper_pid") not in (None, pid), started  # the shim, said apart
    await daemon.logged("provider.handshake.ok", provider="alpha")
    async with connect(daemon.socket) as client:
        (row,) = (await client.call("providers/list", {}))["providers"]
    assert row["health"]["pid"] == pid  # providers/list names the same process
    os.kill(pid, signal.SIGKILL)
    exited = await daemon.logged("provider.process.exited", provider="alpha", pid=pid)
    assert exited["returncode"] == -signal.SIGKILL
    assert exited["reaper_pid"] == started["reaper_pid"]
    assert await daemon.stop() == 0
