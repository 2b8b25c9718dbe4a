#!/usr/bin/env python3
"""The rerank stage's added latency per composition, at 25, 50 and 100 candidates.

The stage is what a ``rerank`` composition does that a ``round_robin`` one does not:
pick the candidates and key them (``rerank_request``), one ``rerank`` call to the
reranker process over its pipe (``hostd.engine.Reranker``, the daemon's own code),
and reading the verdict. It is timed here on its own, per composition, with the
reranker running as the daemon runs it; the composition that follows costs the
same under either policy, which the script checks and prints (``compose_ms``).

Candidates are 128-word-piece-sized slices of this repository's docs (about 500
characters, the size the bundled providers serve), split between two providers;
the queries rotate through ``evals/repo.jsonl``. Two rerankers, taking turns:

- ``pipe``: ``tests.fixtures.reranker reverse`` answers at once, so its figure is
  the stage's own machinery (keys, JSON both ways, the pipe);
- ``minilm``: ``providers.rerank --bi-encoder``, the packaged all-MiniLM-L6-v2 as a
  stand-in judge (a cross-encoder of the same size costs about the same per pair);
- ``http``: ``[reranker] url`` at ``tests.fixtures.rerank_server ok``, a Cohere-style
  rerank server on loopback that scores by a digest (``hostd.engine.HttpReranker``):
  the stage's machinery over HTTP (the pooled client, JSON both ways, a starlette
  server's own cost).

Prints JSON: per reranker and candidate count, the median and the p10/p90 and
min/max of the stage's milliseconds.

    python scripts/bench_rerank.py [--rounds 15] [--warmup 2] [--sizes 25,50,100]
                                   [--rerankers pipe,minilm,http]
"""

from __future__ import annotations

import argparse
import contextlib
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

from hostd.compose import compose_for_prompt  # noqa: E402 - after the sys.path insert
from hostd.config import RerankerSettings  # noqa: E402
from hostd.engine import PoolSettings  # noqa: E402
from hostd.logs import configure_logging  # noqa: E402
from hostd.pipeline import RerankPreparer  # noqa: E402
from hostd.provider import make_frame  # noqa: E402
from hostd.server._engine import make_reranker  # noqa: E402

RERANKERS = {
    "pipe": ["-m", "tests.fixtures.reranker", "reverse"],
    "minilm": ["-m", "providers.rerank", "--bi-encoder", "--max-length", "256"],
    "http": ["-m", "tests.fixtures.rerank_server", "ok"],
}


async def _serve(stack: contextlib.AsyncExitStack, words: list[str]) -> str:
    """The rerank server's URL, once its socket listens; stopped when ``stack`` closes."""
    process = await anyio.open_process(
        [sys.executable, *words], cwd=ROOT, stdin=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    stack.push_async_callback(process.wait)
    stack.callback(process.kill)
    assert process.stdout is not None
    line = b""
    while not line.endswith(b"\n"):  # "port N", once it listens
        line += await process.stdout.receive(1)
    return f"http://127.0.0.1:{int(line.split()[1])}"


def _frames(n: int) -> list[tuple[str, Any]]:
    text = " ".join(p.read_text(encoding="utf-8") for p in sorted((ROOT / "docs").glob("*.md")))
    words = text.split()
    out = []
    for i in range(n):
        piece = " ".join(words[i * 80 : i * 80 + 80])  # about 500 characters
        pid = ("files", "semantic")[i % 2]
        frame = make_frame(
            id=f"c{i}", kind="doc", title=f"docs chunk {i}", content=piece,
            citation_label=f"chunk {i}", score=round(1 - i / (n + 1), 4),
        )  # fmt: skip
        out.append((pid, frame))
    return out


def _questions() -> list[str]:
    lines = (ROOT / "evals" / "repo.jsonl").read_text(encoding="utf-8").splitlines()
    return [orjson.loads(line)["question"] for line in lines if line.strip()]


def _summary(ms: list[float]) -> dict[str, float]:
    qs = statistics.quantiles(ms, n=10, method="inclusive") if len(ms) > 1 else [ms[0]] * 9
    return {
        "median_ms": round(statistics.median(ms), 2),
        "p10_ms": round(qs[0], 2),
        "p90_ms": round(qs[-1], 2),
        "min_ms": round(min(ms), 2),
        "max_ms": round(max(ms), 2),
    }


async def _run(args: argparse.Namespace) -> dict[str, Any]:
    sizes = [int(s) for s in args.sizes.split(",")]
    names = [n for n in RERANKERS if n in args.rerankers.split(",")]
    questions = _questions()
    stage: dict[tuple[str, int], list[float]] = {}
    compose: dict[tuple[str, int], list[float]] = {}
    async with contextlib.AsyncExitStack() as stack:
        rerankers = {}
        settings = {}
        for name in names:
            words = RERANKERS[name]
            if name == "http":
                url = await _serve(stack, words)
                settings[name] = RerankerSettings(
                    url=url, timeout_ms=600_000, max_candidates=max(sizes)
                )
            else:
                settings[name] = RerankerSettings(
                    command=[sys.executable, *words], timeout_ms=600_000, cwd=ROOT,
                    env={"PYTHONPATH": str(ROOT)}, max_candidates=max(sizes),
                )  # fmt: skip
            # Started now; its handshake comes once its model has loaded.
            pool = PoolSettings(start="boot", start_timeout_s=300)
            reranker = make_reranker(settings[name], pool)
            assert reranker is not None
            rerankers[name] = await stack.enter_async_context(reranker)
        q = 0
        for r in range(args.warmup + args.rounds):
            for n in sizes:
                frames = _frames(n)
                for name in names:  # taking turns, round by round
                    q += 1
                    query = questions[q % len(questions)]
                    started = time.perf_counter()
                    verdict = await RerankPreparer(rerankers[name], settings[name]).judge(
                        query, frames
                    )
                    took = (time.perf_counter() - started) * 1000
                    assert verdict.reason is None and verdict.candidates == n, verdict
                    t0 = time.perf_counter()
                    ranked = compose_for_prompt(frames, 4000, strategy=verdict)
                    t1 = time.perf_counter()
                    compose_for_prompt(frames, 4000, strategy="round_robin")
                    t2 = time.perf_counter()
                    assert ranked.citations
                    if r >= args.warmup:
                        stage.setdefault((name, n), []).append(took)
                        compose.setdefault((name, n), []).append(((t1 - t0) - (t2 - t1)) * 1000)
    return {
        "rounds": args.rounds,
        "stage": {
            name: {
                str(n): {
                    **_summary(stage[name, n]),
                    "compose_ms_over_round_robin": round(statistics.median(compose[name, n]), 3),
                }
                for n in sizes
            }
            for name in names
        },
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--warmup", type=int, default=2)
    parser.add_argument("--sizes", default="25,50,100")
    parser.add_argument(
        "--rerankers", default="pipe,minilm,http", help="which of pipe, minilm, http"
    )
    args = parser.parse_args()
    configure_logging("warning")  # as a daemon runs: events on stderr, stdout is the JSON
    result = anyio.run(_run, args, backend="asyncio")
    sys.stdout.write(orjson.dumps(result, option=orjson.OPT_INDENT_2).decode() + "\n")


if __name__ == "__main__":
    main()
