#!/usr/bin/env python3
"""``hostd mcp``'s cold start, this checkout against another, paired run by run.

Each run launches ``hostd --config CFG mcp`` (its own in-process daemon) as a fresh
child of the official MCP SDK's ``stdio_client`` and times, from the launch, the
``initialize`` reply and the first ``compose_context`` answer, as an MCP client sees
them. The config has the bundled ``files`` provider over this checkout's ``docs/``
(its index cached by a first, untimed run of each side), so the providers' start is
the usual one: a spawn, a handshake answered at once, a build from the cache. Each
``compose_context`` waits for the provider to be ready (``ready_wait_ms`` at its
maximum): on a loaded machine a start slower than ``hostd mcp``'s default wait is
timed as it is, not answered ``warming``. Runs alternate between the two checkouts
(ABBA), so both see the machine's same phases.

``--connect``: each run is ``hostd --config CFG mcp --connect`` instead, both sides
connecting to one ``hostd serve`` of this checkout, started (and its index built)
before the first run; ``hostd mcp`` then starts no provider, and ``initialize``
waits for its own imports alone.

    git worktree add /tmp/base <commit>
    python scripts/bench_mcp_cold.py /tmp/base [--runs 3] [--connect]

Prints, as JSON, each run's figures (ms), each side's medians and their ratio
(after / before).
"""

from __future__ import annotations

import argparse
import contextlib
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import anyio
import orjson
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _serving import serving_daemon  # noqa: E402 - after the path set-up

ROOT = Path(__file__).resolve().parent.parent
GOAL = "how does hostd mcp report a provider that is still warming up"
#: How long a ``compose_context`` waits for a provider still starting (the most it takes).
READY_WAIT_MS = 600_000


def _config(workdir: Path, checkout: Path) -> Path:
    files = ["python", "-m", "providers.files", "--root", str(ROOT / "docs")]
    lines = [
        "[host]",
        f'socket = "{workdir}/run/hostd.sock"',
        f'state_dir = "{workdir}/state"',
        "[[provider]]",
        'id = "files"',
        f"command = {orjson.dumps(files).decode()}",
        f'cwd = "{checkout}"',
        f'trusted_roots = ["{ROOT / "docs"}"]',
    ]
    path = workdir / "hostd.toml"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


async def _run(checkout: Path, config: Path, *, connect: bool = False) -> dict[str, float]:
    """One cold start of ``checkout``'s ``hostd mcp``: ms to ``initialize``'s reply and
    to the first ``compose_context`` answer, both from the launch."""
    env = dict(os.environ, PYTHONPATH=str(checkout))
    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "hostd", "--config", str(config), "mcp"] + (["--connect"] if connect else []),
        env=env,
        cwd=str(checkout),
    )
    start = time.perf_counter()
    async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
        await session.initialize()
        initialized = time.perf_counter()
        # The files provider's start is waited for, however long it takes (a hang guard,
        # the tool's maximum): a slow machine then times a slow start, not a ``warming``.
        arguments = {"goal": GOAL, "ready_wait_ms": READY_WAIT_MS}
        result = await session.call_tool("compose_context", arguments)
        composed = time.perf_counter()
    assert not result.is_error, result
    return {
        "initialize_ms": round((initialized - start) * 1000),
        "first_compose_ms": round((composed - start) * 1000),
    }


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("base", type=Path, help="the other checkout (before)")
    parser.add_argument("--runs", type=int, default=3, help="runs of each side (default 3)")
    parser.add_argument(
        "--connect", action="store_true", help="hostd mcp --connect to one hostd serve"
    )
    args = parser.parse_args()
    sides = {"before": args.base.resolve(), "after": ROOT}
    runs: dict[str, list[dict[str, float]]] = {name: [] for name in sides}
    with tempfile.TemporaryDirectory(prefix="bench-mcp-cold-") as tmp:
        configs = {}
        for name, checkout in sides.items():
            (Path(tmp) / name).mkdir()
            configs[name] = _config(Path(tmp) / name, checkout)
        async with contextlib.AsyncExitStack() as stack:
            if args.connect:  # one daemon, both sides its clients
                configs["before"] = configs["after"]
                await stack.enter_async_context(serving_daemon(configs["after"], ROOT))
            for name, checkout in sides.items():  # untimed: the index cached, files read once
                await _run(checkout, configs[name], connect=args.connect)
            for i in range(args.runs):
                order = ["before", "after"] if i % 2 == 0 else ["after", "before"]
                for name in order:
                    runs[name].append(await _run(sides[name], configs[name], connect=args.connect))
    out: dict[str, Any] = {"mode": "connect" if args.connect else "local", "runs": runs}
    out["medians"] = {}
    for name, figures in runs.items():
        out["medians"][name] = {
            key: statistics.median(f[key] for f in figures) for key in figures[0]
        }
    before, after = out["medians"]["before"], out["medians"]["after"]
    out["ratio"] = {key: round(after[key] / before[key], 2) for key in before}
    print(orjson.dumps(out, option=orjson.OPT_INDENT_2).decode())


if __name__ == "__main__":
    anyio.run(main)
