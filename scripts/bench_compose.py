"""Benchmark hostd.compose: median milliseconds per compose_for_prompt call.

Synthetic candidates from 8 providers (each on its own score scale, ~5% of the
evidence served twice, file provenance on every frame) at 1k, 10k and 100k
frames, budget 8,000 tokens, for each ranking policy. Prints one JSON object:
per size and policy the median of ``compose`` (the call itself; the audit is
complete but its bulk of excluded entries is kept as compact rows until read)
and of ``compose+audit`` (also building every audit entry as a dict, which is
what the daemon logs), in wall-clock and process-CPU milliseconds, and the
100k/10k growth ratios. Scores are full-precision floats, each provider on its
own scale.

Targets (not tests): 10k candidates <= 30 ms median on 2 cores, 100k/10k <= 12x.

``vs_langchain``: the full ``compose_for_prompt(strategy="rrf")`` plus
``to_wire()`` of 4 provider lists x 200 frames, against LangChain's
``EnsembleRetriever.weighted_reciprocal_rank`` fusing the same four rank lists
(as ``Document``s), timed alternately in one run; target: hostd within 8x.
LangChain is optional (``pip install -e '.[bench]'``): without it that section
says so and the other figures are still printed.

``shared_labels``: the same composition (260 frames fit, 540 do not) where every
frame carries one citation label against one where each label is unique,
compose + ``to_wire()`` taking turns call by call; target: shared <= 1.1x unique
(unique labels are handed out in linear time).

``--checkout DIR`` imports hostd from another checkout (e.g. ``git archive`` of a
base commit unpacked in /tmp), so the same script gives before and after figures.

``--wire`` decodes every frame from its JSON wire form first (``model_validate_json``,
as the daemon receives them) instead of building it from Python values; the
models then lie differently in memory, and composing them costs more.

    python scripts/bench_compose.py [--repeat N] [--sizes 1000,10000,100000] [--wire]
        [--lists-repeat N] [--labels-repeat N] [--checkout DIR]
"""

from __future__ import annotations

import argparse
import gc
import os
import platform
import random
import statistics
import sys
import time
from pathlib import Path

import orjson

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _bench_checkout import checkout as _checkout  # noqa: E402 - after the path set-up

sys.path.insert(0, str(_checkout()))

from hostd.compose import (  # noqa: E402 - after the path set-up above
    MarginFusion,
    PerProviderQuota,
    ReciprocalRankFusion,
    RoundRobinByRank,
    ScoreDescending,
    compose_for_prompt,
)
from hostd.compose._candidates import read_columns  # noqa: E402
from hostd.protocol import ContextFrame, Provenance, canonical_token_cost  # noqa: E402

PROVIDERS = [f"prov-{i}" for i in range(8)]
BUDGET = 8_000
WORDS = "retry backoff socket handler config parse token budget frame cache index".split()


