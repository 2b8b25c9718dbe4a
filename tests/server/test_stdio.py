"""End to end over stdio: ``hostd serve --stdio`` as a child, real provider processes."""

from __future__ import annotations

import contextlib
import json
import signal
import subprocess
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import anyio
import pytest

from hostd.client import spawn
from tests.server.conftest import ROOT, STUCK, marked_processes, write_config

pytestmark = pytest.mark.anyio

# A daemon that prints to stdout right after reserving it: the wire must stay clean.
_NOISY = (
    "import sys, hostd.server._daemon as d\n"
    "real = d.reserve_stdout\n"
    "def noisy():\n"
    "    fd = real()\n"
    "    print('STRAY OUTPUT FROM A LIBRARY', flush=True)\n"
    "    return fd\n"
    "d.reserve_stdout = noisy\n"
    "from hostd.cli import main\n"
    "sys.exit(main(sys.argv[1:]))\n"
)


async def test_compose_over_stdio_survives_stray_prints(workdir, marker) -> None:
    config = workdir / "hostd.toml"
    config.write_text(write_config(workdir, marker, {"alpha": {}, "beta": {}}))
    log = (workdir / "stderr.log").open("wb")
    command = [sys.executable, "-c", _NOISY, "--config", str(config), "serve", "--stdio"]
    async with spawn(command=command, stderr=log, cwd=ROOT) as client:
        result = await client.compose("stdio works", budget=600)
        assert len(result.citations) == 6
        assert {p.status for p in result.providers} == {"ok"}
        process = client.process
        assert process is not None
    log.close()
    assert process.returncode == 0
    assert b"STRAY OUTPUT FROM A LIBRARY" in (workdir / "stderr.log").read_bytes()
    assert not marked_processes(marker)


async def test_sigterm_stops_a_stdio_daemon_cleanly(workdir, marker) -> None:
    config = workdir / "hostd.toml"
    config.write_text(write_config(workdir, marker, {"alpha": {}}))
    command = [sys.executable, "-m", "hostd", "--config", str(config), "serve", "--stdio"]
    async with spawn(command=command, stderr=subprocess.DEVNULL, cwd=ROOT) as client:
        await client.compose("start the provider", budget=100)
        assert client.process is not None
        client.process.send_signal(signal.SIGTERM)
        with anyio.fail_after(30):
            code = await client.process.wait()
    assert code == 0
    assert not marked_processes(marker)


async def test_the_log_goes_to_the_configured_file_as_json_lines(workdir, marker) -> None:
    config = workdir / "hostd.toml"
    log_file = workdir / "hostd.log"
    config.write_text(
        write_config(workdir, marker, {"alpha": {}}).replace(
            "[host]", f'[log]\nfile = "{log_file}"\nlevel = "info"\n\n[host]', 1
        )
    )
    stderr = (workdir / "stderr.log").open("wb")
    command = [sys.executable, "-m", "hostd", "--config", str(config), "serve", "--stdio"]
    async with spawn(command=command, stderr=stderr, cwd=ROOT) as client:
        result = await client.compose("logged", budget=200)
    stderr.close()
    events = [json.loads(line) for line in log_file.read_text().splitlines()]
    names = [e["event"] for e in events]
    # Providers start at boot, before the daemon announces it serves.
    hosts = [n for n in names if n.startswith("host.")]
    assert hosts[0] == "host.serving" and names[-1] == "host.stopped"
    mine = [e for e in events if e.get("request_id") == result.request_id]
    assert {"provider.leg", "compose.audit.summary", "compose.done", "request.done"} <= {
        e["event"] for e in mine
    }
    assert all(e["level"] and e["timestamp"].endswith("Z") for e in events)
    assert b"host.serving" not in (workdir / "stderr.log").read_bytes()


class _Pipes:
    """Raw lines over a child's stdin/stdout (no client library in between)."""

    def __init__(self, process: Any) -> None:
        self.process = process
        self.buf = b""

    async def ask(self, data: bytes) -> Any:
        await self.process.stdin.send(data)
        with anyio.fail_after(30):
            while b"\n" not in self.buf:
                self.buf += await self.process.stdout.receive()
        line, self.buf = self.buf.split(b"\n", 1)
        return json.loads(line)


@contextlib.asynccontextmanager
async def stdio_pipes(config: Path) -> AsyncIterator[_Pipes]:
    """``hostd serve --stdio`` as a child, raw lines over its pipes; on leaving, its
    stdin is closed and it must exit 0."""
    process = await anyio.open_process(
        [sys.executable, "-m", "hostd", "--config", str(config), "serve", "--stdio"],
        cwd=ROOT,
        stderr=subprocess.DEVNULL,
    )
    async with process:
        yield _Pipes(process)
        assert process.stdin is not None
        await process.stdin.aclose()
        with anyio.fail_after(30):
            assert await process.wait() == 0


async def test_malformed_input_over_stdio_gets_errors_and_keeps_serving(workdir, marker) -> None:
    from tests.server.test_malformed import STATUS, assert_error

    config = workdir / "hostd.toml"
    config.write_text(write_config(workdir, marker, {"alpha": {}}, max_line_bytes=65536))
    async with stdio_pipes(config) as pipes:
        assert_error(await pipes.ask(b"{not json\n"), -32700, None)
        assert_error(await pipes.ask(b'{"jsonrpc":"2.0","id":1,"method":"nope"}\n'), -32601, 1)
        err = assert_error(
            await pipes.ask(
                b'{"jsonrpc":"2.0","id":2,"method":"context/compose","params":{"budget":5}}\n'
            ),
            -32602,
            2,
        )
        assert err["data"]["field"] == "goal"
        err = assert_error(await pipes.ask(b"[" + b" " * 100_000 + b"]\n"), -32600, None)
        assert err["data"]["reason"] == "line_too_long"
        batch = [{"jsonrpc": "2.0", "id": i, "method": "nope"} for i in range(1000)]
        replies = await pipes.ask(json.dumps(batch).encode() + b"\n")
        assert len(replies) == 1000 and all(r["error"]["code"] == -32601 for r in replies)
        reply = await pipes.ask(STATUS)
        assert reply["result"]["state"] == "serving"
        reply = await pipes.ask(
            b'{"jsonrpc":"2.0","id":3,"method":"context/compose","params":{"goal":"ok"}}\n'
        )
        assert reply["result"]["citations"]
    assert not marked_processes(marker)


async def test_past_the_grace_period_in_flight_requests_are_answered_shutting_down(
    workdir, marker
) -> None:
    from hostd.client import RpcError

    config = workdir / "hostd.toml"
    config.write_text(write_config(workdir, marker, {"slow": STUCK}, grace_period_s=0.3))
    command = [sys.executable, "-m", "hostd", "--config", str(config), "serve", "--stdio"]
    async with spawn(command=command, stderr=subprocess.DEVNULL, cwd=ROOT) as client:
        failures: list[RpcError] = []
        async with anyio.create_task_group() as tg:

            async def stuck() -> None:
                with pytest.raises(RpcError) as exc:
                    await client.compose("stuck", timeout_ms=600_000)
                failures.append(exc.value)

            tg.start_soon(stuck)
            with anyio.fail_after(30):
                while (await client.status())["in_flight"] < 2:
                    pass
            assert (await client.shutdown())["stopping"] is True
        process = client.process
        assert process is not None
    with anyio.fail_after(30):
        assert await process.wait() == 0
    assert [(f.rpc_code, f.remote_reason) for f in failures] == [(-32006, "shutting_down")]
    assert not marked_processes(marker)
