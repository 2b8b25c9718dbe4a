#!/usr/bin/env python3
"""What a rerank server that is down costs a run of compositions, with and without its cool-down.

A ``[reranker] url`` server that gives no answer is left alone after
``cool_down_after`` failures in a row (``hostd.engine.decide_ask``). This times the
rerank stage (``RerankPreparer.judge`` over ``HttpReranker``, the daemon's own code)
for ``--compositions`` compositions back to back against a server that is down, two
ways, each with the cool-down at its defaults (``on``) and turned off
(``cool_down_after = 0``, ``off``: every composition asks, as before it existed):

- ``hang``: ``tests.fixtures.rerank_server hang`` accepts and never answers, so each
  composition that asks it waits its whole ``--timeout-ms``;
- ``refused``: a loopback port nothing listens on, so each ask is a refused connection.

Prints JSON: per case, the run's total milliseconds, how many compositions asked the
server (``exchanges``) and how many were spared (``skipped``), and the median
milliseconds of an asking and of a spared composition.

    python scripts/bench_rerank_down.py [--compositions 40] [--timeout-ms 200]
                                        [--cool-down-ms 1000]
"""

from __future__ import annotations

import argparse
import contextlib
import socket
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import anyio
import orjson

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from hostd.config import RerankerSettings  # noqa: E402 - after the sys.path insert
from hostd.engine import HttpReranker, PoolSettings  # noqa: E402
from hostd.logs import configure_logging  # noqa: E402
from hostd.pipeline import RerankPreparer  # noqa: E402
from hostd.provider import make_frame  # noqa: E402
from hostd.server._engine import make_reranker  # noqa: E402


async def _hanging(stack: contextlib.AsyncExitStack) -> str:
    """A server that accepts and never answers: its URL, until ``stack`` closes."""
    process = await anyio.open_process(
        [sys.executable, "-m", "tests.fixtures.rerank_server", "hang"],
        cwd=ROOT,
        stdin=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    stack.push_async_callback(process.wait)
    stack.callback(process.kill)
    assert process.stdout is not None
    line = b""
    while not line.endswith(b"\n"):  # "port N", once it listens
        line += await process.stdout.receive(1)
    return f"http://127.0.0.1:{int(line.split()[1])}"


def _refusing() -> str:
    """A loopback port nothing listens on (bound, then closed)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    return f"http://127.0.0.1:{port}"


def _frames() -> list[tuple[str, Any]]:
    return [
        (("files", "semantic")[i % 2], make_frame(
            id=f"c{i}", kind="doc", title=f"chunk {i}", content=f"text of chunk {i}",
            citation_label=f"chunk {i}", score=round(1 - i / 11, 4),
        ))
        for i in range(10)
    ]  # fmt: skip


def _median(ms: list[float]) -> float | None:
    return round(statistics.median(ms), 3) if ms else None


async def _case(url: str, cool_down_after: int, args: argparse.Namespace) -> dict[str, Any]:
    settings = RerankerSettings(
        url=url,
        timeout_ms=args.timeout_ms,
        cool_down_after=cool_down_after,
        cool_down_ms=args.cool_down_ms,
        max_cool_down_ms=max(args.cool_down_ms, RerankerSettings().max_cool_down_ms),
    )
    frames = _frames()
    asked: list[float] = []
    spared: list[float] = []
    reranker = make_reranker(settings, PoolSettings())
    assert isinstance(reranker, HttpReranker)
    async with reranker:
        preparer = RerankPreparer(reranker, settings)
        started = time.perf_counter()
        for _ in range(args.compositions):
            before = reranker.skipped
            t0 = time.perf_counter()
            verdict = await preparer.judge("why does the cache miss?", frames)
            took = (time.perf_counter() - t0) * 1000
            assert verdict.reason in ("timeout", "unavailable"), verdict
            (spared if reranker.skipped > before else asked).append(took)
        total = (time.perf_counter() - started) * 1000
        exchanges = reranker.row()["remote"].get("exchanges", 0)
    return {
        "total_ms": round(total, 1),
        "exchanges": exchanges,
        "skipped": len(spared),
        "asked_median_ms": _median(asked),
        "spared_median_ms": _median(spared),
    }


async def _run(args: argparse.Namespace) -> dict[str, Any]:
    out: dict[str, Any] = {"compositions": args.compositions, "timeout_ms": args.timeout_ms}
    async with contextlib.AsyncExitStack() as stack:
        urls = {"hang": await _hanging(stack), "refused": _refusing()}
        for name, url in urls.items():
            out[name] = {
                "on": await _case(url, RerankerSettings().cool_down_after, args),
                "off": await _case(url, 0, args),
            }
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--compositions", type=int, default=40)
    parser.add_argument("--timeout-ms", type=int, default=200)
    parser.add_argument("--cool-down-ms", type=int, default=RerankerSettings().cool_down_ms)
    args = parser.parse_args()
    configure_logging("error")  # every composition falls back: its warnings are the point
    result = anyio.run(_run, args, backend="asyncio")
    sys.stdout.write(orjson.dumps(result, option=orjson.OPT_INDENT_2).decode() + "\n")


if __name__ == "__main__":
    main()
