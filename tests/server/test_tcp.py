"""Opt-in loopback TCP: bearer token first, non-loopback binds refused."""

from __future__ import annotations

import contextlib
import json

import anyio
import anyio.abc
import pytest

from hostd.client import RpcError, connect, connect_tcp
from tests.server.conftest import ROOT, daemon_command

pytestmark = pytest.mark.anyio

TCP = '\n[tcp]\nenabled = true\nhost = "127.0.0.1"\nport = 0\ntoken = "s3cret-token"\n'


async def test_tcp_serves_only_after_the_bearer_token(start_daemon) -> None:
    daemon = await start_daemon({"alpha": {}}, extra=TCP)
    host, port = daemon.events("host.serving")[0]["tcp"]
    async with connect_tcp(host, port, "s3cret-token") as client:
        assert (await client.compose("over tcp", budget=300)).citations
    with pytest.raises(RpcError) as exc:
        async with connect_tcp(host, port, "wrong"):
            pass
    assert exc.value.remote_reason == "unauthorized"
    assert "the bearer token is not this daemon's" in str(exc.value)  # a wrong token
    # Each way of getting it wrong is told apart, the token never repeated.
    told = {
        b'{"jsonrpc":"2.0","id":1,"method":"host/status"}\n': "the first message must be",
        b'{"jsonrpc":"2.0","id":1,"method":"$/authenticate","params":["s3cret-token"]}\n': (
            'takes the bearer token as params {"token"'
        ),
    }
    for line, words in told.items():
        async with await anyio.connect_tcp(host, port) as stream:
            await stream.send(line)
            reply = json.loads((await stream.receive()).split(b"\n")[0])
        assert reply["error"]["data"]["reason"] == "unauthorized"
        assert words in reply["error"]["message"], reply
        assert "s3cret" not in reply["error"]["message"]
    assert "s3cret-token" not in "\n".join(daemon.log_text)
    assert await daemon.stop() == 0


async def test_a_non_loopback_bind_is_refused(workdir) -> None:
    config = workdir / "hostd.toml"
    config.write_text(
        f'[host]\nsocket = "{workdir}/run/s.sock"\nstate_dir = "{workdir}/state"\n'
        + TCP.replace("127.0.0.1", "0.0.0.0")
    )
    done = await anyio.run_process(daemon_command(config, "serve"), check=False, cwd=ROOT)
    assert done.returncode == 2
    err = done.stderr.decode()
    assert "non-loopback" in err and "Traceback" not in err


async def _closed(stream: anyio.abc.SocketStream) -> bytes:
    """Everything the daemon sends until it closes the connection."""
    got = b""
    with anyio.fail_after(30):
        while True:
            try:
                got += await stream.receive()
            except (anyio.EndOfStream, anyio.BrokenResourceError):
                return got


async def test_an_idle_unauthenticated_client_is_closed_at_the_deadline(start_daemon) -> None:
    # The client authenticates at once, but "at once" is a race with the deadline on a
    # busy machine: the deadline is generous (3 s), and the idle clients wait it out
    # side by side, so the test costs one deadline.
    daemon = await start_daemon({"alpha": {}}, extra=TCP, auth_timeout_s=3)
    host, port = daemon.events("host.serving")[0]["tcp"]
    async with await anyio.connect_tcp(host, port) as idle:
        # A client that authenticates in time keeps its connection past the deadline:
        # an idle client opened after it being closed proves its own deadline has passed.
        async with connect_tcp(host, port, "s3cret-token") as client:
            async with await anyio.connect_tcp(host, port) as later:
                assert await _closed(idle) == b""
                assert await _closed(later) == b""
            assert (await client.status())["state"] == "serving"
    assert await daemon.stop() == 0
    assert len(daemon.events("client.auth_timeout")) == 2  # the two idle ones, logged


async def test_an_over_long_line_before_authentication_closes_the_connection(
    start_daemon,
) -> None:
    daemon = await start_daemon({"alpha": {}}, extra=TCP, auth_timeout_s=60)
    host, port = daemon.events("host.serving")[0]["tcp"]
    for line in (b"x" * 5000 + b"\n", b'{"jsonrpc":"2.0","method":"' + b"x" * 20_000):
        async with await anyio.connect_tcp(host, port) as stream:
            await stream.send(line)
            reply = json.loads((await _closed(stream)).split(b"\n")[0])
            assert reply["error"]["data"]["reason"] == "line_too_long"
            assert reply["error"]["data"]["max_line_bytes"] == 4096
    assert await daemon.stop() == 0


async def test_unauthenticated_connections_never_lock_unix_clients_out(start_daemon) -> None:
    from hostd.server._daemon import MAX_UNAUTHENTICATED

    daemon = await start_daemon({"alpha": {}}, extra=TCP, auth_timeout_s=600, max_connections=2)
    host, port = daemon.events("host.serving")[0]["tcp"]
    async with contextlib.AsyncExitStack() as stack:
        held = [
            await stack.enter_async_context(await anyio.connect_tcp(host, port))
            for _ in range(MAX_UNAUTHENTICATED)
        ]
        # The cap is full: one more unauthenticated connection evicts the oldest.
        async with await anyio.connect_tcp(host, port):
            assert await _closed(held[0]) == b""
            async with connect(daemon.socket) as client:
                status = await client.status()
        assert status["counters"]["connections_unauthenticated"] == MAX_UNAUTHENTICATED
        assert status["counters"]["connections_evicted"] == 1
        assert status["counters"]["connections_open"] == 1
    assert await daemon.stop() == 0


async def test_an_authenticated_tcp_client_past_max_connections_is_refused(start_daemon) -> None:
    # max_connections counts Unix and *authenticated* TCP clients together: with both
    # slots held, a right token is answered "overloaded" and its connection closed.
    daemon = await start_daemon({"alpha": {}}, extra=TCP, max_connections=2)
    host, port = daemon.events("host.serving")[0]["tcp"]
    async with connect(daemon.socket) as first, connect_tcp(host, port, "s3cret-token") as second:
        with pytest.raises(RpcError) as exc:
            async with connect_tcp(host, port, "s3cret-token"):
                pass
        assert exc.value.remote_reason == "overloaded"
        counters = (await first.status())["counters"]
        assert counters["connections_open"] == 2
        assert counters["connections_refused"] == 1
        assert (await second.status())["state"] == "serving"
    refused = daemon.events("host.connection_refused")
    assert [(e["counted"], e["limit"]) for e in refused] == [("connections_open", 2)]
    assert await daemon.stop() == 0
