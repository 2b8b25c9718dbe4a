#!/usr/bin/env python3
"""``compose_context`` over MCP against ``context/compose`` over hostd's own API, paired.

Two pairings on one config of three fixture providers:

- ``connect``: one ``hostd serve`` daemon; each round runs ``context/compose`` on
  its Unix socket (``hostd.client``) and ``compose_context`` through ``hostd mcp
  --connect`` (the official MCP SDK client over the child's stdio), in
  alternating order.
- ``local``: ``hostd serve --stdio`` (``hostd.client.spawn``) against ``hostd mcp
  --config`` (its own in-process daemon), both stdio children of this process.

Each round's two calls form a pair; reported, as JSON: median and p90 latency (ms)
of each side, the median of the per-pair ratios (MCP / API), the SDK client's own
``structuredContent`` schema check (timed apart), and the ratio without it. Target:
ratio <= 1.2.

    python scripts/bench_mcp.py [--rounds 200] [--frames 8] [--mode connect,local]
"""

from __future__ import annotations

import argparse
import contextlib
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import anyio
import orjson

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from _serving import serving_daemon  # noqa: E402  (after sys.path)
from mcp import ClientSession, StdioServerParameters  # noqa: E402  (after sys.path)
from mcp.client.stdio import stdio_client  # noqa: E402

from hostd.client import connect, spawn  # noqa: E402

GOAL = "how does the cache evict entries"


def _config(workdir: Path, frames: int) -> Path:
    lines = [
        "[host]",
        f'socket = "{workdir}/run/hostd.sock"',
        f'state_dir = "{workdir}/state"',
        'start_providers = "boot"',
        "[log]",
        'level = "warning"',
    ]
    for pid in ("alpha", "beta", "gamma"):
        words = ["python", "-m", "tests.fixtures.healthy_provider", "--name", pid]
        words += ["--frames", str(frames), "--size", "200"]
        lines += ["[[provider]]", f'id = "{pid}"', f"command = {orjson.dumps(words).decode()}"]
        lines += ["timeout_ms = 20000", f'cwd = "{ROOT}"']
    path = workdir / "hostd.toml"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def _env() -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = str(ROOT)
    return env


@contextlib.asynccontextmanager
async def _mcp(config: Path, *args: str) -> AsyncIterator[Callable[[], Awaitable[Any]]]:
    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "hostd", "--config", str(config), "mcp", *args],
        env=_env(),
        cwd=str(ROOT),
    )
    # Its stderr is ours: warnings only (the CLI's level for commands other than serve).
    async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
        await session.initialize()
        await session.list_tools()  # as clients do: the result is validated against the schema

        async def call() -> Any:
            result = await session.call_tool("compose_context", {"goal": GOAL})
            assert not result.is_error, result
            return result

        async def validation_ms(result: Any) -> float:
            # What the SDK client spends checking structuredContent against the output
            # schema on every call (a second check, timed alone, outside the pair).
            start = time.perf_counter()
            await session.validate_tool_result("compose_context", result)
            return (time.perf_counter() - start) * 1000

        call.validation_ms = validation_ms  # type: ignore[attr-defined]
        yield call


def _summary(api: list[float], mcp: list[float]) -> dict[str, Any]:
    ratios = sorted(m / a for a, m in zip(api, mcp, strict=True))

    def p90(xs: list[float]) -> float:
        return sorted(xs)[int(0.9 * (len(xs) - 1))]

    return {
        "rounds": len(api),
        "api_ms": {"median": round(statistics.median(api), 3), "p90": round(p90(api), 3)},
        "mcp_ms": {"median": round(statistics.median(mcp), 3), "p90": round(p90(mcp), 3)},
        "ratio_median": round(statistics.median(ratios), 3),
        "ratio_p90": round(p90(ratios), 3),
    }


async def _paired(
    api: Callable[[], Awaitable[Any]], mcp: Callable[[], Awaitable[Any]], rounds: int
) -> dict[str, Any]:
    for _ in range(10):  # warm-up: providers started, caches and imports hot
        await api()
        await mcp()
    api_ms: list[float] = []
    mcp_ms: list[float] = []
    check_ms: list[float] = []
    for i in range(rounds):
        order = (api, mcp) if i % 2 == 0 else (mcp, api)  # no side always goes first
        for fn in order:
            start = time.perf_counter()
            result = await fn()
            (api_ms if fn is api else mcp_ms).append((time.perf_counter() - start) * 1000)
            if fn is mcp:
                check_ms.append(await mcp.validation_ms(result))  # type: ignore[attr-defined]
    out = _summary(api_ms, mcp_ms)
    out["sdk_client_schema_check_ms"] = round(statistics.median(check_ms), 3)
    net = [m - c for m, c in zip(mcp_ms, check_ms, strict=True)]
    out["ratio_median_without_client_check"] = round(
        statistics.median(sorted(n / a for a, n in zip(api_ms, net, strict=True))), 3
    )
    return out


async def _connect_mode(config: Path, workdir: Path, rounds: int) -> dict[str, Any]:
    socket = workdir / "run" / "hostd.sock"
    async with (
        serving_daemon(config, ROOT, env=_env(), guard_s=60),
        connect(socket) as client,
        _mcp(config, "--connect", str(socket)) as mcp,
    ):

        async def api() -> Any:
            # compose_context returns no evidence: this side asks for none either.
            return await client.compose(GOAL, include_content=False)

        return await _paired(api, mcp, rounds)


async def _local_mode(config: Path, rounds: int) -> dict[str, Any]:
    async with (
        spawn(config, stderr=subprocess.DEVNULL, env=_env(), cwd=ROOT) as client,
        _mcp(config) as mcp,
    ):

        async def api() -> Any:
            return await client.compose(GOAL, include_content=False)

        return await _paired(api, mcp, rounds)


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=200)
    parser.add_argument("--frames", type=int, default=8)
    parser.add_argument("--mode", default="connect,local")
    args = parser.parse_args()
    out: dict[str, Any] = {"frames_per_provider": args.frames, "providers": 3}
    for mode in args.mode.split(","):
        workdir = Path(tempfile.mkdtemp(prefix="hbm-"))
        try:
            config = _config(workdir, args.frames)
            if mode == "connect":
                out[mode] = await _connect_mode(config, workdir, args.rounds)
            else:
                out[mode] = await _local_mode(config, args.rounds)
        finally:
            shutil.rmtree(workdir, ignore_errors=True)
    sys.stdout.write(orjson.dumps(out, option=orjson.OPT_INDENT_2).decode() + "\n")


if __name__ == "__main__":
    anyio.run(main, backend="asyncio")
