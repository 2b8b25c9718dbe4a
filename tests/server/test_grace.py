"""The graceful stop seen from a client that connects late: answered, never left waiting."""

from __future__ import annotations

import json
from typing import Any

import anyio
import pytest

from hostd.client import RpcError, connect
from tests.server.conftest import ROOT, provider_table
from tests.server.flood import AUTH_AND_STATUS, TOKEN
from tests.server.test_malformed import Raw, assert_error

pytestmark = pytest.mark.anyio

TCP = f'\n[tcp]\nenabled = true\nhost = "127.0.0.1"\nport = 0\ntoken = "{TOKEN}"\n'
LATE = 16  # of each kind: Unix socket and TCP


def _compose(id_: int, **params: Any) -> bytes:
    params = {"goal": "late", **params}
    msg = {"jsonrpc": "2.0", "id": id_, "method": "context/compose", "params": params}
    return json.dumps(msg).encode() + b"\n"


async def _late_unix(daemon: Any, replies: list[Any]) -> None:
    async with await anyio.connect_unix(daemon.socket) as stream:
        raw = Raw(stream)
        await raw.send(_compose(1) + _compose(2))  # both answered, neither lost
        replies.extend([await raw.line(), await raw.line()])


async def _late_tcp(host: str, port: int, replies: list[Any]) -> None:
    async with await anyio.connect_tcp(host, port) as stream:
        raw = Raw(stream)
        await raw.send(AUTH_AND_STATUS)
        assert (await raw.line())["result"] == {"authenticated": True}
        replies.append(await raw.line())


async def test_a_connection_opened_in_the_grace_period_is_answered_shutting_down(
    start_daemon, marker
) -> None:
    # A provider that answers in no time the test could take: the request it holds keeps
    # the grace period open until the test ends it (a second SIGTERM), however slow.
    slow = provider_table("slow", marker, delay_ms=600_000)
    slow = slow.replace("timeout_ms = 10000", "timeout_ms = 600000")
    daemon = await start_daemon({}, grace_period_s=600, extra=slow + TCP)
    host, port = daemon.events("host.serving")[0]["tcp"]
    late: list[Any] = []
    async with connect(daemon.socket) as client, await anyio.connect_unix(daemon.socket) as held:
        stuck = Raw(held)  # its request is in flight through the whole grace period
        await stuck.send(_compose(0, timeout_ms=600_000))
        with anyio.fail_after(30):
            while (await client.status())["in_flight"] < 2:
                pass
        daemon.signal()
        # The grace period has begun once this connection's requests are refused.
        with anyio.fail_after(30), pytest.raises(RpcError) as refused:
            while True:
                await client.status()
        assert refused.value.remote_reason == "shutting_down"
        # Every late client is answered within the hang guard, long before the grace
        # period (600 s) would end.
        with anyio.fail_after(60):
            async with anyio.create_task_group() as clients:
                for _ in range(LATE):
                    clients.start_soon(_late_unix, daemon, late)
                    clients.start_soon(_late_tcp, host, port, late)
        daemon.signal()  # a second SIGTERM ends the grace period at once
        # The request held in flight is answered too, not cut off, with its own request
        # id (that of its log lines).
        aborted = assert_error(await stuck.line(), -32006, 0)["data"]
        assert aborted["reason"] == "shutting_down"
    assert await daemon.wait() == 0
    assert [e["request_id"] for e in daemon.events("request.aborted")] == [aborted["request_id"]]
    assert len(late) == 3 * LATE
    for reply in late:
        assert assert_error(reply, -32006)["data"]["reason"] == "shutting_down"
    assert daemon.events("host.grace_expired") and not daemon.socket.exists()


async def test_a_connect_while_the_providers_stop_is_refused_at_once(start_daemon, marker) -> None:
    # A provider asleep in a query ignores the end of its stdin: its stop takes the whole
    # grace period (then a signal), and that is when a client might still connect.
    hang = (
        '[[provider]]\nid = "hang"\ntimeout_ms = 100\n'
        f'command = ["python", "-m", "tests.fixtures.adversarial_provider", "hang", "{marker}"]\n'
        f'cwd = "{ROOT}"\n'
    )
    daemon = await start_daemon({}, grace_period_s=10, extra=hang + TCP)
    host, port = daemon.events("host.serving")[0]["tcp"]
    async with connect(daemon.socket) as client:
        result = await client.compose("put the provider to sleep")
        assert [p.status for p in result.providers] != ["ok"]
        assert (await client.shutdown())["stopping"] is True
    with anyio.fail_after(60):  # hang guard only
        while not daemon.events("host.stopping.providers"):
            await anyio.wait_all_tasks_blocked()
    # Refused (or, had the stop already ended, gone): never accepted only to be reset.
    with pytest.raises(OSError):
        await anyio.connect_unix(daemon.socket)
    with pytest.raises(OSError):
        await anyio.connect_tcp(host, port)
    assert await daemon.wait() == 0
