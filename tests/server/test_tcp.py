"""Opt-in loopback TCP: bearer token first, non-loopback binds refused."""

from __future__ import annotations

import json

import anyio
import pytest

from hostd.client import RpcError, connect_tcp
from tests.server.conftest import ROOT, daemon_command

pytestmark = pytest.mark.anyio

TCP = '\n[tcp]\nenabled = true\nhost = "127.0.0.1"\nport = 0\ntoken = "s3cret-token"\n'


async def test_tcp_serves_only_after_the_bearer_token(start_daemon) -> None:
    daemon = await start_daemon({"alpha": {}}, extra=TCP)
    host, port = daemon.events("host.serving")[0]["tcp"]
    async with connect_tcp(host, port, "s3cret-token") as client:
        assert (await client.compose("over tcp", budget=300))["citations"]
    with pytest.raises(RpcError) as exc:
        async with connect_tcp(host, port, "wrong"):
            pass
    assert exc.value.remote_reason == "unauthorized"
    # Without $/authenticate first, a request is refused and the connection closed.
    async with await anyio.connect_tcp(host, port) as stream:
        await stream.send(b'{"jsonrpc":"2.0","id":1,"method":"host/status"}\n')
        reply = json.loads((await stream.receive()).split(b"\n")[0])
        assert reply["error"]["data"]["reason"] == "unauthorized"
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
