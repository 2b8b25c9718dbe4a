"""A provider's malformed reply fails that request's leg alone: a real daemon, a real child.

The provider answers one query with its frames under ``results`` (no ``frames``), as an
author's first provider often does, and the next one well. The daemon reports the
first leg malformed, as the audit and log always did, and serves the second from the
same process: no restart, no crash counted, its health naming the malformed reply.
"""

from __future__ import annotations

import pytest

from hostd.client import connect
from tests.server.conftest import ROOT

pytestmark = pytest.mark.anyio


def _malformed_once(marker: str) -> str:
    # The marker rides in the argv, so the harness finds the process if it outlives us.
    return (
        '[[provider]]\nid = "adv"\ncommand = ["python", "-m", '
        '"tests.fixtures.adversarial_provider", "malformed", "--name", '
        f'"adv-{marker}"]\ntimeout_ms = 60000\ncwd = "{ROOT}"\n'
    )


async def test_a_malformed_reply_fails_its_request_and_the_same_process_serves_the_next(
    start_daemon, marker: str
) -> None:
    daemon = await start_daemon(providers={}, extra=_malformed_once(marker), start_providers="boot")
    await daemon.logged("provider.handshake.ok", provider="adv")
    async with connect(daemon.socket) as client:
        (before,) = (await client.call("providers/list", {}))["providers"]
        bad = (await client.compose("malformed reply, please", budget=300)).to_wire()
        good = (await client.compose("a well formed reply", budget=300)).to_wire()
        (after,) = (await client.call("providers/list", {}))["providers"]
    assert await daemon.stop() == 0

    message = "malformed query result: result.frames is missing (members sent: results, truncated)"
    (leg,) = bad["providers"]
    assert leg["status"] == "error", leg
    assert leg["error"] == {"code": "protocol_fault", "message": message}
    (failed,) = [
        e for e in daemon.events("provider.leg.failed") if e["request_id"] == bad["request_id"]
    ]
    assert failed["message"] == message
    (leg,) = good["providers"]
    assert leg["status"] == "ok", leg
    assert good["citations"]
    health = after["health"]
    assert health["pid"] == before["health"]["pid"]
    assert (health["starts"], health["restarts"], health["crashes"]) == (1, 0, 0)
    assert (health["consecutive_failures"], health["errors"]) == (0, 1)
    assert health["last_error"] == message
    assert not daemon.events("provider.exited")
