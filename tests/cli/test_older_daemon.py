"""A ``--connect`` command asks the daemon which config it was started from with one
``host/status``, and a daemon too old to say is let be: the command goes on as before,
silently. The real ``hostd`` CLI as a child; the daemon is a stand-in served by the
test on a Unix socket, answering as a daemon older than ``config`` would (a status
without it, or no ``host/status`` at all). Every wait is an event (a line, an exit)."""

from __future__ import annotations

import json
import sys
import tempfile
from pathlib import Path
from typing import Any

import anyio
import pytest
from anyio.abc import SocketStream

from tests.fixtures.procs import ROOT

pytestmark = pytest.mark.anyio

HANG_GUARD_S = 120
ROW = {"id": "alpha", "binding": "process", "state": "ready", "info": {"name": "alpha"}}


def _reply(request: dict[str, Any], status: str) -> dict[str, Any]:
    method, id_ = request.get("method"), request.get("id")
    if method == "host/status" and status == "absent":  # older than host/status itself
        error = {"code": -32601, "message": "method not found"}
        return {"jsonrpc": "2.0", "error": error, "id": id_}
    if method == "host/status":  # a status from before `config`
        return {"jsonrpc": "2.0", "result": {"state": "serving", "pid": 1}, "id": id_}
    return {"jsonrpc": "2.0", "result": {"providers": [ROW], "reranker": None}, "id": id_}


async def _serve(stream: SocketStream, status: str, asked: list[str]) -> None:
    buf = b""
    async with stream:
        while True:
            try:
                buf += await stream.receive()
            except (anyio.EndOfStream, anyio.BrokenResourceError):
                return
            *lines, buf = buf.split(b"\n")
            for line in lines:
                request = json.loads(line)
                asked.append(request["method"])
                await stream.send(json.dumps(_reply(request, status)).encode() + b"\n")


@pytest.mark.parametrize("status", ["absent", "without_config"])
async def test_a_daemon_that_cannot_say_its_config_is_asked_once_and_let_be(status: str) -> None:
    with tempfile.TemporaryDirectory(prefix="hd-") as tmp:  # short: AF_UNIX paths
        folder = Path(tmp)
        config = folder / "hostd.toml"
        config.write_text('[[provider]]\nid = "alpha"\ncommand = ["x"]\n', encoding="utf-8")
        socket = folder / "d.sock"
        asked: list[str] = []
        listener = await anyio.create_unix_listener(socket)
        async with listener, anyio.create_task_group() as tg:

            async def accept() -> None:
                while True:
                    stream = await listener.accept()
                    tg.start_soon(_serve, stream, status, asked)

            tg.start_soon(accept)
            command = [sys.executable, "-m", "hostd", "--config", str(config), "providers"]
            with anyio.fail_after(HANG_GUARD_S):
                done = await anyio.run_process(
                    [*command, "--connect", str(socket)], cwd=ROOT, check=False
                )
            tg.cancel_scope.cancel()
    err = done.stderr.decode()
    assert done.returncode == 0, err
    assert done.stdout.decode().split("\t")[0] == "alpha"
    assert "started from an older" not in err and "hostd:" not in err, err
    # One host/status per command, before the command's own call.
    assert asked == ["host/status", "providers/list"]
