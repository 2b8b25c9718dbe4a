#!/usr/bin/env python3
"""Fan-out overhead benchmark: 8 child providers each answer 50 frames after a 20 ms delay.

Prints JSON with the median and p99 of (fan-out latency − the slowest provider's
delay), i.e. what the host adds on top of its slowest provider: writing the
queries, the providers' encoding, the pipes, parsing, the leg audit, ordering.
Target: median ≤ 5 ms.

It then measures a *floor*: the same kind of provider processes (eight more)
driven by the least the work needs, in plain code (write every query line at
once, then in the pipe's read callback ``orjson.loads`` each reply, validate each
frame and run the leg audit), without the engine's consent gate, correlation table, timeouts,
tasks, health, reports or fan-out assembly. The floor is what the wire, the
providers and the per-frame work cost here. The engine and the floor then take
turns fan-out by fan-out (ABBA), so both see the same phases of a shared
machine; the engine's own share is their paired difference
(``engine_over_floor_ms``: its median, and in how many pairs the engine was
slower; ``engine_to_floor_ratio``: the engine's paired median over the floor's,
target 1.3). The headline ``overhead_ms`` comes from the engine running alone first.

``--layers`` replaces that pairing with a decomposition: five floors, each with
its own eight providers, doing more and more of the per-reply work (``LAYERS``:
read the line, decode the JSON, validate it into frames, audit them, keep them),
and the engine, all taking turns in every round. Each layer's ``step_ms`` is what
its piece of work adds over the layer before, paired round by round.

    python scripts/bench_fanout.py [--providers 8] [--frames 50] [--delay-ms 20]
                                   [--rounds 200] [--warmup 20] [--no-floor | --layers]

Run with ``--serve NAME`` it is one of the providers (built on ``hostd.provider``).
"""

from __future__ import annotations

import argparse
import os
import platform
import random
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import orjson

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


#: What a floor does with each reply line in the pipe's callback, least to most; each
#: layer adds one piece of the work to the one before (see ``--layers``).
LAYERS = {
    "read": "take the line and drop it: the providers, the pipes and the wake-ups",
    "json": "+ decode the JSON (orjson.loads, plain dicts)",
    "parse": "+ validate each frame into a ContextFrame",
    "audit": "+ the leg audit (the floor the engine is paired with)",
    "keep": "+ keep every audited reply until the fan-out ends, as a fan-out must",
}


