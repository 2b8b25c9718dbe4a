"""``hostd mcp --connect`` follows its daemon through restarts.

A real ``hostd mcp --connect`` child, driven by the SDK's ``ClientSession``, in
front of real ``hostd serve`` children on one socket: while nothing serves there,
a tool call is a tool error naming the socket and why; once a daemon serves
there (again), the next call succeeds.
"""

from __future__ import annotations

import signal
from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
import pytest
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client

from ._harness import hostd_mcp, write_config

pytestmark = pytest.mark.anyio


def _params(workdir: Path, marker: str, *args: str) -> tuple[Path, StdioServerParameters]:
    """The daemons' socket, and ``hostd mcp --connect SOCKET ARGS`` from a folder of its
    own (the daemons started below serve at that socket)."""
    socket = workdir / "run" / "hostd.sock"
    own = workdir / "mcp"
    own.mkdir()
    config = write_config(own, marker, {})
    return socket, hostd_mcp(config, "--connect", str(socket), *args)


def _text(result: Any) -> str:
    assert isinstance(result, types.CallToolResult)
    assert isinstance(result.content[0], types.TextContent)
    return result.content[0].text


async def test_connect_follows_the_daemon_through_a_restart(
    start_daemon: Any, workdir: Path, marker: str
) -> None:
    socket, params = _params(workdir, marker)
    with anyio.fail_after(180):
        async with stdio_client(params) as (read, write):
            async with ClientSession(read, write) as session:
                await session.initialize()
                # No daemon yet: the server is up, the call says why it cannot answer.
                before = await session.call_tool("compose_context", {"goal": "first"})
                first = await start_daemon({"alpha": {}})
                served = await session.call_tool("compose_context", {"goal": "served"})
                first.signal(signal.SIGKILL)
                await first.wait()
                down = await session.call_tool("compose_context", {"goal": "down"})
                second = await start_daemon({"alpha": {}})
                again = await session.call_tool("compose_context", {"goal": "again"})
                listed = await session.call_tool("list_providers", {})
    assert isinstance(before, types.CallToolResult) and before.is_error is True
    assert "no_daemon" in _text(before) and str(socket) in _text(before)
    assert isinstance(served, types.CallToolResult) and served.is_error is False
    assert isinstance(down, types.CallToolResult) and down.is_error is True
    # Either the connection was seen to end, or the socket no longer answers: named.
    assert str(socket) in _text(down)
    assert "no_daemon" in _text(down) or "connection_lost" in _text(down)
    assert isinstance(again, types.CallToolResult) and again.is_error is False, _text(again)
    assert again.structured_content is not None
    assert again.structured_content["citations"]
    assert isinstance(listed, types.CallToolResult) and listed.is_error is False
    assert await second.stop() == 0


async def test_a_daemon_found_down_costs_one_wait_not_one_per_call(
    start_daemon: Any, workdir: Path, marker: str
) -> None:
    # The first call waits --wait for a daemon that may be starting; once that wait
    # found nobody, later calls try the socket once and fail at once, until a daemon
    # answers again; then a lost daemon is waited for again (it may be restarting).
    socket, params = _params(workdir, marker, "--wait", "1")
    with anyio.fail_after(180):
        async with stdio_client(params) as (read, write):
            async with ClientSession(read, write) as session:
                await session.initialize()
                waited = await session.call_tool("compose_context", {"goal": "first"})
                at_once = await session.call_tool("compose_context", {"goal": "second"})
                daemon = await start_daemon({"alpha": {}})
                served = await session.call_tool("compose_context", {"goal": "served"})
                daemon.signal(signal.SIGKILL)
                await daemon.wait()
                lost = [await session.call_tool("compose_context", {"goal": "down"})]
                if "connection_lost" in _text(lost[0]):  # the end was seen first: then a wait
                    lost.append(await session.call_tool("compose_context", {"goal": "down"}))
    assert waited.is_error is True and "no_daemon" in _text(waited)
    assert "waited 1 s" in _text(waited)
    assert at_once.is_error is True and "no_daemon" in _text(at_once)
    assert "waited" not in _text(at_once)
    assert str(socket) in _text(at_once) and "hostd serve" in _text(at_once)
    assert served.is_error is False, _text(served)
    assert lost[-1].is_error is True and "waited 1 s" in _text(lost[-1])
