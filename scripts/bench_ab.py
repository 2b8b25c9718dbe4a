#!/usr/bin/env python3
"""Paired fan-out benchmark: this checkout against another, fan-out by fan-out.

On a shared machine the same code can measure 1.5x slower at one hour than at
another, so two benchmark runs taken minutes apart compare the machine's phases,
not the code. This script starts two hosts, each from its own checkout with its
own 8 providers (``bench_fanout.py --serve`` of that checkout), and alternates
them one fan-out at a time (ABBA order), so both see the same phases. It prints
as JSON each side's median and p90 overhead (fan-out latency minus the providers'
delay) and host CPU, and the paired differences (this checkout minus the other):
their median, their mean and how often this checkout was faster.

    git worktree add /tmp/base <commit>
    python scripts/bench_ab.py /tmp/base [--rounds 400] [--warmup 20]
                               [--providers 8] [--frames 50] [--delay-ms 20]

Two runs of this checkout against itself differed by 0.01 to 0.02 ms (median of
300 paired differences) on the development machine.

``--audit`` pairs the leg audit alone instead (no providers): each side's worker
runs ``audit_leg`` over the same reply of ``--frames`` raw frames (about 900
characters of prose each, three F4 timestamps, the query's ``as_of`` inside their
window) ``--audit-calls`` times per round; "overhead" is then wall ms per audit.

    python scripts/bench_ab.py /tmp/base --audit [--rounds 200] [--frames 50]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

import orjson

SCRIPT = Path(__file__).resolve()
ROOT = SCRIPT.parents[1]


def audit_worker(args: argparse.Namespace) -> None:
    """The leg audit of checkout ``args.worker``: ``--audit-calls`` audits per ``go`` line."""
    from hostd.engine import audit_leg
    from hostd.protocol import ContextQuery, canonical_token_cost

    words = "the retry handler reads its budget from the config and backs off".split()
    raw = []
    for i in range(args.frames):
        content = " ".join(words[(i + k) % len(words)] for k in range(160))[:900]
        raw.append(
            {
                "id": f"f{i}",
                "kind": "snippet",
                "title": f"frame {i}",
                "content": content,
                "score": 0.5,
                "token_cost": canonical_token_cost(content),
                "citation_label": f"frame {i}",
                "valid_from": "2026-01-01T00:00:00Z",
                "valid_to": "2027-01-01T00:00:00.5Z",
                "recorded_at": f"2026-06-{1 + i % 28:02d}T12:30:{i % 60:02d}.123456Z",
            }
        )
    query = ContextQuery(
        goal="benchmark",
        max_frames=args.frames,
        max_tokens=10**6,
        as_of="2026-07-01T00:00:00Z",
    )
    assert len(audit_leg("p", query, raw).accepted) == args.frames
    print("ready", flush=True)
    for line in sys.stdin:
        if line.strip() != "go":
            break
        t0, c0 = time.perf_counter(), time.process_time()
        for _ in range(args.audit_calls):
            audit_leg("p", query, raw)
        wall = (time.perf_counter() - t0) * 1000 / args.audit_calls
        cpu = (time.process_time() - c0) * 1000 / args.audit_calls
        print(f"{wall:.4f} {cpu:.4f} 1", flush=True)


def worker(args: argparse.Namespace) -> None:
    """One host from checkout ``args.worker``: a fan-out per ``go`` line on stdin."""
    root = Path(args.worker).resolve()
    sys.path.insert(0, str(root))
    if args.audit:
        audit_worker(args)
        return
    import anyio
    import structlog

    from hostd.engine import Host, ProviderSpec
    from hostd.protocol import ContextQuery

    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(30))
    serve = [sys.executable, str(root / "scripts" / "bench_fanout.py"), "--serve"]
    size = ["--frames", str(args.frames), "--delay-ms", str(args.delay_ms)]
    specs = [
        ProviderSpec(f"p{i}", [*serve, f"p{i}", *size], env={"PYTHONPATH": str(root)})
        for i in range(args.providers)
    ]
    query = ContextQuery(goal="benchmark", max_frames=args.frames, max_tokens=0)
    expected = args.providers * args.frames

    async def run() -> None:
        async with Host(specs, start="boot", start_timeout_s=60, verify_stage=None) as host:
            print("ready", flush=True)
            for line in sys.stdin:
                if line.strip() != "go":
                    break
                t0, c0 = time.perf_counter(), time.process_time()
                fan = await host.query_all(query, 10**7)
                overhead = (time.perf_counter() - t0) * 1000 - args.delay_ms
                cpu = (time.process_time() - c0) * 1000
                ok = len(fan.accepted) == expected
                del fan  # freed before the next fan-out, as bench_fanout.py does
                print(f"{overhead:.4f} {cpu:.4f} {int(ok)}", flush=True)

    anyio.run(run, backend="asyncio")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("other", nargs="?", help="the checkout to compare with")
    parser.add_argument("--rounds", type=int, default=400)
    parser.add_argument("--warmup", type=int, default=20)
    parser.add_argument("--providers", type=int, default=8)
    parser.add_argument("--frames", type=int, default=50)
    parser.add_argument("--delay-ms", type=float, default=20.0)
    parser.add_argument("--audit", action="store_true", help="pair the leg audit alone")
    parser.add_argument("--audit-calls", type=int, default=20)
    parser.add_argument("--worker", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        worker(args)
        return
    if not args.other:
        parser.error("name the checkout to compare with")
    other = Path(args.other).resolve()
    if not (other / "scripts" / "bench_fanout.py").is_file():
        parser.error(f"{other} has no scripts/bench_fanout.py")
    sides = {"other": other, "this": ROOT}
    passed = [
        f"--{name}={getattr(args, name.replace('-', '_'))}"
        for name in ("providers", "frames", "delay-ms", "audit-calls")
    ]
    if args.audit:
        passed.append("--audit")
    procs = {
        side: subprocess.Popen(
            [sys.executable, str(SCRIPT), "--worker", str(root), *passed],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            env={**os.environ, "PYTHONPATH": str(root)},
        )
        for side, root in sides.items()
    }
    overhead: dict[str, list[float]] = {side: [] for side in sides}
    cpu: dict[str, list[float]] = {side: [] for side in sides}
    try:
        for proc in procs.values():
            assert proc.stdout is not None
            if proc.stdout.readline().strip() != "ready":
                raise SystemExit("a worker failed to start its providers")
        for round_ in range(args.warmup + args.rounds):
            order = ("other", "this") if round_ % 2 == 0 else ("this", "other")
            for side in order:
                proc = procs[side]
                assert proc.stdin is not None and proc.stdout is not None
                proc.stdin.write("go\n")
                proc.stdin.flush()
                ms, cpu_ms, ok = proc.stdout.readline().split()
                if ok != "1":
                    raise SystemExit(f"round {round_}: {side} did not get every frame")
                if round_ >= args.warmup:
                    overhead[side].append(float(ms))
                    cpu[side].append(float(cpu_ms))
    finally:
        for proc in procs.values():
            if proc.stdin is not None:
                proc.stdin.close()
        for proc in procs.values():
            proc.wait(timeout=60)
    sys.path.insert(0, str(SCRIPT.parent))
    from bench_fanout import percentile

    diff = [b - a for a, b in zip(overhead["other"], overhead["this"], strict=True)]
    out: dict[str, object] = {
        "measured": "leg audit (ms per audit)" if args.audit else "fan-out overhead",
        "rounds": args.rounds,
        "providers": args.providers,
        "frames": args.frames,
        "delay_ms": args.delay_ms,
    }
    for side, root in sides.items():
        out[side] = {
            "checkout": str(root),
            "overhead_ms": {
                "median": round(statistics.median(overhead[side]), 3),
                "p90": round(percentile(overhead[side], 90), 3),
            },
            "host_cpu_ms": {"median": round(statistics.median(cpu[side]), 3)},
        }
    out["this_minus_other_ms"] = {
        "median": round(statistics.median(diff), 3),
        "mean": round(statistics.mean(diff), 3),
        "this_faster_in": f"{sum(d < 0 for d in diff)}/{len(diff)}",
    }
    out["load_average_1m"] = round(os.getloadavg()[0], 2)
    print(orjson.dumps(out, option=orjson.OPT_INDENT_2).decode())


if __name__ == "__main__":
    main()