class Floor:
    """The same providers and per-frame work without the engine (see the module text):
    its own provider processes, each reply handled in the pipe's callback. ``work``
    (one of ``LAYERS``) says how much of the per-reply work it does."""

    def __init__(self, args: argparse.Namespace, query: ContextQuery, work: str = "audit") -> None:
        self.args = args
        self.query = query
        self.work = work
        self.kept: list[Any] = []
        self.children: list[Any] = []
        self.waiting = 0
        self.all_in = anyio.Event()
        self.failures: list[str] = []

    async def start(self, task_group: Any) -> None:
        from hostd.protocol import PROTOCOL_VERSION
        from hostd.transport import ChildProcess

        for i in range(self.args.providers):
            child = await ChildProcess.spawn(
                f"f{i}", _serve_command(self.args, f"f{i}"), env={"PYTHONPATH": str(ROOT)}
            )
            self.children.append(child)
            child.start_pumps(task_group)
            await child.start_reading(self._leg(f"f{i}"))
        hello = {"protocol_version": PROTOCOL_VERSION, "host": {"name": "b", "version": "1"}}
        self._send_all("context/handshake", hello, 0)
        await self._all_replies()

    def _leg(self, name: str) -> Any:
        from hostd.engine import audit_leg
        from hostd.errors import HostdError
        from hostd.protocol import ContextFrame

        floor = self
        layers = list(LAYERS)
        does = set(layers[: layers.index(self.work) + 1])  # this layer and every one below
        json_only = self.work == "json"
        parse, audit, keep = ("parse" in does, "audit" in does, "keep" in does)

        class Leg:
            shaken = False

            def on_line(self, line: bytes) -> bool:
                if self.shaken and json_only:
                    orjson.loads(line)
                elif self.shaken and parse:
                    raw = orjson.loads(line)["result"]["frames"]
                    frames = [ContextFrame.model_validate(f) for f in raw]
                    if audit:
                        done = audit_leg(name, floor.query, frames)
                        if len(done.accepted) != floor.args.frames:
                            floor.failures.append(f"{name} returned {len(done.accepted)} frames")
                        if keep:
                            floor.kept.append(done)
                self.shaken = True
                floor.waiting -= 1
                if floor.waiting == 0:
                    floor.all_in.set()
                return True

            def on_end(self, error: HostdError) -> None:
                floor.failures.append(f"{name}: {error.message}")
                floor.all_in.set()

        return Leg()

    def _send_all(self, method: str, params: dict[str, object], rid: int) -> None:
        from hostd.transport import encode_line

        self.waiting, self.all_in = len(self.children), anyio.Event()
        line = encode_line({"jsonrpc": "2.0", "id": rid, "method": method, "params": params})
        for child in self.children:
            if not child.send_nowait(line):
                raise SystemExit("floor: a request did not fit the pipe")

    async def _all_replies(self) -> None:
        await self.all_in.wait()
        if self.failures:
            raise SystemExit(f"floor: {self.failures[0]}")

    async def round(self, rid: int) -> tuple[float, float]:
        """One fan-out of the floor: (overhead ms, host CPU ms)."""
        t0, c0 = time.perf_counter(), time.process_time()
        self._send_all("context/query", {"query": self.query.to_wire()}, rid)
        await self._all_replies()
        elapsed = (time.perf_counter() - t0) * 1000
        cpu = (time.process_time() - c0) * 1000
        self.kept.clear()  # outside the timing, as the engine's caller frees its fan-out
        return elapsed - self.args.delay_ms, cpu

    async def aclose(self) -> None:
        self.failures.append("closed")  # the children's ends are expected from here
        for child in self.children:
            await child.aclose(grace=2)


async def paired_with_floor(
    args: argparse.Namespace, fan_out: Any, host: Any, floor: Floor
) -> dict[str, object]:
    """The engine and the floor alternated fan-out by fan-out (ABBA), so both see the
    same phases of the machine: the floor's figures and the paired differences."""
    engine: list[float] = []
    base: list[float] = []
    base_cpu: list[float] = []
    for round_ in range(args.warmup + args.rounds):
        if round_ % 2 == 0:
            elapsed, _ = await fan_out(host, round_)
            floor_ms, floor_cpu = await floor.round(round_ + 1)
        else:
            floor_ms, floor_cpu = await floor.round(round_ + 1)
            elapsed, _ = await fan_out(host, round_)
        if round_ >= args.warmup:
            engine.append(elapsed - args.delay_ms)
            base.append(floor_ms)
            base_cpu.append(floor_cpu)
    diffs = [e - f for e, f in zip(engine, base, strict=True)]
    floor_median = statistics.median(base)
    return {
        "floor": {
            "overhead_ms": {
                "median": round(statistics.median(base), 3),
                "p99": round(percentile(base, 99), 3),
            },
            "host_cpu_ms": {"median": round(statistics.median(base_cpu), 3)},
        },
        "engine_paired_ms": {"median": round(statistics.median(engine), 3)},
        "engine_over_floor_ms": {
            "median": round(statistics.median(diffs), 3),
            "engine_slower_in": f"{sum(d > 0 for d in diffs)}/{len(diffs)}",
        },
        # The target: the engine's paired overhead at most 1.3x the floor's.
        "engine_to_floor_ratio": (
            round(statistics.median(engine) / floor_median, 3) if floor_median > 0 else None
        ),
        "target_ratio": 1.3,
    }


