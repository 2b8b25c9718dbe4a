"""A remote provider whose server is down, over a real daemon: its outage is a warning
as it begins, not one more on every request.

The first request waits for the provider's first check and is told its failure
(``provider.leg.failed``); every later leg fails at once, never sent (its next check is
not waited for), and is logged ``provider.leg`` at info: no news, the outage was told.
"""

from __future__ import annotations

import socket
from typing import Any

import pytest

from hostd.client import connect

pytestmark = pytest.mark.anyio

LEG_EVENTS = ("provider.leg", "provider.leg.failed", "provider.leg.quarantined")


def _closed_port() -> int:
    """A loopback port bound and closed again: nothing listens, a connect is refused."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
    return port


async def test_a_down_servers_legs_warn_once_not_on_every_request(start_daemon: Any) -> None:
    # Plaintext on loopback (C7); lazy, so the first request waits for the first check.
    table = f'[[provider]]\nid = "down"\nurl = "http://127.0.0.1:{_closed_port()}/"\n'
    daemon = await start_daemon({"alpha": {}}, extra=table, start_providers="lazy")
    rids = []
    async with connect(daemon.socket) as client:
        for _ in range(5):
            result = (await client.compose("is it up", budget=300)).to_wire()
            (leg,) = [p for p in result["providers"] if p["provider_id"] == "down"]
            assert leg["status"] != "ok", leg
            rids.append(result["request_id"])
    assert await daemon.stop() == 0
    legs = [
        (rids.index(e["request_id"]), e["event"], e["level"])
        for name in LEG_EVENTS
        for e in daemon.events(name)
        if e.get("provider") == "down"
    ]
    # One event per leg: the first a warning, the four never sent at info.
    assert sorted(legs) == [
        (0, "provider.leg.failed", "warning"),
        *[(n, "provider.leg", "info") for n in range(1, 5)],
    ]
