"""A minimal JSON-RPC peer for driving a provider program as a real child process."""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import anyio
from anyio.abc import Process
from anyio.streams.buffered import BufferedByteReceiveStream

from hostd.protocol import PROTOCOL_VERSION

REPO = Path(__file__).resolve().parents[2]


def child_env(extra: Mapping[str, str] | None = None) -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO), env.get("PYTHONPATH")]))
    env.update(extra or {})
    return env


class StdioPeer:
    """``async with StdioPeer(["-m", "providers.files", ...]) as peer: await peer.call(...)``."""

    def __init__(self, args: Sequence[str], env: Mapping[str, str] | None = None) -> None:
        self.args = [sys.executable, *args]
        self.env = child_env(env)
        self._next = 0
        #: Every ``context/progress`` notification read so far.
        self.notes: list[dict[str, Any]] = []
        self.proc: Process | None = None
        self._reader: BufferedByteReceiveStream | None = None

    async def __aenter__(self) -> StdioPeer:
        self.proc = await anyio.open_process(self.args, cwd=REPO, env=self.env, stderr=None)
        assert self.proc.stdout is not None
        self._reader = BufferedByteReceiveStream(self.proc.stdout)
        return self

    async def __aexit__(self, *exc: object) -> None:
        proc = self.proc
        assert proc is not None
        try:
            if proc.returncode is None and proc.stdin is not None:
                await self.notify("context/shutdown", {})
                await proc.stdin.aclose()
            with anyio.fail_after(15):
                await proc.wait()
        except BaseException:
            proc.kill()
            with anyio.CancelScope(shield=True):
                await proc.wait()
            raise
        finally:
            await proc.aclose()

    async def _send(self, message: dict[str, Any]) -> None:
        assert self.proc is not None and self.proc.stdin is not None
        await self.proc.stdin.send(json.dumps(message).encode() + b"\n")

    async def notify(self, method: str, params: dict[str, Any]) -> None:
        await self._send({"jsonrpc": "2.0", "method": method, "params": params})

    async def call(self, method: str, params: dict[str, Any], within_s: float = 60) -> Any:
        """The ``result`` of one request; raises ``AssertionError`` on an error reply."""
        reply = await self.request(method, params, within_s)
        assert "error" not in reply, reply
        return reply["result"]

    async def request(self, method: str, params: dict[str, Any], within_s: float = 60) -> Any:
        assert self._reader is not None
        self._next += 1
        rid = self._next
        await self._send({"jsonrpc": "2.0", "id": rid, "method": method, "params": params})
        with anyio.fail_after(within_s):
            while True:
                line = await self._reader.receive_until(b"\n", 64 * 1024 * 1024)
                reply = json.loads(line)
                if reply.get("method") == "context/progress":
                    self.notes.append(reply["params"])
                if reply.get("id") == rid:
                    return reply

    async def wait_ready(self, within_s: float = 300) -> None:
        """Read ``context/progress`` notes until one says the provider is ready."""
        assert self._reader is not None
        with anyio.fail_after(within_s):  # a hang guard
            while not self.notes or self.notes[-1].get("state") not in ("ready", "failed"):
                line = await self._reader.receive_until(b"\n", 64 * 1024 * 1024)
                reply = json.loads(line)
                if reply.get("method") == "context/progress":
                    self.notes.append(reply["params"])
        assert self.notes[-1]["state"] == "ready", self.notes[-1]

    async def handshake(self, *, wait_ready: bool = True) -> dict[str, Any]:
        """The handshake result; then (unless told not to) wait until the provider is ready."""
        ack: dict[str, Any] = await self.call(
            "context/handshake",
            {"protocol_version": PROTOCOL_VERSION, "host": {"name": "test", "version": "0"}},
        )
        if wait_ready and ack.get("ready") is False:
            await self.wait_ready()
        return ack
