#!/usr/bin/env python3
"""Host CPU under a provider that floods its stderr.

A child writes ``--rate`` × ``--seconds`` 100-byte lines to its stderr, ``--rate`` lines
a second (a fixed count, so both sides are sent the same flood however fast the
machine runs; a host that drains slower only makes it last longer); the host drains
them through ``ChildProcess`` (the stderr pump, its rate limit and the JSON log,
written to /dev/null as the daemon writes its log).
Beside it, turn by turn, a floor: the same child drained by a bare read loop that
drops the bytes (the least the pipe needs). Prints JSON with each side's host CPU
(share of one core, and microseconds per line) and their ratio, and how many lines
reached the log and how many were counted as suppressed.

    python scripts/bench_stderr.py [--seconds 3] [--rounds 3] [--rate 500000] [--checkout DIR]

``--checkout`` imports hostd from another checkout (a ``git worktree`` of a base
commit), to measure before and after a change with the same script.
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import orjson

ROOT = Path(__file__).resolve().parents[1]

#: Lines per write of the flooding child (64 KiB of 100-byte lines).
BATCH = 655


def flood_lines(seconds: float, rate: float) -> int:
    """How many lines the child writes: ``rate`` × ``seconds`` in whole batches, one at
    least."""
    return max(1, round(seconds * rate / BATCH)) * BATCH


#: The flooding child: ``flood_lines`` 100-byte lines in batches, ``rate`` lines a
#: second (as fast as the pipe takes them, if the host drains slower).
FLOOD = (
    "import os, sys, time\n"
    "total, rate = int(sys.argv[1]), float(sys.argv[2])\n"
    f"batch = (b'x' * 99 + b'\\n') * {BATCH}\n"
    "start = time.monotonic()\n"
    "sent = 0\n"
    "while sent < total:\n"
    "    ahead = start + sent / rate - time.monotonic()\n"
    "    if ahead > 0:\n"
    "        time.sleep(ahead)\n"
    "    os.write(2, batch)\n"
    f"    sent += {BATCH}\n"
)


async def _hostd_round(seconds: float, rate: float) -> dict[str, Any]:
    import anyio

    from hostd.transport import ChildProcess

    async with anyio.create_task_group() as tg:
        t0, c0 = time.perf_counter(), time.process_time()
        child = await ChildProcess.spawn(
            "flood", [sys.executable, "-c", FLOOD, str(flood_lines(seconds, rate)), str(rate)]
        )
        child.start_pumps(tg)
        await child.exited.wait()
        await child.aclose(grace=5)  # the pump reads the pipe to its end first
        wall, cpu = time.perf_counter() - t0, time.process_time() - c0
    lines = child.stderr_lines
    return {
        "cpu_share": cpu / wall,
        "us_per_line": cpu / max(lines, 1) * 1e6,
        "lines": lines,
        "suppressed": child.stderr_suppressed,
    }


async def _floor_round(seconds: float, rate: float) -> dict[str, Any]:
    import anyio

    t0, c0 = time.perf_counter(), time.process_time()
    process = await anyio.open_process(
        [sys.executable, "-c", FLOOD, str(flood_lines(seconds, rate)), str(rate)],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    assert process.stderr is not None
    newlines = 0
    async with process:
        while True:
            try:
                newlines += (await process.stderr.receive(1 << 20)).count(b"\n")
            except anyio.EndOfStream:
                break
        await process.wait()
    wall, cpu = time.perf_counter() - t0, time.process_time() - c0
    return {"cpu_share": cpu / wall, "us_per_line": cpu / max(newlines, 1) * 1e6, "lines": newlines}


def _median(rows: list[dict[str, Any]], key: str) -> float:
    return round(statistics.median(r[key] for r in rows), 4)


async def bench(args: argparse.Namespace) -> dict[str, Any]:
    hostd_rows: list[dict[str, Any]] = []
    floor_rows: list[dict[str, Any]] = []
    for _ in range(args.rounds):  # taking turns: both see the same phases of the machine
        hostd_rows.append(await _hostd_round(args.seconds, args.rate))
        floor_rows.append(await _floor_round(args.seconds, args.rate))
    return {
        "benchmark": "stderr_flood",
        "checkout": str(args.checkout),
        "seconds_per_round": args.seconds,
        "flood_lines_per_s": args.rate,
        "flood_lines": flood_lines(args.seconds, args.rate),
        "rounds": args.rounds,
        "hostd": {
            "host_cpu_share": _median(hostd_rows, "cpu_share"),
            "us_per_line": _median(hostd_rows, "us_per_line"),
            "lines": [r["lines"] for r in hostd_rows],
            "suppressed": [r["suppressed"] for r in hostd_rows],
        },
        "floor": {
            "host_cpu_share": _median(floor_rows, "cpu_share"),
            "us_per_line": _median(floor_rows, "us_per_line"),
            "lines": [r["lines"] for r in floor_rows],
        },
        "us_per_line_over_floor": round(
            _median(hostd_rows, "us_per_line") / max(_median(floor_rows, "us_per_line"), 1e-9), 2
        ),
        "load_average_1m": round(os.getloadavg()[0], 2),
        "python": platform.python_version(),
        "cpus": os.cpu_count(),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--seconds", type=float, default=3.0)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--rate", type=float, default=500_000.0, help="flood lines per second")
    parser.add_argument("--checkout", type=Path, default=ROOT)
    args = parser.parse_args()
    sys.path.insert(0, str(args.checkout.resolve()))
    import importlib

    import anyio

    try:  # checkouts from before the rename still name the module hostd.logging
        configure_logging = importlib.import_module("hostd.logs").configure_logging
    except ModuleNotFoundError:
        configure_logging = importlib.import_module("hostd.logging").configure_logging

    # The daemon's JSON log, written where it costs only its formatting and writes.
    with open(os.devnull, "w", encoding="utf-8") as sink:
        configure_logging(stream=sink)
        result = anyio.run(bench, args, backend="asyncio")
    print(orjson.dumps(result, option=orjson.OPT_INDENT_2).decode())


if __name__ == "__main__":
    main()
