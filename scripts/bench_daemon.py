#!/usr/bin/env python3
"""Daemon throughput: compositions per second and p50/p99 latency over the Unix socket.

Starts ``hostd serve`` with three local child-process providers, then for 1, 8 and
64 concurrent clients (one connection each) runs ``context/compose`` in a loop for
a fixed time and reports, as JSON: compositions/s, p50 and p99 latency (ms), errors,
and the daemon's peak RSS (VmHWM, MB) over the whole run.

    python scripts/bench_daemon.py [--seconds 5] [--clients 1,8,64] [--frames 8]
                                   [--providers fixture|bundled]

``fixture`` providers are ``tests.fixtures.healthy_provider`` children answering
``--frames`` frames; ``bundled`` uses ``providers.files`` over this repository's docs
(three instances over different subtrees). Targets (issue 6): >= 200 compositions/s
with 64 clients against 3 local providers on a 2-core machine; RSS <= 80 MB.
"""

from __future__ import annotations

import argparse
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import anyio
import orjson

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def _config(workdir: Path, kind: str, frames: int, log_level: str) -> Path:
    lines = [
        "[host]",
        f'socket = "{workdir}/run/hostd.sock"',
        f'state_dir = "{workdir}/state"',
        "max_in_flight = 256",
        "[log]",
        f'level = "{log_level}"',
        f'file = "{workdir}/hostd.log"',
    ]
    if kind == "fixture":
        for pid in ("alpha", "beta", "gamma"):
            words = [
                "python",
                "-m",
                "tests.fixtures.healthy_provider",
                "--name",
                pid,
                "--frames",
                str(frames),
                "--size",
                "200",
            ]
            lines += ["[[provider]]", f'id = "{pid}"', f"command = {orjson.dumps(words).decode()}"]
            lines += [f'cwd = "{ROOT}"', "timeout_ms = 10000"]
    else:
        for pid, root in (("docs", "docs"), ("code", "hostd"), ("providers", "providers")):
            words = ["python", "-m", "providers.files", "--root", str(ROOT / root)]
            lines += ["[[provider]]", f'id = "{pid}"', f"command = {orjson.dumps(words).decode()}"]
            lines += [f'cwd = "{ROOT}"', "timeout_ms = 10000"]
    path = workdir / "hostd.toml"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


_TICK = os.sysconf("SC_CLK_TCK")


def _cpu_s(pid: int) -> float:
    """User + system CPU seconds of ``pid`` (0 when it is gone)."""
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii") as fh:
            fields = fh.read().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / _TICK


def _children(pid: int) -> list[int]:
    try:
        with open(f"/proc/{pid}/task/{pid}/children", encoding="ascii") as fh:
            return [int(x) for x in fh.read().split()]
    except OSError:
        return []


def _peak_rss_mb(pid: int) -> float | None:
    try:
        with open(f"/proc/{pid}/status", encoding="ascii") as fh:
            for line in fh:
                if line.startswith("VmHWM:"):
                    return round(int(line.split()[1]) / 1024, 1)
    except OSError:
        return None
    return None


class _Conn:
    """A minimal line client (the bench measures the daemon, not a client library)."""

    def __init__(self, stream: anyio.abc.SocketStream) -> None:
        self.stream = stream
        self.buf = b""
        self.next_id = 0

    async def compose(self, goal: str, budget: int) -> bool:
        self.next_id += 1
        req = {
            "jsonrpc": "2.0",
            "id": self.next_id,
            "method": "context/compose",
            "params": {"goal": goal, "budget": budget},
        }
        await self.stream.send(orjson.dumps(req) + b"\n")
        while b"\n" not in self.buf:
            self.buf += await self.stream.receive(1 << 20)
        line, self.buf = self.buf.split(b"\n", 1)
        reply = orjson.loads(line)
        return "result" in reply and reply["result"]["audit"]["entries"] is not None