def synthetic(n: int, seed: int = 7) -> list[tuple[str, ContextFrame]]:
    rng = random.Random(seed)
    out: list[tuple[str, ContextFrame]] = []
    for i in range(n):
        pid = PROVIDERS[i % len(PROVIDERS)]
        # ~5% of frames repeat an earlier frame's evidence from another provider.
        src = rng.randrange(i) if i and rng.random() < 0.05 else i
        words = rng.randint(8, 120)
        content = " ".join(WORDS[(src + k) % len(WORDS)] for k in range(words)) + f" #{src}"
        lo = 0.1 * (i % len(PROVIDERS)) / len(PROVIDERS)  # per-provider score scale
        score = lo + rng.random() * (1 - lo) * (0.4 if i % 2 else 1.0)
        digest = f"sha256:{src:064x}"
        # One file region per piece of evidence: 500 files, 20-line regions.
        uri = f"file:///repo/src/mod{src % 500}.py"
        first = (src // 500) * 30 + 1
        region = f"L{first}-{first + 19}"
        frame = ContextFrame.model_validate(
            {
                "id": f"f{i}",
                "kind": "snippet",
                "title": f"src/mod{src % 500}.py",
                "content": content,
                "content_digest": digest,
                "score": score,
                "token_cost": canonical_token_cost(content),
                "citation_label": f"mod{src % 500}.py {region}",
                "provenance": [
                    Provenance(
                        type="file",
                        uri=uri,
                        range=region,
                        digest=digest,
                    )
                ],
            }
        )
        out.append((pid, frame))
    return out


def medians(fn, repeat: int) -> tuple[float, float]:
    """Median wall-clock and median process-CPU milliseconds of ``fn()``.

    CPU time is reported beside wall time because a shared machine's wall clock
    also counts the time other processes held the core.
    """
    wall, cpu = [], []
    for _ in range(repeat):
        gc.collect()
        w0, c0 = time.perf_counter(), time.process_time()
        fn()
        cpu.append((time.process_time() - c0) * 1000)
        wall.append((time.perf_counter() - w0) * 1000)
    return round(statistics.median(wall), 2), round(statistics.median(cpu), 2)


def _weighted_reciprocal_rank() -> object | None:
    """LangChain's fusion, bound to an ensemble of four equal weights (or None)."""
    try:
        from langchain_classic.retrievers.ensemble import EnsembleRetriever
    except ImportError:
        try:  # langchain < 1.0 kept it here
            from langchain.retrievers.ensemble import EnsembleRetriever  # type: ignore[no-redef]
        except ImportError:
            return None
    # model_construct: the fusion reads only weights, c and id_key, never the retrievers
    ensemble = EnsembleRetriever.model_construct(
        retrievers=[], weights=[0.25] * 4, c=60, id_key=None
    )
    return ensemble.weighted_reciprocal_rank


def versus_langchain(repeat: int) -> dict[str, object]:
    """compose + to_wire against weighted_reciprocal_rank, 4 lists x 200 frames."""
    fuse = _weighted_reciprocal_rank()
    if fuse is None:
        return {"skipped": "LangChain is not installed (pip install -e '.[bench]')"}
    from langchain_core.documents import Document

    frames = [(f"prov-{i % 4}", f) for i, (_, f) in enumerate(synthetic(800, seed=11))]
    lists: list[list[Document]] = []
    for p in sorted({pid for pid, _ in frames}):
        mine = sorted((f for pid, f in frames if pid == p), key=lambda f: -f.score)
        lists.append([Document(page_content=f.content or "", metadata={"id": f.id}) for f in mine])
    ours, theirs = [], []
    ours_cpu, theirs_cpu = [], []
    for _ in range(repeat):
        gc.collect()
        t0, c0 = time.perf_counter(), time.process_time()
        fuse(lists)
        t1, c1 = time.perf_counter(), time.process_time()
        compose_for_prompt(frames, BUDGET, strategy="rrf").to_wire()
        t2, c2 = time.perf_counter(), time.process_time()
        theirs.append((t1 - t0) * 1000)
        ours.append((t2 - t1) * 1000)
        theirs_cpu.append((c1 - c0) * 1000)
        ours_cpu.append((c2 - c1) * 1000)
    lc, hd = statistics.median(theirs), statistics.median(ours)
    lc_cpu, hd_cpu = statistics.median(theirs_cpu), statistics.median(ours_cpu)
    return {
        "lists": 4,
        "frames_per_list": 200,
        "budget": BUDGET,
        "langchain_weighted_reciprocal_rank_ms": round(lc, 3),
        "hostd_compose_and_to_wire_ms": round(hd, 3),
        "ratio": round(hd / lc, 2),
        "langchain_cpu_ms": round(lc_cpu, 3),
        "hostd_cpu_ms": round(hd_cpu, 3),
        "cpu_ratio": round(hd_cpu / lc_cpu, 2),
    }


def shared_labels(repeat: int) -> dict[str, object]:
    """compose + to_wire with every frame under one citation label, against unique labels.

    800 frames of about 30 tokens from one provider, budget 13,300: 260 are included,
    the rest are over budget (each priced with its label as made unique when the walk
    reached it).
    Shared and unique take turns call by call (ABBA), so both see the same load.
    """
    rng = random.Random(5)
    base = []
    for i in range(800):
        content = " ".join(WORDS[(i + k) % len(WORDS)] for k in range(18)) + f" #{i}"
        base.append(
            {
                "id": f"f{i}",
                "kind": "snippet",
                "title": f"t{i}",
                "content": content,
                "score": rng.random(),
                "token_cost": canonical_token_cost(content),
            }
        )
    # Unique labels are the very labels the shared run hands out (rank order), so both
    # prompts hold the same bytes and only the label bookkeeping differs.
    rank = {b["id"]: r for r, b in enumerate(sorted(base, key=lambda b: -b["score"]))}

    def label(b: dict[str, object]) -> str:
        r = rank[str(b["id"])]
        return "shared" if r == 0 else f"shared #{r + 1}"

    unique = [
        (PROVIDERS[0], ContextFrame.model_validate({**b, "citation_label": label(b)})) for b in base
    ]
    shared = [
        (PROVIDERS[0], ContextFrame.model_validate({**b, "citation_label": "shared"})) for b in base
    ]
    budget = 13_300
    included = len(compose_for_prompt(unique, budget, strategy="score").citations)
    same = compose_for_prompt(shared, budget, strategy="score").prompt
    assert same == compose_for_prompt(unique, budget, strategy="score").prompt
    times: dict[str, list[float]] = {"shared": [], "unique": []}
    for r in range(repeat):
        order = ("shared", "unique") if r % 2 == 0 else ("unique", "shared")
        for name in order:
            frames = shared if name == "shared" else unique
            gc.collect()
            c0 = time.process_time()
            compose_for_prompt(frames, budget, strategy="score").to_wire()
            times[name].append((time.process_time() - c0) * 1000)
    med = {k: statistics.median(v) for k, v in times.items()}
    return {
        "frames": len(base),
        "included": included,
        "budget": budget,
        "repeat": repeat,
        "shared_cpu_ms": round(med["shared"], 3),
        "unique_cpu_ms": round(med["unique"], 3),
        "ratio": round(med["shared"] / med["unique"], 3),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=15)
    ap.add_argument("--sizes", default="1000,10000,100000")
    ap.add_argument(
        "--wire", action="store_true", help="decode the frames from JSON, as the daemon does"
    )
    ap.add_argument("--lists-repeat", type=int, default=200)
    ap.add_argument("--labels-repeat", type=int, default=60)
    ap.add_argument("--checkout", help="measure the hostd of another checkout")
    ap.add_argument(
        "--only",
        choices=("policies", "langchain", "labels"),
        action="append",
        help="run only these sections (repeatable); all by default",
    )
    args = ap.parse_args()
    only = set(args.only or ("policies", "langchain", "labels"))
    sizes = [int(s) for s in args.sizes.split(",") if s] if "policies" in only else []
    policies = {
        "score": ScoreDescending(),
        "round_robin": RoundRobinByRank(),
        "quota": PerProviderQuota(2),
        "rrf": ReciprocalRankFusion(),
        "margin": MarginFusion(),
    }
    results: dict[str, dict[str, dict[str, float]]] = {}
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else None
    for n in sizes:
        frames = synthetic(n)
        if args.wire:
            encoded = [(pid, f.model_dump_json(exclude_none=True)) for pid, f in frames]
            del frames
            frames = [(pid, ContextFrame.model_validate_json(raw)) for pid, raw in encoded]
            del encoded
        per: dict[str, dict[str, float]] = {}
        # The floor: one read of the fields every composition needs from every
        # frame, and nothing else. Its growth is what the machine's caches make
        # of a 10x larger working set.
        wall_f, cpu_f = medians(lambda f=frames: read_columns([fr for _, fr in f]), args.repeat)
        per["floor_read_fields"] = {"compose_ms": wall_f, "compose_cpu_ms": cpu_f}
        for name, strategy in policies.items():
            repeat = max(3, args.repeat // 3) if n >= 100_000 else args.repeat
            wall, cpu = medians(
                lambda s=strategy, f=frames: compose_for_prompt(f, BUDGET, strategy=s), repeat
            )
            wall_a, cpu_a = medians(
                lambda s=strategy, f=frames: compose_for_prompt(
                    f, BUDGET, strategy=s
                ).audit.entry_dicts(),
                repeat,
            )
            per[name] = {
                "compose_ms": wall,
                "compose_cpu_ms": cpu,
                "compose_with_audit_ms": wall_a,
                "compose_with_audit_cpu_ms": cpu_a,
            }
        results[str(n)] = per
    report: dict[str, object] = {
        "python": platform.python_version(),
        "machine": platform.machine(),
        "budget": BUDGET,
        "providers": len(PROVIDERS),
        "cpus": os.cpu_count(),
        "load_average_1m_at_start": load,
        "frames_from": "json" if args.wire else "python",
        "median_ms": results,
    }
    if "10000" in results and "100000" in results:
        big, mid = results["100000"], results["10000"]
        report["growth_100k_over_10k"] = {
            name: {
                metric: round(big[name][metric] / mid[name][metric], 2)
                for metric in ("compose_ms", "compose_cpu_ms", "compose_with_audit_ms")
                if metric in big[name]
            }
            for name in big
        }
    report["checkout"] = str(_checkout())
    if "langchain" in only:
        report["vs_langchain"] = versus_langchain(args.lists_repeat)
    if "labels" in only:
        report["shared_labels"] = shared_labels(args.labels_repeat)
    print(orjson.dumps(report, option=orjson.OPT_INDENT_2).decode())


if __name__ == "__main__":
    main()
