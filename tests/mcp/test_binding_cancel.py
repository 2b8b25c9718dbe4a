"""An MCP call hostd abandons is cancelled on the server, and an answer that still comes is dropped.

MCP cancellation (basic/utilities/cancellation): a party that no longer wants an answer to
a request it sent sends ``notifications/cancelled`` with its ``requestId``, and "SHOULD
ignore any response to this request that may arrive afterward". A server on the SDK's
``MCPServer`` (``mcpserver_app tools``) whose tool blocks and says on a FIFO that it was
called, then that its handler was cancelled, is told when the composition asking it is
cancelled by its caller; a server that answers a call anyway, after its cancel
(``late_mcp_server``, lines written by hand: the SDK never answers a cancelled request),
costs nothing: its next call is answered. Decided by the servers' own words, never by a
clock: every deadline here is a hang guard.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

import anyio
import anyio.to_thread
import pytest
from structlog.testing import capture_logs

from hostd.server import Daemon
from tests.server.conftest import ROOT

from .test_binding import config_of, report

pytestmark = pytest.mark.anyio


def _table(pid: str, command: list[str], tools: list[str]) -> str:
    calls = ", ".join(f'{{name = "{t}", arguments = {{query = "{{query}}"}}}}' for t in tools)
    return (
        f'[[provider]]\nid = "{pid}"\nbinding = "mcp"\ncommand = {json.dumps(command)}\n'
        f'timeout_ms = 600000\nstart_timeout_s = 600\ncwd = "{ROOT}"\n'
        f"mcp = {{resources = false, tools = [{calls}]}}\n"
    )


async def _read(fifo: Path) -> str:
    return await anyio.to_thread.run_sync(fifo.read_text, abandon_on_cancel=True)


async def _cancelled_compose(session: Any, started: Path) -> None:
    """A composition cancelled by its caller once its call is running on the server."""
    with anyio.CancelScope() as scope:
        async with anyio.create_task_group() as tg:
            tg.start_soon(session.call, "context/compose", {"goal": "cache ttl eviction"})
            assert await _read(started) == "started\n"  # the call is on the server
            scope.cancel()


async def test_a_call_of_a_cancelled_composition_is_cancelled_on_the_server(
    workdir: Path,
) -> None:
    started, cancelled = workdir / "started", workdir / "cancelled"
    os.mkfifo(started)
    os.mkfifo(cancelled)
    command = [sys.executable, "-m", "tests.mcp.mcpserver_app", "tools"]
    command += ["--fifo", str(cancelled), "--started", str(started)]
    cfg = config_of(workdir, _table("tickets", command, ["hang"]))
    with anyio.fail_after(90):  # a hang guard: the server says it was cancelled
        async with Daemon(cfg).local() as session, anyio.create_task_group() as tg:
            heard: list[str] = []

            async def listen() -> None:
                heard.append(await _read(cancelled))

            tg.start_soon(listen)
            await _cancelled_compose(session, started)
    # MCP cancellation: the server was told, and the SDK cancelled the tool's handler.
    assert heard == ["hang\n"]


async def test_an_answer_after_its_cancel_is_dropped_and_the_next_call_answered(
    workdir: Path,
) -> None:
    started, said = workdir / "started", workdir / "said"
    os.mkfifo(started)
    command = [sys.executable, "-m", "tests.fixtures.late_mcp_server", str(started), str(said)]
    cfg = config_of(workdir, _table("late", command, ["slow"]))
    with anyio.fail_after(90), capture_logs() as logs:  # a hang guard
        async with Daemon(cfg).local() as session:
            await _cancelled_compose(session, started)
            result = await session.call("context/compose", {"goal": "cache ttl eviction"})
    leg = report(result, "late")
    assert leg["status"] == "ok", leg
    # It was told to cancel the first call, and answered it all the same, before the
    # second call's answer on the same pipe: hostd dropped it and read on.
    lines = said.read_text().splitlines()
    assert lines[:2] == ["cancelled 1 (caller cancelled)", "answered 1 late"]
    assert lines[2:] == ["answered 2"]
    # Its connection ended once, when the daemon stopped: the late answer was no fault.
    ended = [e["reason"] for e in logs if e["event"] == "provider.stream.ended"]
    assert ended == ["shutting_down"]