async def _level(
    socket: Path, clients: int, seconds: float, budget: int, daemon_pid: int
) -> dict[str, object]:
    latencies: list[float] = []
    errors = 0
    conns = [_Conn(await anyio.connect_unix(socket)) for _ in range(clients)]
    # Warm-up: every connection composes once, outside the measurement.
    async with anyio.create_task_group() as tg:
        for c in conns:
            tg.start_soon(c.compose, "warm up", budget)
    providers = _children(daemon_pid)
    cpu_before = (_cpu_s(daemon_pid), sum(_cpu_s(p) for p in providers), time.process_time())
    deadline = time.perf_counter() + seconds
    started = time.perf_counter()

    async def loop(conn: _Conn, i: int) -> None:
        nonlocal errors
        n = 0
        while time.perf_counter() < deadline:
            t0 = time.perf_counter()
            ok = await conn.compose(f"question {i}-{n} about configuration", budget)
            latencies.append((time.perf_counter() - t0) * 1000)
            errors += not ok
            n += 1

    async with anyio.create_task_group() as tg:
        for i, c in enumerate(conns):
            tg.start_soon(loop, c, i)
    elapsed = time.perf_counter() - started
    cpu_after = (_cpu_s(daemon_pid), sum(_cpu_s(p) for p in providers), time.process_time())
    for c in conns:
        await c.stream.aclose()
    latencies.sort()

    def pct(p: float) -> float:
        return round(latencies[min(len(latencies) - 1, int(p * len(latencies)))], 2)

    return {
        "clients": clients,
        "compositions": len(latencies),
        "compositions_per_s": round(len(latencies) / elapsed, 1),
        "p50_ms": pct(0.50),
        "p99_ms": pct(0.99),
        "errors": errors,
        # CPU per composition, robust to other load on the machine (ms).
        "cpu_ms_per_composition": {
            name: round((after - before) * 1000 / max(len(latencies), 1), 2)
            for name, before, after in zip(
                ("daemon", "providers", "bench_client"), cpu_before, cpu_after, strict=True
            )
        },
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=5.0, help="measured time per level")
    parser.add_argument("--clients", default="1,8,64", help="comma-separated client counts")
    parser.add_argument("--frames", type=int, default=8, help="frames per fixture provider")
    parser.add_argument("--budget", type=int, default=2000, help="global token budget")
    parser.add_argument("--providers", choices=("fixture", "bundled"), default="fixture")
    parser.add_argument(
        "--log-level",
        default="warning",
        choices=("debug", "info", "warning"),
        help="daemon log level (info writes one event per audit entry; to a file)",
    )
    args = parser.parse_args()

    workdir = Path(tempfile.mkdtemp(prefix="hb-"))
    config = _config(workdir, args.providers, args.frames, args.log_level)
    daemon = subprocess.Popen(
        [sys.executable, "-m", "hostd", "--config", str(config), "serve"],
        cwd=ROOT,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        # The log goes to a file; the socket appearing is the sign the daemon serves.
        socket = workdir / "run" / "hostd.sock"
        deadline = time.monotonic() + 60
        while not socket.exists() and time.monotonic() < deadline and daemon.poll() is None:
            time.sleep(0.05)
        levels = [
            anyio.run(
                _level, socket, int(n), args.seconds, args.budget, daemon.pid, backend="asyncio"
            )
            for n in args.clients.split(",")
        ]
        out = {
            "providers": 3,
            "provider_kind": args.providers,
            "cores": os.cpu_count(),
            "budget": args.budget,
            "log_level": args.log_level,
            "seconds_per_level": args.seconds,
            "levels": levels,
            "daemon_peak_rss_mb": _peak_rss_mb(daemon.pid),
            "load_average_1m": round(os.getloadavg()[0], 2),
        }
    finally:
        daemon.send_signal(signal.SIGTERM)
        code = daemon.wait(60)
        shutil.rmtree(workdir, ignore_errors=True)
    out["daemon_exit_code"] = code
    print(orjson.dumps(out, option=orjson.OPT_INDENT_2).decode())


if __name__ == "__main__":
    main()
