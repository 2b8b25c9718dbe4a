"""A Unix socket client is named in the log by the user and process the kernel says it
is (``SO_PEERCRED``), a TCP client by its address: on the line that opens its
connection and on a request that stops or reloads the daemon.

A real daemon, real clients from this test process: the uid and pid logged are its own.
"""

from __future__ import annotations

import os
import socket
from pathlib import Path
from typing import Any

import anyio
import pytest

from hostd.client import connect, connect_tcp
from hostd.server import _daemon

pytestmark = pytest.mark.anyio

needs_peercred = pytest.mark.skipif(
    not hasattr(socket, "SO_PEERCRED"), reason="this system does not say a socket's peer"
)


@needs_peercred
async def test_a_unix_socket_client_is_logged_with_its_uid_and_pid(start_daemon: Any) -> None:
    tcp = '\n[tcp]\nenabled = true\nport = 0\ntoken = "team-token"\n'
    daemon = await start_daemon({"alpha": {}}, extra=tcp)
    async with connect(daemon.socket) as client:
        await client.call("host/reload", {})
        opened = await daemon.logged("connection.opened", peer_pid=os.getpid())
        reload = await daemon.logged("host.reload.requested")
    assert opened["level"] == "info" and opened["connection"].startswith("unix#"), opened
    assert opened["peer_uid"] == os.getuid() and opened["peer"] is None, opened
    assert reload["connection"] == opened["connection"], reload
    assert (reload["peer_uid"], reload["peer_pid"]) == (os.getuid(), os.getpid()), reload

    host, port = daemon.events("host.serving")[0]["tcp"]
    async with connect_tcp(host, port, "team-token") as client:
        await client.call("host/status", {})
        (tcp_opened,) = [
            e
            for e in await daemon.logged_times("connection.opened", 2)
            if e["connection"].startswith("tcp#")
        ]
    # A TCP client keeps its address; it has no uid or pid the kernel vouches for.
    assert tcp_opened["peer"].startswith("127.0.0.1:"), tcp_opened
    assert "peer_pid" not in tcp_opened and "peer_uid" not in tcp_opened, tcp_opened
    assert await daemon.stop() == 0


async def test_a_system_without_peer_credentials_gives_no_identity(
    monkeypatch: pytest.MonkeyPatch, workdir: Path
) -> None:
    path = workdir / "s.sock"
    async with await anyio.create_unix_listener(path) as listener:
        client = await anyio.connect_unix(path)
        async with client, await listener.accept() as accepted:
            if hasattr(socket, "SO_PEERCRED"):
                assert _daemon._unix_credentials(accepted) == (os.getuid(), os.getpid())
            monkeypatch.setattr(_daemon, "_PEERCRED", None)
            assert _daemon._unix_credentials(accepted) is None
