"""A rotated ``tcp.token_file`` is in force with no restart, and a TCP client who stops
or reloads the daemon is named in the log by its address.

A real daemon, real TCP clients: the old token works, the file is rewritten, the new
token works and the old one is refused (its open connection closed); a file that holds
no token refuses every client, while the Unix socket serves on; ``host/reload`` reads
the file whatever its stat says. Decided by replies and the daemon's log events.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import anyio
import pytest

from hostd.client import RpcError, connect, connect_tcp

pytestmark = pytest.mark.anyio


def _write(path: Path, text: str) -> None:
    """Rotate as an operator does: a new file renamed over the old one."""
    new = path.with_suffix(".new")
    new.write_text(text, encoding="utf-8")
    new.chmod(0o600)
    os.replace(new, path)


async def _refused(host: str, port: int, token: str) -> str:
    with pytest.raises(RpcError) as exc:
        async with connect_tcp(host, port, token):
            pass
    assert exc.value.remote_reason == "unauthorized"
    return exc.value.message


async def test_a_rotated_token_file_is_in_force_at_the_next_authentication(
    start_daemon: Any, workdir: Path
) -> None:
    token_file = workdir / "team.token"
    await anyio.to_thread.run_sync(_write, token_file, "old-token\n")
    tcp = f'\n[tcp]\nenabled = true\nport = 0\ntoken_file = "{token_file}"\n'
    daemon = await start_daemon({"alpha": {}}, extra=tcp)
    host, port = daemon.events("host.serving")[0]["tcp"]
    async with connect_tcp(host, port, "old-token") as held:
        assert (await held.call("host/status", {}))["state"] == "serving"

        await anyio.to_thread.run_sync(_write, token_file, "new-token\n")
        async with connect_tcp(host, port, "new-token") as client:
            assert (await client.call("host/status", {}))["state"] == "serving"
        assert "not this daemon's" in await _refused(host, port, "old-token")
        # The connection opened with the old token is closed: a revoked developer's
        # agent keeps no door open.
        revoked = await daemon.logged("host.tcp.connections_revoked")
        assert len(revoked["connections"]) == 1, revoked
        with pytest.raises(Exception):  # noqa: B017 - closed: any way the client says it
            await held.call("host/status", {})

    # A file that holds no token opens no door: every client refused, said at error.
    await anyio.to_thread.run_sync(_write, token_file, "")
    assert "cannot read its [tcp] token_file" in await _refused(host, port, "new-token")
    unreadable = await daemon.logged("host.tcp.token_unreadable")
    assert unreadable["file"] == str(token_file) and unreadable["level"] == "error"
    async with connect(daemon.socket) as local:  # the Unix socket serves on
        assert (await local.call("host/status", {}))["state"] == "serving"
        # hostd reload reads the file again and says what it found.
        await anyio.to_thread.run_sync(_write, token_file, "third-token\n")
        reloaded = await local.call("host/reload", {})
    assert reloaded["tcp_token"] == {"state": "changed", "closed": 0}
    async with connect_tcp(host, port, "third-token") as client:
        assert (await client.call("host/status", {}))["state"] == "serving"
    await _refused(host, port, "new-token")
    assert not any("-token" in line for line in daemon.log_text)  # no token logged
    assert await daemon.stop() == 0


async def test_a_tcp_client_that_reloads_or_stops_the_daemon_is_named_by_its_address(
    start_daemon: Any,
) -> None:
    tcp = '\n[tcp]\nenabled = true\nport = 0\ntoken = "team-token"\n'
    daemon = await start_daemon({"alpha": {}}, extra=tcp)
    host, port = daemon.events("host.serving")[0]["tcp"]
    async with connect_tcp(host, port, "team-token") as client:
        await client.call("host/reload", {})
        reload = await daemon.logged("host.reload.requested")
        await client.call("host/shutdown", {})
    shutdown = await daemon.logged("host.shutdown.requested")
    assert await daemon.wait() == 0
    for event in (reload, shutdown):
        assert event["connection"].startswith("tcp#"), event
        address, _, peer_port = event["peer"].rpartition(":")
        assert address == "127.0.0.1" and int(peer_port) not in (0, port), event
