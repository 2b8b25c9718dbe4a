"""``hostd mcp --connect`` follows its daemon through restarts.

A real ``hostd mcp --connect`` child, driven by the SDK's ``ClientSession``, in
front of real ``hostd serve`` children on one socket: while nothing serves there,
a tool call is a tool error naming the socket and why; once a daemon serves
there (again), the next call succeeds.
"""

from __future__ import annotations

import contextlib
import signal
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
import pytest
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client

from hostd.errors import NoDaemon
from hostd.mcp import reconnecting

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


@pytest.mark.slow
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


async def test_a_broken_config_s_error_is_said_once_and_names_why_no_daemon_answers(
    start_daemon: Any, workdir: Path, marker: str, tmp_path: Path
) -> None:
    # A config that does not load, its socket the daemons': `--connect` reads it raw.
    own = workdir / "mcp"
    own.mkdir()
    config = own / "hostd.toml"
    socket = workdir / "run" / "hostd.sock"
    config.write_text(f'[host]\nsocket = "{socket}"\n[tcp]\ntokn_file = "t"\n', encoding="utf-8")
    params = hostd_mcp(config, "--connect", "--wait", "0")
    errlog = tmp_path / "stderr"
    with anyio.fail_after(180), errlog.open("w") as err:
        async with stdio_client(params, errlog=err) as (read, write):
            async with ClientSession(read, write) as session:
                await session.initialize()
                before = await session.call_tool("compose_context", {"goal": "first"})
                daemon = await start_daemon({"alpha": {}})
                served = await session.call_tool("compose_context", {"goal": "served"})
                again = await session.call_tool("list_providers", {})
    # No daemon: the tool's error names the config's error (not the embedded default's
    # "no providers configured"), and stderr has no note of it.
    assert before.is_error is True and "no_daemon" in _text(before)
    assert "config has an error" in _text(before), _text(before)
    assert "did you mean token_file?" in _text(before), _text(before)
    assert served.is_error is False and again.is_error is False, _text(served)
    # One daemon answered: its note, once, for the whole session.
    notes = [line for line in errlog.read_text().splitlines() if "tokn_file" in line]
    assert len(notes) == 1 and notes[0].endswith("; using its socket only"), notes
    assert await daemon.stop() == 0


async def test_a_broken_config_with_a_named_socket_names_that_config_to_fix(
    workdir: Path, tmp_path: Path
) -> None:
    # The socket named outright, the config broken: no daemon there, so the tool error
    # says to serve from the user's file once its error is fixed, never from the
    # embedded default that stood in for it.
    config = workdir / "hostd.toml"
    config.write_text('[tcp]\ntokn_file = "t"\n', encoding="utf-8")
    socket = workdir / "run" / "hostd.sock"
    params = hostd_mcp(config, "--connect", str(socket), "--wait", "0")
    errlog = tmp_path / "stderr"
    with anyio.fail_after(180), errlog.open("w") as err:
        async with stdio_client(params, errlog=err) as (read, write):
            async with ClientSession(read, write) as session:
                await session.initialize()
                down = await session.call_tool("compose_context", {"goal": "first"})
    assert down.is_error is True and "no_daemon" in _text(down), _text(down)
    assert f"`hostd serve --socket {socket} --config {config}` once" in _text(down)
    assert "did you mean token_file?" in _text(down), _text(down)
    assert "default.toml" not in _text(down), _text(down)
    # Said in the tool's error while no daemon answers, not on stderr as well.
    assert "tokn_file" not in errlog.read_text()


async def test_a_daemon_found_down_costs_one_wait_per_change_at_its_socket(
    start_daemon: Any, workdir: Path, marker: str
) -> None:
    # No socket when hostd mcp began: no daemon was started, said at once. Once one
    # served, its loss is waited for (--wait) once per change at the socket: a killed
    # daemon's file left behind, then that file removed (as a stop leaves it, and as a
    # restart finds it until the new daemon binds it); the same state again is said at
    # once, so a daemon that stays down costs no wait per call.
    socket, params = _params(workdir, marker, "--wait", "1")

    async def compose(session: ClientSession, goal: str) -> str:
        result = await session.call_tool("compose_context", {"goal": goal})
        assert result.is_error is True
        return _text(result)

    with anyio.fail_after(180):
        async with stdio_client(params) as (read, write):
            async with ClientSession(read, write) as session:
                await session.initialize()
                never = [await compose(session, "first"), await compose(session, "second")]
                daemon = await start_daemon({"alpha": {}})
                served = await session.call_tool("compose_context", {"goal": "served"})
                daemon.signal(signal.SIGKILL)
                await daemon.wait()
                killed = [await compose(session, "down")]
                if "connection_lost" in killed[0]:  # the end was seen first: then a wait
                    killed.append(await compose(session, "down"))
                killed.append(await compose(session, "still down"))
                socket.unlink()  # the file a stop removes; a restart binds a new one
                removed = [await compose(session, "removed"), await compose(session, "again")]
    for text in never:
        assert "no_daemon" in text and "waited" not in text, text
        assert str(socket) in text and "hostd serve" in text, text
        # Its own config serves elsewhere: the hint names the socket it waits on.
        assert f"`hostd serve --socket {socket}`" in text, text
    assert served.is_error is False, _text(served)
    assert "waited 1 s" in killed[-2], killed
    assert "no_daemon" in killed[-1] and "waited" not in killed[-1], killed
    assert "waited 1 s" in removed[0] and "hostd serve" in removed[0], removed
    assert str(socket) in removed[0], removed
    assert "no_daemon" in removed[1] and "waited" not in removed[1], removed


class _Refused:
    """An opener that finds no daemon, recording whether each open was let wait."""

    def __init__(self) -> None:
        self.patient: list[bool] = []

    @contextlib.asynccontextmanager
    async def __call__(self, patient: bool) -> AsyncIterator[Any]:
        self.patient.append(patient)
        raise NoDaemon("no daemon")
        yield  # pragma: no cover (an async generator that never yields a session)


async def test_an_open_waits_only_when_the_socket_changed_since_one_found_nobody(
    tmp_path: Path,
) -> None:
    where = tmp_path / "hostd.sock"
    opener = _Refused()

    async def call() -> None:
        with pytest.raises(NoDaemon):
            await backend.call("host/status")

    with anyio.fail_after(60):  # a hang guard
        async with reconnecting(opener, str(where)) as backend:
            await call()  # no file from the start: no daemon was started
            await call()
            where.write_bytes(b"")  # a file appears: a daemon starting, or one gone
            await call()
            await call()
            where.unlink()  # removed: a daemon stopped, a new one not bound yet
            await call()
            await call()
    assert opener.patient == [False, False, True, False, True, False]
