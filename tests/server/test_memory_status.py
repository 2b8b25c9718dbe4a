"""What ``hostd status`` says the memory provider holds stays true when another process
(the memory CLI) writes its database: a real ``hostd serve``, its real
``providers.memory`` child, and the CLI as a third process; no request reaches the
provider in between."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import anyio
import pytest

from hostd.client import AsyncClient, connect
from tests.server.conftest import ROOT, daemon_command
from tests.server.test_memory_writes import memory_table

pytestmark = pytest.mark.anyio


async def _held(client: AsyncClient) -> str:
    """The memory provider's ready message, as ``providers/list`` (and status) has it."""
    (row,) = [p for p in await client.providers() if p["id"] == "memory"]
    return str(row["health"]["progress"].get("message"))


async def _said_next(client: AsyncClient, before: str) -> str:
    """Status asked again and again until what the provider holds reads otherwise."""
    with anyio.fail_after(60):  # a hang guard: it is said within about a second
        while True:
            held = await _held(client)
            if held != before:
                return held
            await anyio.sleep(0.05)  # a pause between two asks, never the verdict


async def _cli(db: Path, *args: str) -> None:
    command = [sys.executable, "-m", "providers.memory", *args, "--db", str(db)]
    done = await anyio.run_process(command, cwd=ROOT, check=False)
    assert done.returncode == 0, done.stderr.decode()


async def test_status_counts_entries_another_process_adds_and_forgets(
    start_daemon: Any, workdir: Path, marker: str
) -> None:
    db = workdir / f"memory-{marker}.db"
    daemon = await start_daemon({}, extra=memory_table("memory", db))
    async with connect(daemon.socket) as client:
        await client.call("providers/warm")  # started, and said what it holds
        assert await _held(client) == f"0 entries in {db}"
        await _cli(db, "add", "--title", "deploys", "Deploys happen on Tuesdays.")
        assert await _said_next(client, f"0 entries in {db}") == f"1 entry: 1 fact, in {db}"
        await _cli(db, "add", "--kind", "episode", "--title", "release", "Shipped 2.0.")
        two = f"2 entries: 1 fact, 1 episode, in {db}"
        assert await _said_next(client, f"1 entry: 1 fact, in {db}") == two
        shown = await anyio.run_process(
            daemon_command(daemon.config, "status", str(daemon.socket)), cwd=ROOT, check=False
        )
        await _cli(db, "forget", "mem-1")
        assert await _said_next(client, two) == f"1 entry: 1 episode, in {db}"
    assert await daemon.stop() == 0
    assert f"provider memory: ready ({two})\n" in shown.stdout.decode(), shown.stderr.decode()
