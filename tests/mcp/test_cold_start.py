"""``hostd mcp``'s cold start: the MCP SDK is imported while the providers start.

The import takes seconds; done first, it held the event loop before any provider was
spawned, so the providers' start and the answer to ``initialize`` both waited for it.
It runs in a worker thread now, beside the start. The tests decide by events: an
import the test holds (``tests/fixtures/held_import``), a load that waits for the
block's work to begin.
"""

from __future__ import annotations

import contextlib
import json
import os
import sys
import threading
from pathlib import Path
from typing import Any

import anyio
import pytest
from anyio.streams.buffered import BufferedByteReceiveStream
from mcp import ClientSession
from mcp.client.stdio import stdio_client

from hostd.cli._commands import _loading
from tests.server.conftest import marked_processes

from ._harness import ROOT, hostd_mcp, write_config

pytestmark = pytest.mark.anyio

#: A hang guard, never the thing tested.
_GUARD_S = 120

_INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {
        "protocolVersion": "2025-06-18",
        "capabilities": {},
        "clientInfo": {"name": "test", "version": "0"},
    },
}


async def _events_until(stderr: BufferedByteReceiveStream, event: str) -> list[str]:
    """The log events hostd writes to stderr, up to and including ``event``."""
    seen: list[str] = []
    while event not in seen:
        line = await stderr.receive_until(b"\n", 1 << 20)
        try:
            seen.append(json.loads(line)["event"])
        except (ValueError, KeyError, TypeError):  # a line that is not a log event
            continue
    return seen


async def test_the_providers_start_while_the_sdk_is_imported(workdir: Path, marker: str) -> None:
    """The test holds ``hostd mcp``'s import of the SDK until its provider has started
    (a process running), then lets it through: ``initialize`` is answered. Imported
    first, as it was, the SDK kept the provider from starting until it was in."""
    started, held = workdir / "started", workdir / "held"
    os.mkfifo(started)
    os.mkfifo(held)
    table = (
        f'[[provider]]\nid = "cold"\n'
        f'command = ["python", "-m", "tests.fixtures.warming_provider", "--started", '
        f'"{started}"]\nstart_timeout_s = 120\ncwd = "{ROOT}"\n'
    )
    config = write_config(workdir, marker, {}, extra=table)
    command = [sys.executable, "-m", "hostd", "--config", str(config)]
    command += ["--log-level", "info", "mcp"]
    env = dict(os.environ, HOSTD_TEST_HELD_IMPORT=f"mcp.server.lowlevel:{held}")
    env["PYTHONPATH"] = f"{ROOT / 'tests' / 'fixtures' / 'held_import'}:{ROOT}"
    try:
        with anyio.fail_after(_GUARD_S):
            async with await anyio.open_process(command, cwd=ROOT, env=env) as process:
                assert process.stdin and process.stdout and process.stderr
                # Returns once the provider's process runs: the SDK is held meanwhile.
                await anyio.to_thread.run_sync(started.read_text, abandon_on_cancel=True)
                await anyio.to_thread.run_sync(held.write_text, "go", abandon_on_cancel=True)
                stderr = BufferedByteReceiveStream(process.stderr)
                before = await _events_until(stderr, "mcp.sdk.loaded")
                await process.stdin.send(json.dumps(_INITIALIZE).encode() + b"\n")
                stdout = BufferedByteReceiveStream(process.stdout)
                reply = json.loads(await stdout.receive_until(b"\n", 1 << 20))
                await process.stdin.aclose()
                await process.wait()
    finally:
        # A reader or writer left waiting on a pipe (the guard fired) is let go.
        for fifo in (started, held):
            with contextlib.suppress(OSError):
                os.close(os.open(fifo, os.O_RDWR | os.O_NONBLOCK))
    assert "provider.process.started" in before, before  # logged before the import ended
    assert reply["id"] == 1 and reply["result"]["serverInfo"]["name"] == "hostd", reply
    assert process.returncode == 0


def _ignore(ms: int) -> None:
    pass


async def test_the_load_runs_while_the_block_works() -> None:
    """The load waits for the block's work to begin, and the block for the load: they
    end only if they overlap (run one after the other, either way, they would hang)."""
    began = threading.Event()

    def load() -> str:
        if not began.wait(_GUARD_S):  # a hang guard: the block never began meanwhile
            raise AssertionError("the load ran before the block's work, not beside it")
        return "loaded"

    with anyio.fail_after(_GUARD_S):
        async with _loading(load, _ignore) as loaded:
            began.set()  # the block's work (hostd mcp: the providers' start) begins
            assert await loaded() == "loaded"


