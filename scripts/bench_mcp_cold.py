#!/usr/bin/env python3
"""``hostd mcp``'s cold start, this checkout against another, paired run by run.

Each run launches ``hostd --config CFG mcp`` (its own in-process daemon) as a fresh
child of the official MCP SDK's ``stdio_client`` and times, from the launch, the
``initialize`` reply and the first ``compose_context`` answer, as an MCP client sees
them. The config has the bundled ``files`` provider over this checkout's ``docs/``
(its index cached by a first, untimed run of each side), so the providers' start is
the usual one: a spawn, a handshake answered at once, a build from the cache. Runs
alternate between the two checkouts (ABBA), so both see the machine's same phases.

    git worktree add /tmp/base <commit>
    python scripts/bench_mcp_cold.py /tmp/base [--runs 3]

Prints, as JSON, each run's figures (ms) and each side's medians.
"""

from __future__ import annotations

import argparse
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

ROOT = Path(__file__).resolve().parent.parent
GOAL = "how does hostd mcp report a provider that is still warming up"


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


async def _run(checkout: Path, config: Path) -> dict[str, float]:
    """One cold start of ``checkout``'s ``hostd mcp``: ms to ``initialize``'s reply and
    to the first ``compose_context`` answer, both from the launch."""
    env = dict(os.environ, PYTHONPATH=str(checkout))
    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "hostd", "--config", str(config), "mcp"],
        env=env,
        cwd=str(checkout),
    )
    start = time.perf_counter()
    async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
        await session.initialize()
        initialized = time.perf_counter()
        result = await session.call_tool("compose_context", {"goal": GOAL})
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
    args = parser.parse_args()
    sides = {"before": args.base.resolve(), "after": ROOT}
    with tempfile.TemporaryDirectory(prefix="bench-mcp-cold-") as tmp:
        configs = {}
        for name, checkout in sides.items():
            (Path(tmp) / name).mkdir()
            configs[name] = _config(Path(tmp) / name, checkout)
            await _run(checkout, configs[name])  # untimed: the index cached, files read once
        runs: dict[str, list[dict[str, float]]] = {name: [] for name in sides}
        for i in range(args.runs):
            order = ["before", "after"] if i % 2 == 0 else ["after", "before"]
            for name in order:
                runs[name].append(await _run(sides[name], configs[name]))
    out: dict[str, Any] = {"runs": runs, "medians": {}}
    for name, figures in runs.items():
        out["medians"][name] = {
            key: statistics.median(f[key] for f in figures) for key in figures[0]
        }
    print(orjson.dumps(out, option=orjson.OPT_INDENT_2).decode())


if __name__ == "__main__":
    anyio.run(main)
