"""A connection's ``alive`` is a plain attribute the engine reads per leg: it must fall
the moment the connection becomes unusable, by whichever way, with nothing asked of it.

Real children over real pipes: a process killed while idle, a stream broken by a
garbage line (its query fails with the fault), and a connection closed.
"""

from __future__ import annotations

import os
import signal

import anyio
import pytest

from hostd.errors import ProtocolFault
from hostd.protocol import ContextQuery
from hostd.transport import ProviderConnection
from tests.fixtures.procs import ROOT, marked_env, python

pytestmark = pytest.mark.anyio

QUERY = ContextQuery(goal="g", max_frames=3, max_tokens=500)


async def _open(tg: anyio.abc.TaskGroup, *args: str) -> ProviderConnection:
    return await ProviderConnection.open(
        "p", python(*args), task_group=tg, env=marked_env(), cwd=ROOT, handshake_timeout=30
    )


async def test_a_process_killed_while_idle_is_not_alive_once_its_exit_is_seen() -> None:
    with anyio.fail_after(60):  # a hang guard: each step below waits on an event
        async with anyio.create_task_group() as tg:
            conn = await _open(tg, "tests.fixtures.healthy_provider")
            assert conn.alive
            os.kill(conn.child.process.pid, signal.SIGKILL)
            await conn.child.exited.wait()
            assert not conn.alive  # nothing was asked of it: the exit watcher told it
            await conn.aclose()


async def test_a_stream_broken_by_a_garbage_line_is_not_alive() -> None:
    with anyio.fail_after(60):
        async with anyio.create_task_group() as tg:
            conn = await _open(tg, "tests.fixtures.adversarial_provider", "garbage")
            assert conn.alive
            with pytest.raises(ProtocolFault):
                await conn.query(QUERY)
            assert not conn.alive and conn.client.failure is not None
            await conn.aclose()


async def test_a_closed_connection_is_not_alive() -> None:
    with anyio.fail_after(60):
        async with anyio.create_task_group() as tg:
            conn = await _open(tg, "tests.fixtures.healthy_provider")
            result = await conn.query(QUERY)
            assert result.frames and conn.alive  # a query answered leaves it usable
            await conn.aclose()
            assert not conn.alive
