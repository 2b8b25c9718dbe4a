"""The daemon keeps its socket file its own: bound again when deleted, and it steps
aside when another daemon's socket took the path. Real daemon processes, real sockets."""

from __future__ import annotations

import os
import socket

import pytest

from hostd.client import connect, connect_tcp
from tests.server.test_tcp import TCP

pytestmark = pytest.mark.anyio


async def test_a_deleted_socket_is_bound_again(start_daemon) -> None:
    daemon = await start_daemon({"alpha": {}}, socket_check_s=0.05)
    inode = daemon.socket.lstat().st_ino
    daemon.socket.unlink()  # what a clean-up of /tmp does under a running daemon
    restored = await daemon.logged("host.socket_restored")
    assert restored["socket"] == str(daemon.socket)
    assert daemon.socket.lstat().st_ino != inode
    async with connect(daemon.socket) as client:
        assert (await client.status())["state"] == "serving"
        assert (await client.compose("after the socket came back", budget=300)).citations
    assert await daemon.stop() == 0
    assert not daemon.socket.exists()  # the new file is ours: removed at the end
    assert daemon.events("host.socket_lost") == []


def _replace_with_foreign_socket(path: os.PathLike[str]) -> socket.socket:
    """Put another listener's socket at ``path`` in one step (rename is atomic), as a
    second daemon started after the file went would."""
    other = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    staging = f"{os.fspath(path)}.other"
    other.bind(staging)
    other.listen()
    os.rename(staging, path)
    return other


async def test_a_daemon_whose_socket_was_replaced_steps_aside(start_daemon) -> None:
    daemon = await start_daemon({"alpha": {}}, socket_check_s=0.05)
    other = _replace_with_foreign_socket(daemon.socket)
    try:
        inode = daemon.socket.lstat().st_ino
        assert await daemon.wait() == 0
        (lost,) = daemon.events("host.socket_lost")
        assert (lost["why"], lost["action"]) == ("replaced", "stopping")
        assert [e["reason"] for e in daemon.events("host.stopped")] == ["socket replaced"]
        # The other daemon's file is left where it is.
        assert daemon.socket.lstat().st_ino == inode
    finally:
        other.close()


async def test_with_another_way_in_the_daemon_keeps_serving_it(start_daemon) -> None:
    daemon = await start_daemon({"alpha": {}}, socket_check_s=0.05, extra=TCP)
    other = _replace_with_foreign_socket(daemon.socket)
    try:
        lost = await daemon.logged("host.socket_lost")
        assert (lost["why"], lost["action"]) == ("replaced", "serving")
        host, port = daemon.events("host.serving")[0]["tcp"]
        async with connect_tcp(host, port, "s3cret-token") as client:
            assert (await client.status())["state"] == "serving"
        assert await daemon.stop() == 0
        assert daemon.socket.exists()  # not ours any more: left alone
    finally:
        other.close()
