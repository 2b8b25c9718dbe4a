"""What text ``hostd status`` tells the operator of a shared daemon (docs/cli.md): the
build it runs, both listeners, the request and connection counters, and a provider's
restarts after a crash it recovered from. A real daemon serving a Unix socket and
loopback TCP; its provider's process killed (``kill -9``, as the OOM killer does)
while idle; every wait is a log event."""

from __future__ import annotations

import json
import os
import re
import signal
from typing import Any

import anyio
import pytest

from hostd._build import build_version
from hostd.client import connect
from hostd.errors import RpcError
from tests.fixtures.cli import run_hostd

pytestmark = pytest.mark.anyio

TCP = '\n[tcp]\nenabled = true\nhost = "127.0.0.1"\nport = 0\ntoken = "s3cret-token"\n'


async def test_status_shows_listeners_counters_and_a_recovered_providers_restart(
    start_daemon: Any,
) -> None:
    daemon = await start_daemon({"alpha": {}}, extra=TCP, start_providers="boot")
    host, port = daemon.events("host.serving")[0]["tcp"]
    await daemon.logged("provider.handshake.ok", provider="alpha")
    async with connect(daemon.socket) as client:  # open through the status: 1 other
        await client.call("context/compose", {"goal": "anything", "budget": 200})
        with pytest.raises(RpcError):  # a failed request, counted as one
            await client.call("context/compose", {"goal": "x", "providers": ["nope"]})
        (row,) = (await client.call("providers/list", {}))["providers"]
        os.kill(row["health"]["pid"], signal.SIGKILL)
        await daemon.logged("provider.recovered", provider="alpha", was="crashed")

        def status(*args: str) -> Any:
            return run_hostd("--config", str(daemon.config), "status", *args)

        shown = await anyio.to_thread.run_sync(status)
        as_json = await anyio.to_thread.run_sync(status, "--json")
    assert shown.returncode == 0, shown.stderr  # up again: nothing is down
    lines = shown.stdout.splitlines()
    # The build it runs, as `hostd --version` of the same checkout says it.
    assert lines[0].startswith(f"hostd {build_version()} (pid ")
    assert f"socket: {daemon.socket}; tcp: {host}:{port}" in lines
    # Three requests of the client's done before it (one failed); its connection still
    # open, this command's own left out of what is open and in flight.
    (traffic,) = [line for line in lines if line.startswith("requests: ")]
    assert traffic == (
        "requests: 3 done (1 failed), 0 others in flight; connections: 1 other open, 2 since start"
    )
    (alpha,) = [line for line in lines if line.startswith("provider alpha: ")]
    assert re.fullmatch(
        r"provider alpha: ready.*; restarted 1 time, last failure \d+ s ago", alpha
    ), alpha
    (listed,) = json.loads(as_json.stdout)["providers"]
    assert listed["restarts"] == 1 and listed["crashes"] == 0  # killed idle: no query lost
    # The same words (the age of its failure read a moment later: not compared).
    ago = re.compile(r"\d+ s ago$")
    assert ago.sub("", f"provider alpha: {listed['detail']}") == ago.sub("", alpha)
    assert "runs hostd" not in shown.stderr  # the daemon and this command: one build
    assert await daemon.stop() == 0