async def layered(
    args: argparse.Namespace, fan_out: Any, host: Any, floors: dict[str, Floor]
) -> dict[str, object]:
    """The engine and one floor per layer of work, all taking turns within each round
    (in an order shuffled round by round, seeded), so every layer sees the same phases
    of the machine. Per layer: its median overhead and host CPU, and ``step_ms``, the
    median of its paired differences (same round) with the layer before it; the
    engine's step is over ``keep``, the most a floor does."""
    names = [*floors, "engine"]
    overhead: dict[str, list[float]] = {name: [] for name in names}
    cpu: dict[str, list[float]] = {name: [] for name in names}
    order = random.Random(4)
    for round_ in range(args.warmup + args.rounds):
        for name in order.sample(names, len(names)):
            if name == "engine":
                elapsed, used = await fan_out(host, round_)
                ms = elapsed - args.delay_ms
            else:
                ms, used = await floors[name].round(round_ + 1)
            if round_ >= args.warmup:
                overhead[name].append(ms)
                cpu[name].append(used)
    out: dict[str, object] = {}
    for before, name in zip([None, *names], names, strict=False):
        steps = (
            [a - b for a, b in zip(overhead[name], overhead[before], strict=True)]
            if before is not None
            else overhead[name]
        )
        out[name] = {
            "does": LAYERS.get(name, "the engine: Host.query_all"),
            "overhead_ms": round(statistics.median(overhead[name]), 3),
            "host_cpu_ms": round(statistics.median(cpu[name]), 3),
            "step_ms": round(statistics.median(steps), 3),
        }
    return {"layers": out}


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
    per_frame = (len(orjson.dumps(BenchProvider("p0", 1, 0).frames[0]["content"])) + 3) // 4
    budget = args.providers * args.frames * (per_frame + 8)
    overheads: list[float] = []
    totals: list[float] = []
    cpu: list[float] = []
    # The engine alone (verify_stage=None); ``--verify`` measures with the default
    # verification stage too (scripts/bench_verify.py covers that stage in depth).
    stage_kw = {} if args.verify else {"verify_stage": None}

    async def fan_out(host: Any, round_: int) -> tuple[float, float]:
        t0, c0 = time.perf_counter(), time.process_time()
        fan = await host.query_all(query, budget)
        elapsed = (time.perf_counter() - t0) * 1000
        host_cpu = (time.process_time() - c0) * 1000
        bad = [r for r in fan.reports.values() if r.status is not LegStatus.OK]
        if bad or len(fan.accepted) != args.providers * args.frames:
            raise SystemExit(f"round {round_}: unexpected result {bad or len(fan.accepted)}")
        # Free this fan-out before the next one starts, as the daemon does once a request
        # is answered. Held, its 400 frames would stay alive through the next fan-out and
        # be freed inside its timing (about 1 ms of this machine's time).
        del fan, bad
        return elapsed, host_cpu

    out: dict[str, object] = {}
    async with (
        Host(specs, start="boot", start_timeout_s=30, **stage_kw) as host,
        anyio.create_task_group() as tg,
    ):
        for round_ in range(args.warmup + args.rounds):
            elapsed, host_cpu = await fan_out(host, round_)
            if round_ >= args.warmup:
                totals.append(elapsed)
                overheads.append(elapsed - args.delay_ms)
                cpu.append(host_cpu)
        # Each leg asks for its equal share, as the engine's budget_split does here.
        share = query.model_copy(update={"max_tokens": budget // args.providers})
        if args.layers:
            floors = {work: Floor(args, share, work) for work in LAYERS}
            try:
                for floor in floors.values():
                    await floor.start(tg)
                out = await layered(args, fan_out, host, floors)
            finally:
                for floor in floors.values():
                    await floor.aclose()
        elif not args.no_floor:
            floor = Floor(args, share)
            await floor.start(tg)
            try:
                out = await paired_with_floor(args, fan_out, host, floor)
            finally:
                await floor.aclose()
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
    parser.add_argument(
        "--layers",
        action="store_true",
        help="instead of the paired floor, one floor per layer of work with the engine, "
        "taking turns: where the overhead goes",
    )
    parser.add_argument("--serve", metavar="NAME", help="run as one benchmark provider")
    args = parser.parse_args()
    if args.serve:
        run_stdio(BenchProvider(args.serve, args.frames, args.delay_ms))
        return
    print(
        orjson.dumps(anyio.run(bench, args, backend="asyncio"), option=orjson.OPT_INDENT_2).decode()
    )


if __name__ == "__main__":
    main()
