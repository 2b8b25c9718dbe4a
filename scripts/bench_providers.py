"""Benchmark the bundled providers on this repository: index build time and query p50.

- ``files``: build the BM25 index over the checkout (cold: a fresh ``FileIndex`` and
  an empty scratch cache), then start again from the cache that build wrote (warm:
  what a restart does; ``warm_reads`` files read, 0 when nothing changed), then answer
  a fixed set of questions (``answer``: search + pack + frames).
- ``memory``: import ``--memory-entries`` generated entries into a fresh database
  in one transaction, then answer the same questions (FTS5 + as_of window + pack).
- ``semantic`` (when the extra is installed): build with an empty embedding cache
  (every chunk embedded) unless ``--skip-semantic-cold``, then rebuild from the
  warm cache, then answer the questions (query embedding + cosine + pack).

Prints one JSON object. Figures depend on the machine's load; they are not tests.
``--only memory`` (or ``files``, ``semantic``) runs one of them. ``--base DIR`` runs
the memory benchmark of another checkout beside this one, ``--rounds`` times,
interleaved, each in a fresh interpreter of its own checkout, and gives the medians
of the query p50s and their ratio (this / base). ``--base DIR --only files`` does the
same for the ``files`` provider's start from its cache (``FileIndex.build``, what
``warm`` runs): each checkout builds its own cache of ``--root`` once (untimed: each
writes its own layout), then the starts alternate, which goes first swapping each
round; it gives each start's seconds and the RSS it left and peaked at.

    python scripts/bench_providers.py [--repeat N] [--root DIR] [--skip-semantic-cold]
    python scripts/bench_providers.py --base DIR [--rounds 5] [--memory-entries N]
    python scripts/bench_providers.py --base DIR --only files --root TREE [--rounds 3]
"""

from __future__ import annotations

import argparse
import os
import platform
import random
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import orjson

# ``--base``: the other checkout's code runs this file's benchmark (HOSTD_BENCH_CHECKOUT).
ROOT = Path(os.environ.get("HOSTD_BENCH_CHECKOUT") or Path(__file__).resolve().parent.parent)
sys.path.insert(0, str(ROOT))

from hostd.protocol import ContextQuery  # noqa: E402 - after the path set-up above
from providers import CorpusOptions  # noqa: E402
from providers.files import FileIndex  # noqa: E402
from providers.memory import MemoryStore, NewEntry  # noqa: E402
from providers.semantic import semantic_unavailable  # noqa: E402

QUESTIONS = [
    "How does hostd check that a file frame's digest still matches the bytes on disk?",
    "retry loop gives up after attempts",
    "budget split across providers",
    "consent receipt for egress scopes",
    "reciprocal rank fusion strategy",
    "what happens when a provider crashes mid query",
    "line range addressing F17",
    "shutdown notification and stdin EOF",
]


def _query(text: str) -> ContextQuery:
    return ContextQuery(goal=text, max_frames=8, max_tokens=2000)


def _p50_ms(fn: Any, repeat: int) -> float:
    times = []
    for _ in range(repeat):
        for q in QUESTIONS:
            t = time.perf_counter()
            fn(_query(q))
            times.append((time.perf_counter() - t) * 1000)
    return round(statistics.median(times), 3)


def bench_files(root: Path, repeat: int) -> dict[str, Any]:
    with tempfile.TemporaryDirectory() as tmp:
        cache = Path(tmp) / "corpus.json"
        t = time.perf_counter()
        ix = FileIndex(CorpusOptions(root=root), refresh_interval_s=3600, cache_path=cache)
        ix.build()
        build = time.perf_counter() - t
        t = time.perf_counter()
        warm = FileIndex(CorpusOptions(root=root), refresh_interval_s=3600, cache_path=cache)
        warm.build()
        warm_build = time.perf_counter() - t
    return {
        "files": ix.corpus.file_count,
        "chunks": ix.chunk_count,
        "build_s": round(build, 3),
        "warm_build_s": round(warm_build, 3),
        "warm_ratio": round(build / warm_build, 1) if warm_build else None,
        "warm_reads": warm.corpus.reads,
        "query_p50_ms": _p50_ms(warm.answer, repeat),
    }


def _rss_mb() -> float:
    """This process's resident set now (Linux), in MB; 0 where ``/proc`` has none."""
    try:
        with open("/proc/self/status", encoding="ascii") as status:
            kb = next(int(line.split()[1]) for line in status if line.startswith("VmRSS:"))
    except (OSError, StopIteration):
        return 0.0
    return round(kb / 1024, 1)


