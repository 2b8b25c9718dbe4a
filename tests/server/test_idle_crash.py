"""A provider or a reranker killed while idle says why at once, not at the next request.

A real daemon starts both at boot; each child is killed (``kill -9``, as the OOM killer
does) while no request is out. The daemon sees each exit and counts it as a crash met
by a request is (``provider.exited``), so ``hostd status`` shows the signal and the
stderr's tail before anything asks them again. Decided by the daemon's log events,
under hang guards.
"""

from __future__ import annotations

import os
import re
import signal
from typing import Any

import anyio
import pytest

from hostd.client import connect
from tests.fixtures.cli import run_hostd
from tests.server.test_rerank import reranker_table

pytestmark = pytest.mark.anyio


async def test_a_provider_and_a_reranker_killed_while_idle_show_why_in_status(
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
    for pid in ("alpha", "reranker"):
        await daemon.logged("provider.exited", provider=pid)

    done = await anyio.to_thread.run_sync(
        lambda: run_hostd("--config", str(daemon.config), "status")
    )
    assert done.returncode != 0, done.stdout  # degraded: both are down
    lines = done.stdout.splitlines()
    assert re.fullmatch(
        r"provider alpha: crashed \d+ s ago: provider process ended; killed by SIGKILL; "
        r"stderr: alpha index loaded",
        lines[-2],
    ), lines
    assert re.fullmatch(
        r"\[reranker\] process: crashed \d+ s ago: reranker process ended; killed by SIGKILL; "
        r"stderr: reranker model loaded; asks 0, fallbacks 0",
        lines[-1],
    ), lines
    assert await daemon.stop() == 0
