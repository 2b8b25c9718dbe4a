"""Floods of connections over real sockets: unauthenticated TCP peers can lock no client
out, and what they cause is bounded in the log (counted and summarised, never lost)."""

from __future__ import annotations

from datetime import datetime
from typing import Any

import anyio
import pytest

from hostd.client import connect
from hostd.server._daemon import MAX_UNAUTHENTICATED
from tests.server.flood import TOKEN, Flooder, authenticated_status

pytestmark = pytest.mark.anyio

TCP = f'\n[tcp]\nenabled = true\nhost = "127.0.0.1"\nport = 0\ntoken = "{TOKEN}"\n'


async def _until(client: Any, key: str, value: int) -> dict[str, Any]:
    """The daemon's counters once ``key`` reads ``value`` (asked over ``client``)."""
    with anyio.fail_after(120):  # hang guard only
        while True:
            counters: dict[str, Any] = (await client.status())["counters"]
            if counters.get(key, 0) == value:
                return counters


async def test_a_reopening_flood_of_unauthenticated_peers_locks_no_tcp_client_out(
    start_daemon,
) -> None:
    daemon = await start_daemon({"alpha": {}}, extra=TCP, auth_timeout_s=600)
    host, port = daemon.events("host.serving")[0]["tcp"]
    flood = Flooder(lambda: anyio.connect_tcp(host, port), MAX_UNAUTHENTICATED, target=10_000)
    async with connect(daemon.socket) as watcher, anyio.create_task_group() as tg:
        tg.start_soon(flood.run)
        await _until(watcher, "connections_unauthenticated", MAX_UNAUTHENTICATED)
        # The cap is held, and every connection the daemon closes is opened again.
        got = [await authenticated_status(host, port) for _ in range(20)]
        assert got == [True] * 20
        # Each client that came in took the place of the oldest peer, and nothing more:
        # the flood re-fills the cap, every eviction is a close the flooder saw.
        counters = await _until(watcher, "connections_unauthenticated", MAX_UNAUTHENTICATED)
        with anyio.fail_after(120):  # hang guard only
            await flood.closes(counters["connections_evicted"])
        await flood.stop()
    # The first client met a full cap (each later one may meet a place not yet re-filled).
    assert counters["connections_evicted"] >= 1
    assert counters.get("connections_refused", 0) == 0
    assert flood.closed == counters["connections_evicted"]
    assert await daemon.stop() == 0


def _seconds(event: dict[str, Any]) -> float:
    return datetime.fromisoformat(event["timestamp"].replace("Z", "+00:00")).timestamp()


def _bounded(daemon: Any, event: str) -> int:
    """``event`` was logged within its bucket (20, then 1 a second: the bound holds
    however slow the machine, the span is the daemon's own) and the rest is counted in
    its ``.suppressed`` summaries, whose counts add up; returns logged + suppressed."""
    logged = daemon.events(event)
    summaries = daemon.events(f"{event}.suppressed")
    assert logged, event
    span = _seconds(logged[-1]) - _seconds(logged[0])
    assert len(logged) <= 20 + 1.0 * (span + 1) + 1, (event, len(logged), span)
    assert summaries, event
    suppressed = sum(s["since_last"] for s in summaries)
    assert summaries[-1]["suppressed"] == suppressed, event
    assert all("connection" not in s for s in summaries), event
    return len(logged) + suppressed


async def test_floods_of_refused_evicted_and_unauthorized_peers_are_bounded_in_the_log(
    start_daemon,
) -> None:
    daemon = await start_daemon({"alpha": {}}, extra=TCP, auth_timeout_s=600, max_connections=4)
    host, port = daemon.events("host.serving")[0]["tcp"]
    wrong = b'{"jsonrpc":"2.0","id":1,"method":"$/authenticate","params":{"token":"no"}}\n'
    floods = [
        # Unix clients past max_connections (the watcher holds one of the four slots).
        Flooder(lambda: anyio.connect_unix(daemon.socket), 8, target=600),
        # Half again as many unauthenticated peers as the cap: each evicts the oldest.
        Flooder(lambda: anyio.connect_tcp(host, port), MAX_UNAUTHENTICATED * 3 // 2, 600),
        # Peers with the wrong token: each is told so and closed.
        Flooder(lambda: anyio.connect_tcp(host, port), 4, target=300, first=wrong),
    ]
    async with connect(daemon.socket) as watcher:
        for flood in floods:
            with anyio.fail_after(300):  # hang guard only
                async with anyio.create_task_group() as tg:
                    tg.start_soon(flood.run)
                    await flood.done.wait()
                    await flood.stop()
        assert (await watcher.status())["state"] == "serving"
    assert await daemon.stop() == 0
    refused = _bounded(daemon, "host.connection_refused")
    evicted = _bounded(daemon, "host.connection_evicted")
    # Nothing lost from the count: the daemon's own counters, logged as it stopped.
    counters = daemon.events("host.stopped")[0]["counters"]
    assert (refused, evicted) == (counters["connections_refused"], counters["connections_evicted"])
    assert refused >= 600 and evicted >= 600
    # Every peer told "unauthorized" is in the log's count (a cancelled one may be too).
    told = sum(b"unauthorized" in line for line in floods[2].replies)
    assert _bounded(daemon, "client.unauthorized") >= told >= 300