def bench_files_start(root: Path, cache: Path) -> dict[str, Any]:
    """One ``FileIndex.build`` of ``root`` with its cache at ``cache`` (a cold build when
    there is none yet): its seconds, what it read, and the RSS it left and peaked at."""
    t = time.perf_counter()
    ix = FileIndex(CorpusOptions(root=root), refresh_interval_s=3600, cache_path=cache)
    ix.build()
    seconds = time.perf_counter() - t
    return {
        "seconds": round(seconds, 3),
        "from_cache": ix.loaded_from_cache,
        "reads": ix.corpus.reads,
        "chunks": ix.chunk_count,
        "rss_mb": _rss_mb(),
        "peak_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1),
    }


def bench_memory(entries: int, repeat: int, vocabulary: int = 0) -> dict[str, Any]:
    """Entries of 40 words. ``vocabulary`` 0: the questions' own words, so every word
    asked is in most entries (BM25's IDF at its lowest, the worst case for a store);
    else those words among ``vocabulary`` others, drawn at random (seeded), so a word
    asked is in a few entries, as in a store of varied notes."""
    words = " ".join(QUESTIONS).split()
    pool = words + [f"w{i}" for i in range(vocabulary)]
    draw = random.Random(7)

    def text(i: int) -> str:
        if not vocabulary:
            return " ".join(words[(i * 7 + k) % len(words)] for k in range(40))
        return " ".join(draw.choice(pool) for _ in range(40))

    with tempfile.TemporaryDirectory() as tmp:
        with MemoryStore(Path(tmp) / "memory.db") as store:
            batch = [
                NewEntry(("fact", "memory", "episode")[i % 3], f"entry {i}", text(i))
                for i in range(entries)
            ]
            t = time.perf_counter()
            store.add_many(batch)
            build = time.perf_counter() - t
            return {
                "entries": entries,
                "vocabulary": vocabulary,
                "build_s": round(build, 3),
                "query_p50_ms": _p50_ms(store.answer, repeat),
            }


def bench_semantic(root: Path, repeat: int, cold: bool) -> dict[str, Any]:
    from providers.semantic import DIM, FINGERPRINT, EmbeddingCache, MiniLMEmbedder, SemanticIndex

    out: dict[str, Any] = {}
    embedder = MiniLMEmbedder()
    t = time.perf_counter()
    embedder.encode(["load the model"])
    out["model_load_s"] = round(time.perf_counter() - t, 3)
    opts = CorpusOptions(root=root)
    with tempfile.TemporaryDirectory() as tmp:
        cache_path = Path(tmp) / "embeddings.db"
        if cold:
            t = time.perf_counter()
            ix = SemanticIndex(opts, embedder, EmbeddingCache(cache_path, FINGERPRINT, DIM))
            ix.refresh(force=True)
            out["cold_build_s"] = round(time.perf_counter() - t, 3)
            out["embedded"] = ix.embedded_last
        else:
            # Warm the scratch cache once, outside the timing.
            SemanticIndex(opts, embedder, EmbeddingCache(cache_path, FINGERPRINT, DIM)).refresh()
        t = time.perf_counter()
        ix = SemanticIndex(
            opts, embedder, EmbeddingCache(cache_path, FINGERPRINT, DIM), refresh_interval_s=3600
        )
        ix.refresh(force=True)
        out["warm_build_s"] = round(time.perf_counter() - t, 3)
        out["warm_embedded"] = ix.embedded_last  # chunks that changed since the cold build
        out["chunks"] = ix.chunk_count
        out["query_p50_ms"] = _p50_ms(ix.answer, repeat)
    return out


_RUN_IN = """
import importlib.util, json, sys
from pathlib import Path
spec = importlib.util.spec_from_file_location("bench", sys.argv[1])
bench = importlib.util.module_from_spec(spec)
spec.loader.exec_module(bench)
if sys.argv[2] == "files":
    print(json.dumps(bench.bench_files_start(Path(sys.argv[3]), Path(sys.argv[4]))))
else:
    print(json.dumps(bench.bench_memory(*map(int, sys.argv[3:]))))
"""


def _memory_in(checkout: Path, entries: int, repeat: int, vocabulary: int) -> dict[str, Any]:
    """This file's ``bench_memory`` over ``checkout``'s code (its providers, its store),
    in an interpreter of its own."""
    return _run_in(checkout, "memory", str(entries), str(repeat), str(vocabulary))