async def test_a_failed_load_is_raised_where_the_block_awaits_it() -> None:
    def load() -> Any:
        raise ImportError("no module named 'mcp_types'")

    with anyio.fail_after(_GUARD_S), pytest.raises(ImportError, match="mcp_types"):
        async with _loading(load, _ignore) as loaded:
            await loaded()


async def test_the_blocks_own_error_comes_out_as_it_is() -> None:
    """Not wrapped in an ExceptionGroup: the CLI reports a HostdError by its message
    (a provider's config refused while the SDK was being imported)."""
    with anyio.fail_after(_GUARD_S), pytest.raises(LookupError, match="refused"):
        async with _loading(lambda: None, _ignore):
            raise LookupError("refused")


def _held_table(gate: Path, started: Path | None = None) -> str:
    """A provider that answers no handshake until ``gate`` exists (after writing a line
    to the pipe ``started``, when given), with a start deadline beyond every guard."""
    args = ["python", "-m", "tests.fixtures.warming_provider", "--handshake-gate", str(gate)]
    if started is not None:
        args += ["--started", str(started)]
    return (
        f'[[provider]]\nid = "held"\ncommand = {json.dumps(args)}\n'
        f'start_timeout_s = 600\ntimeout_ms = 600000\ncwd = "{ROOT}"\n'
    )


async def test_initialize_is_answered_while_a_provider_handshake_is_held(
    workdir: Path, marker: str
) -> None:
    """The providers start behind the server: the SDK client's ``initialize`` and
    ``tools/list`` are answered while a provider's handshake is held, the provider is
    listed ``starting``, and a composition asked meanwhile joins its start: the test
    lets the handshake through only once the composition has begun (its first progress
    note), and the composition gets that provider's frame. Started before serving, as
    they were, the provider held ``initialize`` until its handshake."""
    gate = workdir / f"gate-{marker}"
    config = write_config(workdir, marker, {}, extra=_held_table(gate))

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        gate.touch()  # the composition runs: the handshake may come now

    with anyio.fail_after(_GUARD_S):
        async with stdio_client(hostd_mcp(config)) as (read, write):
            async with ClientSession(read, write) as session:
                await session.initialize()
                tools = await session.list_tools()
                listed = await session.call_tool("list_providers", {})
                held = not gate.exists()
                result = await session.call_tool(
                    "compose_context", {"goal": "warm"}, progress_callback=on_progress
                )
    assert [t.name for t in tools.tools][0] == "compose_context"
    assert held  # nothing above let the handshake through
    assert listed.structured_content is not None
    (row,) = listed.structured_content["providers"]
    assert row["id"] == "held" and row["state"] == "starting", row
    assert result.is_error is False, result
    assert result.structured_content is not None
    (leg,) = result.structured_content["providers"]
    assert leg["provider_id"] == "held" and leg["status"] == "ok", leg
    assert [c["frame"]["provider_id"] for c in result.structured_content["citations"]] == ["held"]


async def test_stdin_closed_while_a_provider_starts_ends_the_server_and_the_provider(
    workdir: Path, marker: str
) -> None:
    """A client that goes away while a provider's handshake is still held: ``hostd mcp``
    exits 0 at once and the provider's process is stopped, not left behind. Before, the
    server read nothing until that handshake (up to its start deadline)."""
    gate, started = workdir / f"gate-{marker}", workdir / "started"
    os.mkfifo(started)
    config = write_config(workdir, marker, {}, extra=_held_table(gate, started))
    command = [sys.executable, "-m", "hostd", "--config", str(config), "mcp"]
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    try:
        with anyio.fail_after(_GUARD_S):
            async with await anyio.open_process(command, cwd=ROOT, env=env) as process:
                assert process.stdin and process.stdout
                # Returns once the provider's process runs; its handshake stays held.
                await anyio.to_thread.run_sync(started.read_text, abandon_on_cancel=True)
                await process.stdin.send(json.dumps(_INITIALIZE).encode() + b"\n")
                reply = json.loads(
                    await BufferedByteReceiveStream(process.stdout).receive_until(b"\n", 1 << 20)
                )
                await process.stdin.aclose()
                await process.wait()
    finally:
        with contextlib.suppress(OSError):  # a writer left waiting (the guard fired)
            os.close(os.open(started, os.O_RDWR | os.O_NONBLOCK))
    assert reply["id"] == 1 and "result" in reply, reply
    assert process.returncode == 0
    assert marked_processes(marker) == []
