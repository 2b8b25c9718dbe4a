"""``hostd mcp`` (in-process, no ``--connect``) reloads its config file on SIGHUP, as
``hostd serve`` does: the same reload, logged the same way. ``hostd mcp --connect``,
whose config is its daemon's, asks the daemon to reload on SIGHUP, and serves on.

A real ``hostd mcp`` child over raw MCP lines: the file is rewritten, the child sent
SIGHUP, and what it did is read from its log events on stderr and ``list_providers``,
never from a sleep.
"""

from __future__ import annotations

import json
import signal
import sys
from pathlib import Path
from typing import Any

import anyio
import pytest
from anyio.abc import Process
from anyio.streams.buffered import BufferedByteReceiveStream

from tests.server.conftest import marked_processes
from tests.server.conftest import write_config as daemon_config

from ._harness import INITIALIZE, INITIALIZED, PATIENT_MS, ROOT, write_config

pytestmark = pytest.mark.anyio

#: A hang guard, never the thing tested.
_GUARD_S = 120


class _Child:
    """``hostd mcp`` with its stdout read line by line and its log events gathered."""

    def __init__(self, process: Process) -> None:
        assert process.stdin and process.stdout and process.stderr
        self.process = process
        self.stdout = BufferedByteReceiveStream(process.stdout)
        self.stderr = BufferedByteReceiveStream(process.stderr)
        self.ids = iter(range(2, 1 << 30))

    async def send(self, message: dict[str, Any]) -> None:
        assert self.process.stdin is not None
        await self.process.stdin.send(json.dumps(message).encode() + b"\n")

    async def reply(self, id_: int) -> dict[str, Any]:
        while True:
            message: dict[str, Any] = json.loads(await self.stdout.receive_until(b"\n", 1 << 24))
            if message.get("id") == id_:
                return message

    async def event(self, name: str) -> dict[str, Any]:
        """The next log event ``name`` on stderr (those before it are read past)."""
        while True:
            line = await self.stderr.receive_until(b"\n", 1 << 20)
            try:
                event: dict[str, Any] = json.loads(line)
            except ValueError:  # a line that is not a log event
                continue
            if event.get("event") == name:
                return event

    async def providers(self) -> list[str]:
        id_ = next(self.ids)
        params = {"name": "list_providers", "arguments": {}}
        await self.send({"jsonrpc": "2.0", "id": id_, "method": "tools/call", "params": params})
        result = (await self.reply(id_))["result"]
        return [p["id"] for p in result["structuredContent"]["providers"]]


async def test_sighup_reloads_hostd_mcp_and_an_invalid_file_changes_nothing(
    workdir: Path, marker: str
) -> None:
    config = write_config(workdir, marker, {"alpha": {}, "beta": {}})
    command = [sys.executable, "-m", "hostd", "--config", str(config), "--log-level", "info"]
    command += ["mcp", "--ready-wait-ms", str(PATIENT_MS)]
    with anyio.fail_after(_GUARD_S):
        async with await anyio.open_process(command, cwd=ROOT) as process:
            child = _Child(process)
            await child.send(INITIALIZE)
            await child.reply(0)  # the SIGHUP handler is in before the session serves
            await child.send(INITIALIZED)
            assert await child.providers() == ["alpha", "beta"]

            write_config(workdir, marker, {"alpha": {}, "gamma": {}})
            process.send_signal(signal.SIGHUP)
            reloaded = await child.event("host.reloaded")
            listed = await child.providers()

            config.write_text("[host\n", encoding="utf-8")
            process.send_signal(signal.SIGHUP)
            failed = await child.event("host.reload.failed")
            kept = await child.providers()

            assert process.stdin is not None
            await process.stdin.aclose()
            await process.wait()
    assert (reloaded["trigger"], reloaded["config"]) == ("SIGHUP", str(config))
    assert (reloaded["started"], reloaded["stopped"]) == (["gamma"], ["beta"])
    assert listed == ["alpha", "gamma"]
    assert (failed["level"], failed["trigger"]) == ("error", "SIGHUP")
    assert "not valid TOML" in failed["error"]
    assert kept == ["alpha", "gamma"]
    assert process.returncode == 0
    assert marked_processes(marker) == []


async def test_sighup_to_hostd_mcp_connect_asks_its_daemon_to_reload_and_serves_on(
    start_daemon: Any, workdir: Path, marker: str
) -> None:
    daemon = await start_daemon({"alpha": {}})
    own = workdir / "mcp"
    own.mkdir()
    config = write_config(own, marker, {})  # the daemon's config is not this one
    command = [sys.executable, "-m", "hostd", "--config", str(config), "--log-level", "info"]
    command += ["mcp", "--connect", str(daemon.socket)]
    with anyio.fail_after(_GUARD_S):
        async with await anyio.open_process(command, cwd=ROOT) as process:
            child = _Child(process)
            await child.send(INITIALIZE)
            await child.reply(0)  # the SIGHUP handler is in before the session serves
            await child.send(INITIALIZED)
            assert await child.providers() == ["alpha"]

            edited = daemon_config(workdir, marker, {"alpha": {}, "gamma": {}})
            daemon.config.write_text(edited, encoding="utf-8")
            process.send_signal(signal.SIGHUP)
            forwarded = await child.event("mcp.reload.forwarded")
            listed = await child.providers()

            daemon.config.write_text("[host\n", encoding="utf-8")
            process.send_signal(signal.SIGHUP)
            failed = await child.event("mcp.reload.failed")
            kept = await child.providers()

            assert process.stdin is not None
            await process.stdin.aclose()
            await process.wait()
        assert await daemon.stop() == 0
    assert (forwarded["trigger"], forwarded["socket"]) == ("SIGHUP", str(daemon.socket))
    assert (forwarded["started"], forwarded["stopped"]) == (["gamma"], [])
    assert listed == ["alpha", "gamma"]
    assert failed["level"] == "warning" and "not valid TOML" in failed["error"]
    assert kept == ["alpha", "gamma"]
    assert process.returncode == 0
