"""A large MCP provider never stalls the daemon (no unbounded work on the event loop).

A real ``hostd serve`` composes a real MCP server (``mcpserver_app big``: 8
resources of 2 MiB, on the SDK's ``MCPServer``) while another connection asks for
``host/status``. The verdict is the daemon's own log order, never a clock: the
binding logs ``mcp.frames.building`` before it cuts and scores what it read and
``mcp.frames.built`` (or ``mcp.frames.abandoned``) after; a status answered
between the two (its ``request.done``) was served while that work ran. Work done
on the event loop cannot interleave with anything, so it can never pass that way.
"""

from __future__ import annotations

import json
import sys
from typing import Any

import anyio
import pytest

from hostd.client import connect
from tests.server.conftest import ROOT, DaemonProc

pytestmark = [pytest.mark.anyio, pytest.mark.slow]


def big_table(marker: str, *, count: int = 8, mib: float = 2.0) -> str:
    command = [sys.executable, "-m", "tests.mcp.mcpserver_app", "big"]
    command += ["--count", str(count), "--mib", str(mib), "--marker", marker]
    return (
        '[[provider]]\nid = "big"\nbinding = "mcp"\n'
        f"command = {json.dumps(command)}\ntimeout_ms = 600000\n"
        f'cwd = "{ROOT}"\n'
    )


DEBUG = '[log]\nlevel = "debug"\n'


def _index(daemon: DaemonProc, name: str, request_id: str | None = None) -> int:
    for i, event in enumerate(daemon.log):
        if event.get("event") == name and request_id in (None, event.get("request_id")):
            return i
    raise AssertionError(f"{name!r} not logged")


async def _status_after(daemon: DaemonProc, client: Any, event: str) -> None:
    """Once the daemon has logged ``event`` (its log reaches us within 0.2 s: the
    periodic flush), ask for ``host/status``: asked while whatever follows ``event`` runs."""
    await daemon.logged(event)
    with anyio.fail_after(300):
        await client.status()


async def test_status_is_answered_while_a_large_mcp_provider_is_composed(
    start_daemon: Any, marker: str
) -> None:
    daemon = await start_daemon({"alpha": {}}, extra=big_table(marker) + DEBUG)
    result: dict[str, Any] = {}
    async with connect(daemon.socket) as a, connect(daemon.socket) as b:
        async with anyio.create_task_group() as tg:

            async def compose() -> None:
                result.update(
                    (await a.compose("cache eviction retry backoff", budget=2000)).to_wire()
                )

            tg.start_soon(compose)
            await _status_after(daemon, b, "mcp.frames.building")
    assert await daemon.stop() == 0
    rid = result["request_id"]
    building = _index(daemon, "mcp.frames.building", rid)
    built = _index(daemon, "mcp.frames.built", rid)
    answered = [
        i
        for i, e in enumerate(daemon.log)
        if e.get("event") == "request.done" and e.get("method") == "host/status"
    ]
    assert any(building < i < built for i in answered), (building, built, answered)
    # And the leg still gave evidence: chunks of those megabytes, not nothing.
    legs = {p["provider_id"]: p for p in result["providers"]}
    assert legs["big"]["status"] == "ok" and legs["big"]["frames_accepted"] > 0, legs["big"]
    assert legs["alpha"]["status"] == "ok"


async def test_a_cancelled_leg_abandons_its_work_and_the_daemon_serves_on(
    start_daemon: Any, marker: str
) -> None:
    daemon = await start_daemon({"alpha": {}}, extra=big_table(marker) + DEBUG)
    async with connect(daemon.socket) as a, connect(daemon.socket) as b:
        async with anyio.create_task_group() as tg:
            cancelled = anyio.Event()

            async def compose() -> None:
                with anyio.CancelScope() as scope:
                    tg.start_soon(_cancel_when, scope, cancelled)
                    await a.compose("cache eviction retry backoff", budget=2000)
                    raise AssertionError("the composition was not cancelled")

            tg.start_soon(compose)
            await _status_after(daemon, b, "mcp.frames.building")
            cancelled.set()  # the client's cancel sends $/cancel (hostd.client)
        # The abandoned work is over once the binding says so; the daemon serves on.
        await daemon.logged("mcp.frames.abandoned")
        again = (await a.compose("cache eviction", budget=300, providers=["alpha"])).to_wire()
        assert again["providers"][0]["status"] == "ok"
    assert await daemon.stop() == 0
    assert daemon.events("request.cancelled")
    assert not daemon.events("mcp.frames.built")


async def _cancel_when(scope: anyio.CancelScope, event: anyio.Event) -> None:
    await event.wait()
    scope.cancel()