def _run_in(checkout: Path, *args: str) -> dict[str, Any]:
    """``_RUN_IN`` with ``args`` over ``checkout``'s code, in an interpreter of its own."""
    done = subprocess.run(
        [sys.executable, "-c", _RUN_IN, __file__, *args],
        cwd=checkout,
        env={**os.environ, "PYTHONPATH": str(checkout), "HOSTD_BENCH_CHECKOUT": str(checkout)},
        capture_output=True,
        text=True,
        check=True,
        timeout=600,
    )
    result: dict[str, Any] = orjson.loads(done.stdout.splitlines()[-1])
    return result


def memory_against(
    base: Path, entries: int, repeat: int, rounds: int, vocabulary: int = 0
) -> dict[str, Any]:
    """The memory query p50 of this checkout and ``base``, rounds interleaved."""
    p50s: dict[str, list[float]] = {"this": [], "base": []}
    for _ in range(rounds):
        for name, checkout in (("base", base), ("this", ROOT)):
            p50s[name].append(_memory_in(checkout, entries, repeat, vocabulary)["query_p50_ms"])
    medians = {name: statistics.median(values) for name, values in p50s.items()}
    return {
        "entries": entries,
        "vocabulary": vocabulary,
        "rounds": rounds,
        "query_p50_ms": p50s,
        "median_ms": medians,
        "ratio": round(medians["this"] / medians["base"], 2),
    }


def files_start_against(base: Path, root: Path, rounds: int) -> dict[str, Any]:
    """The ``files`` start from its cache of this checkout and ``base``, ``rounds`` pairs,
    alternating which goes first; each side's cache built once beforehand (its ``cold``)."""
    sides = {"base": base, "this": ROOT}
    runs: dict[str, list[dict[str, Any]]] = {name: [] for name in sides}
    with tempfile.TemporaryDirectory() as tmp:
        caches = {name: Path(tmp) / name / "corpus.json" for name in sides}
        cold = {name: _run_in(sides[name], "files", str(root), str(caches[name])) for name in sides}
        for n in range(rounds):
            for name in ("base", "this") if n % 2 == 0 else ("this", "base"):
                runs[name].append(_run_in(sides[name], "files", str(root), str(caches[name])))
    medians = {name: statistics.median(r["seconds"] for r in done) for name, done in runs.items()}
    return {
        "root": str(root),
        "rounds": rounds,
        "cold": cold,
        "starts": runs,
        "median_s": medians,
        "ratio": round(medians["this"] / medians["base"], 2) if medians["base"] else None,
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--root", type=Path, default=ROOT)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--memory-entries", type=int, default=2000)
    parser.add_argument(
        "--memory-vocabulary",
        type=int,
        default=0,
        help="other words the entries draw from (0: the questions' words alone, the worst case)",
    )
    parser.add_argument("--skip-semantic-cold", action="store_true")
    parser.add_argument("--only", choices=("files", "memory", "semantic"))
    parser.add_argument(
        "--base",
        type=Path,
        help="another checkout: its memory (or, with --only files, its start from the cache) "
        "beside this",
    )
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    result: dict[str, Any] = {
        "machine": {"python": platform.python_version(), "cpus": os.cpu_count()},
        "root": str(args.root),
    }
    if args.base is not None and args.only == "files":
        result["files"] = files_start_against(args.base.resolve(), args.root, args.rounds)
        print(orjson.dumps(result, option=orjson.OPT_INDENT_2).decode())
        return 0
    if args.base is not None:
        result["memory"] = memory_against(
            args.base.resolve(),
            args.memory_entries,
            args.repeat,
            args.rounds,
            args.memory_vocabulary,
        )
        print(orjson.dumps(result, option=orjson.OPT_INDENT_2).decode())
        return 0
    if args.only in (None, "files"):
        result["files"] = bench_files(args.root, args.repeat)
    if args.only in (None, "memory"):
        result["memory"] = bench_memory(args.memory_entries, args.repeat, args.memory_vocabulary)
    if args.only in (None, "semantic"):
        reason = semantic_unavailable()
        if reason is None:
            cold = not args.skip_semantic_cold
            result["semantic"] = bench_semantic(args.root, args.repeat, cold)
        else:
            result["semantic"] = {"skipped": reason}
    print(orjson.dumps(result, option=orjson.OPT_INDENT_2).decode())
    return 0


if __name__ == "__main__":
    sys.exit(main())
