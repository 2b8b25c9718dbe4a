#!/usr/bin/env python3
"""Fan-out overhead benchmark: 8 child providers each answer 50 frames after a 20 ms delay.

Prints JSON with the median and p99 of (fan-out latency − the slowest provider's
delay), i.e. what the host adds on top of its slowest provider: writing the
queries, the providers' encoding, the pipes, parsing, the leg audit, ordering.
Target (issue 4): median ≤ 5 ms.

It then measures a *floor* on the same machine: the same provider processes
driven by a bare loop (write the query line, read the reply line, parse it with
the transport's reply model, run the leg audit), without the engine's task
group, timeouts, correlation table, health, reports or fan-out assembly. The
floor is what the wire, the providers and the per-frame work cost here; the
engine's own share is the difference (``engine_over_floor_ms``).

    python scripts/bench_fanout.py [--providers 8] [--frames 50] [--delay-ms 20]
                                   [--rounds 200] [--warmup 20] [--no-floor]

Run with ``--serve NAME`` it is one of the providers (built on ``hostd.provider``).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import time
from pathlib import Path

SCRIPT = Path(__file__).resolve()
ROOT = SCRIPT.parents[1]
sys.path.insert(0, str(ROOT))

import anyio  # noqa: E402

from hostd.protocol import (  # noqa: E402
    Capabilities,
    ContextQuery,
    ContextQueryResult,
    ProviderInfo,
)
from hostd.provider import Provider, make_frame, run_stdio  # noqa: E402


class BenchProvider(Provider):
    def __init__(self, name: str, frames: int, delay_ms: float) -> None:
        self.info = ProviderInfo(name=name, version="1.0.0")
        self.capabilities = Capabilities(correlation=True)
        body = "Lorem ipsum dolor sit amet, consectetur adipiscing elit. " * 3
        self.frames = [
            make_frame(
                id=f"{name}:{i}",
                kind="snippet",
                title=f"{name} frame {i}",
                content=f"{i}: {body}",
                citation_label=f"{name} L{i}",
                score=round(1 - i / (frames + 1), 4),
                uri=f"file:///bench/{name}/{i}.txt",
            ).to_wire()
            for i in range(frames)
        ]
        self.delay = delay_ms / 1000

    async def query(self, query: ContextQuery) -> ContextQueryResult:
        await anyio.sleep(self.delay)
        return ContextQueryResult(frames=self.frames[: query.max_frames])


async def floor(args: argparse.Namespace, query: ContextQuery) -> dict[str, object]:
    """The same providers and per-frame work without the engine (see the module text)."""
    from hostd.engine import audit_leg
    from hostd.protocol import PROTOCOL_VERSION
    from hostd.transport import LineReader, encode_line
    from hostd.transport._jsonrpc import _FastQueryReply

    procs = [
        await anyio.open_process(
            _serve_command(args, f"p{i}"),
            env={**os.environ, "PYTHONPATH": str(ROOT)},
        )
        for i in range(args.providers)
    ]
    try:
        readers = [LineReader(p.stdout) for p in procs]  # type: ignore[arg-type]
        hello = {"protocol_version": PROTOCOL_VERSION, "host": {"name": "b", "version": "1"}}
        for p, r in zip(procs, readers, strict=True):
            assert p.stdin is not None
            await p.stdin.send(
                encode_line(
                    {"jsonrpc": "2.0", "id": 0, "method": "context/handshake", "params": hello}
                )
            )
            await r.receive_line()
        overheads: list[float] = []
        cpu: list[float] = []

        async def leg(i: int, rid: int) -> None:
            stdin = procs[i].stdin
            assert stdin is not None
            request = {"query": query.to_wire()}
            await stdin.send(
                encode_line(
                    {"jsonrpc": "2.0", "id": rid, "method": "context/query", "params": request}
                )
            )
            reply = _FastQueryReply.model_validate_json(await readers[i].receive_line())
            audit = audit_leg(f"p{i}", query, reply.result.frames)
            if len(audit.accepted) != args.frames:
                raise SystemExit(f"floor: p{i} returned {len(audit.accepted)} frames")

        for round_ in range(args.warmup + args.rounds):
            t0, c0 = time.perf_counter(), time.process_time()
            async with anyio.create_task_group() as tg:
                for i in range(args.providers):
                    tg.start_soon(leg, i, round_ + 1)
            if round_ >= args.warmup:
                overheads.append((time.perf_counter() - t0) * 1000 - args.delay_ms)
                cpu.append((time.process_time() - c0) * 1000)
    finally:
        for p in procs:
            await p.aclose()
    return {
        "overhead_ms": {
            "median": round(statistics.median(overheads), 3),
            "p99": round(percentile(overheads, 99), 3),
        },
        "host_cpu_ms": {"median": round(statistics.median(cpu), 3)},
    }


def _serve_command(args: argparse.Namespace, name: str) -> list[str]:
    return [
        sys.executable,
        str(SCRIPT),
        "--serve",
        name,
        "--frames",
        str(args.frames),
        "--delay-ms",
        str(args.delay_ms),
    ]


def percentile(values: list[float], p: float) -> float:
    ordered = sorted(values)
    k = max(0, min(len(ordered) - 1, round(p / 100 * (len(ordered) - 1))))
    return ordered[k]


async def bench(args: argparse.Namespace) -> dict[str, object]:
    import structlog

    from hostd.engine import Host, LegStatus, ProviderSpec

    # Quiet the per-process info events; the benchmark measures, it does not log.
    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(30))
    specs = [
        ProviderSpec(
            f"p{i}",
            _serve_command(args, f"p{i}"),
            env={"PYTHONPATH": str(ROOT)},
            timeout_ms=10_000,
        )
        for i in range(args.providers)
    ]
    query = ContextQuery(goal="benchmark", max_frames=args.frames, max_tokens=0)
    per_frame = (len(json.dumps(BenchProvider("p0", 1, 0).frames[0]["content"])) + 3) // 4
    budget = args.providers * args.frames * (per_frame + 8)
    overheads: list[float] = []
    totals: list[float] = []
    cpu: list[float] = []
    # The engine alone (verify_stage=None); ``--verify`` measures with the default
    # verification stage too (scripts/bench_verify.py covers that stage in depth).
    stage_kw = {} if args.verify else {"verify_stage": None}
    async with Host(specs, start="boot", handshake_timeout_s=30, **stage_kw) as host:
        for round_ in range(args.warmup + args.rounds):
            t0, c0 = time.perf_counter(), time.process_time()
            fan = await host.query_all(query, budget)
            elapsed = (time.perf_counter() - t0) * 1000
            host_cpu = (time.process_time() - c0) * 1000
            bad = [r for r in fan.reports.values() if r.status is not LegStatus.OK]
            if bad or len(fan.accepted) != args.providers * args.frames:
                raise SystemExit(f"round {round_}: unexpected result {bad or len(fan.accepted)}")
            if round_ >= args.warmup:
                totals.append(elapsed)
                overheads.append(elapsed - args.delay_ms)
                cpu.append(host_cpu)
            # Free this fan-out before the next one starts, as the daemon does once a
            # request is answered. Held, its 400 frames would stay alive through the next
            # fan-out and be freed inside its timing (about 1 ms of this machine's time).
            del fan, bad
    engine_median = statistics.median(overheads)
    out: dict[str, object] = {}
    if not args.no_floor:
        # Each leg asks for its equal share, as the engine's budget_split does here.
        share = query.model_copy(update={"max_tokens": budget // args.providers})
        base = await floor(args, share)
        base_median = base["overhead_ms"]["median"]  # type: ignore[index]
        out = {
            "floor": base,
            "engine_over_floor_ms": round(engine_median - base_median, 3),
            "engine_to_floor_ratio": round(engine_median / base_median, 2),
        }
    return {
        "benchmark": "fanout",
        "providers": args.providers,
        "frames_per_provider": args.frames,
        "provider_delay_ms": args.delay_ms,
        "rounds": args.rounds,
        "verify_stage": bool(args.verify),
        "overhead_ms": {
            "median": round(statistics.median(overheads), 3),
            "p99": round(percentile(overheads, 99), 3),
            "min": round(min(overheads), 3),
        },
        "fanout_ms": {
            "median": round(statistics.median(totals), 3),
            "p99": round(percentile(totals, 99), 3),
        },
        # CPU the host process spent per fan-out (all 8 legs): what no scheduler noise hides.
        "host_cpu_ms": {"median": round(statistics.median(cpu), 3)},
        "load_average_1m": round(os.getloadavg()[0], 2),
        **out,
        "target_median_ms": 5.0,
        "python": platform.python_version(),
        "cpus": os.cpu_count(),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--providers", type=int, default=8)
    parser.add_argument("--frames", type=int, default=50)
    parser.add_argument("--delay-ms", type=float, default=20.0)
    parser.add_argument("--rounds", type=int, default=200)
    parser.add_argument("--warmup", type=int, default=20)
    parser.add_argument("--verify", action="store_true", help="keep the default verify stage")
    parser.add_argument("--no-floor", action="store_true", help="skip the engine-free floor")
    parser.add_argument("--serve", metavar="NAME", help="run as one benchmark provider")
    args = parser.parse_args()
    if args.serve:
        run_stdio(BenchProvider(args.serve, args.frames, args.delay_ms))
        return
    print(json.dumps(anyio.run(bench, args, backend="asyncio"), indent=2))


if __name__ == "__main__":
    main()
