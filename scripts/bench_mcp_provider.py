#!/usr/bin/env python3
"""A large MCP provider under ``hostd serve``: what a composition costs, and whether the
daemon keeps answering while it runs.

One daemon (of ``--checkout DIR``, default this one) with one ``binding = "mcp"``
provider: ``tests/mcp/mcpserver_app.py big`` (``--count`` resources of ``--mib`` MiB
each, on the SDK's ``MCPServer``). Per scenario, ``--rounds`` compositions on one
connection while a second connection sends ``host/status`` back to back; reported:
each composition's wall time and its leg's status, and for the status calls made
while a composition was in flight their count and their median and longest wait.

- ``generous``: the leg's ``timeout_ms`` 600 s: the whole work is done each time (the
  first composition cuts everything; later ones reuse the cut pieces when they fit
  the read cache);
- ``deadline``: ``timeout_ms`` 2000, as the audit ran it (64 × 2 MiB, 2 s): the leg must
  end near its deadline and cost only itself.

In-process, it also times cutting and scoring alone (MiB/s, this checkout's
``hostd.mcp``). Printed as JSON.

    python scripts/bench_mcp_provider.py [--count 64] [--mib 2] [--rounds 3]
        [--scenario generous,deadline] [--checkout DIR]
"""

from __future__ import annotations

import argparse
import json
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import anyio

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_daemon import ROOT, _Conn, _start  # noqa: E402 - after the path set-up

HERE = Path(__file__).resolve().parent.parent
SERVER = HERE / "tests" / "mcp" / "mcpserver_app.py"
GOAL = "cache eviction retry backoff"


def _config(workdir: Path, count: int, mib: float, timeout_ms: int) -> Path:
    command = [sys.executable, str(SERVER), "big", "--count", str(count), "--mib", str(mib)]
    quoted = ", ".join(f'"{c}"' for c in command)
    text = "\n".join(
        [
            "[host]",
            f'socket = "{workdir}/run/hostd.sock"',
            f'state_dir = "{workdir}/state"',
            'start_providers = "boot"',
            "[log]",
            'level = "warning"',
            "[[provider]]",
            'id = "big"',
            'binding = "mcp"',
            f"command = [{quoted}]",
            f"timeout_ms = {timeout_ms}",
            "start_timeout_s = 120",
        ]
    )
    path = workdir / "hostd.toml"
    path.write_text(text + "\n", encoding="utf-8")
    return path


async def _ready(conn: _Conn) -> None:
    """Until the MCP provider has started (its start, and the SDK's import, are not
    what is measured)."""
    with anyio.fail_after(300):
        while True:
            reply = await conn.call("providers/list", {})
            rows = (reply.get("result") or {}).get("providers") or []
            if any(r.get("state") == "ready" for r in rows):
                return
            await anyio.sleep(0.2)


async def _scenario(socket: Path, rounds: int, budget: int) -> dict[str, Any]:
    composer = _Conn(await anyio.connect_unix(socket))
    prober = _Conn(await anyio.connect_unix(socket))
    await _ready(prober)
    walls: list[float] = []
    statuses: list[str] = []
    waits: list[float] = []
    for _ in range(rounds):
        done = anyio.Event()

        async def probe(done: anyio.Event = done) -> None:
            while not done.is_set():
                t0 = time.perf_counter()
                await prober.call("host/status", {})
                if not done.is_set():
                    waits.append((time.perf_counter() - t0) * 1000)

        async with anyio.create_task_group() as tg:
            tg.start_soon(probe)
            t0 = time.perf_counter()
            reply = await composer.call("context/compose", {"goal": GOAL, "budget": budget})
            walls.append(round(time.perf_counter() - t0, 2))
            done.set()
        legs = (reply.get("result") or {}).get("providers") or [{}]
        statuses.append(f"{legs[0].get('status')}({legs[0].get('frames_accepted', 0)})")
    for conn in (composer, prober):
        await conn.stream.aclose()
    return {
        "compose_s": walls,
        "legs": statuses,
        "status_calls_during_compose": len(waits),
        "status_median_ms": round(statistics.median(waits), 2) if waits else None,
        "status_max_ms": round(max(waits), 2) if waits else None,
    }


def _in_process(count: int, mib: float) -> dict[str, Any]:
    sys.path.insert(0, str(HERE))
    try:
        from hostd.mcp import Document, cut, rank
    except ImportError:
        return {"cut_mib_s": None, "rank_mib_s": None}
    from hostd.protocol import ContextQuery
    from tests.mcp.mcpserver_app import big_text

    n = min(count, 4)
    docs = [
        Document("resources/read", big_text(i, mib), f"big://doc/{i}", f"doc {i}") for i in range(n)
    ]
    t0 = time.perf_counter()
    groups = [cut(d) for d in docs]
    cut_s = time.perf_counter() - t0
    query = ContextQuery(goal=GOAL, max_frames=64, max_tokens=4000)
    t0 = time.perf_counter()
    rank(groups, query, kind="doc", server="bench")
    rank_s = time.perf_counter() - t0
    return {
        "cut_mib_s": round(n * mib / cut_s, 1),
        "rank_mib_s": round(n * mib / rank_s, 1),
        "pieces_per_mib": round(sum(len(g) for g in groups) / (n * mib)),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--count", type=int, default=64)
    parser.add_argument("--mib", type=float, default=2.0)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--budget", type=int, default=4000)
    parser.add_argument("--scenario", default="generous,deadline")
    parser.add_argument("--checkout", help="run the daemon of another checkout")
    args = parser.parse_args()
    out: dict[str, Any] = {"checkout": str(ROOT), "count": args.count, "mib": args.mib}
    for name in args.scenario.split(","):
        timeout_ms = {"generous": 600_000, "deadline": 2000}[name]
        with tempfile.TemporaryDirectory(prefix="hd-bench-") as tmp:
            workdir = Path(tmp)
            daemon, socket = _start(_config(workdir, args.count, args.mib, timeout_ms))
            try:
                out[name] = anyio.run(_scenario, socket, args.rounds, args.budget)
            finally:
                daemon.send_signal(signal.SIGTERM)
                try:
                    daemon.wait(120)
                except subprocess.TimeoutExpired:
                    daemon.kill()
    if args.checkout is None:
        out["in_process"] = _in_process(args.count, args.mib)
    print(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
