#!/usr/bin/env python3
"""What serving a LangChain retriever as a provider costs on top of the retriever itself.

Builds an ``InMemoryVectorStore`` (langchain-core's deterministic fake embeddings) over
the paragraphs of this checkout's ``docs/*.md``, each with its ``source`` and
``start_index`` as a text splitter sets them, and asks it ``--queries`` questions two
ways: the retriever's own ``invoke``, and ``RetrieverProvider.query`` in process
(worker-thread hops, reading each source, finding the lines, building and packing
frames). Prints, as JSON, both p50 and p95 (ms), the ratio of the p50s, the mean CPU
time of each (the process's, all threads) and its ratio, and how many of the served
frames carry ``file`` provenance. Needs the ``langchain`` extra.

    python scripts/bench_integrations.py [--queries 200] [--k 8]
"""

from __future__ import annotations

import argparse
import statistics
import time
from pathlib import Path

import anyio
import orjson

ROOT = Path(__file__).resolve().parent.parent


def _ms(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return round(ordered[min(len(ordered) - 1, int(q * len(ordered)))] * 1000, 3)


def _retriever(k: int) -> tuple[object, int]:
    from langchain_core.documents import Document
    from langchain_core.embeddings import DeterministicFakeEmbedding
    from langchain_core.vectorstores import InMemoryVectorStore

    docs = []
    for path in sorted((ROOT / "docs").glob("*.md")):
        text = path.read_text(encoding="utf-8")
        at = 0
        for part in text.split("\n\n"):
            start = text.index(part, at)
            at = start + len(part)
            if part.strip():
                meta = {"source": str(path), "start_index": start}
                docs.append(Document(page_content=part.strip(), metadata=meta))
    store = InMemoryVectorStore(DeterministicFakeEmbedding(size=64))
    store.add_documents(docs)
    return store.as_retriever(search_kwargs={"k": k}), len(docs)


async def _run(queries: int, k: int) -> dict[str, object]:
    from hostd.integrations import RetrieverProvider
    from hostd.integrations.langchain import retriever_search
    from hostd.protocol import ContextFrame, ContextQuery

    retriever, documents = _retriever(k)
    provider = RetrieverProvider(lambda: retriever_search(retriever), name="bench")
    provider.load()
    goals = [f"how does hostd handle case {i} of the budget and the audit" for i in range(queries)]
    direct_s: list[float] = []
    served_s: list[float] = []
    direct_cpu: list[float] = []
    served_cpu: list[float] = []
    frames = with_provenance = 0
    warm = [f"warm-up question {i}" for i in range(10)]
    for i, goal in enumerate(warm + goals):
        c0, t0 = time.process_time(), time.perf_counter()
        retriever.invoke(goal)  # type: ignore[attr-defined]  # a LangChain retriever
        c1, t1 = time.process_time(), time.perf_counter()
        query = ContextQuery(goal=goal, max_frames=k, max_tokens=100_000)
        result = await provider.query(query)
        c2, t2 = time.process_time(), time.perf_counter()
        if i < len(warm):
            continue  # warm-up, outside the figures
        direct_s.append(t1 - t0)
        served_s.append(t2 - t1)
        direct_cpu.append(c1 - c0)
        served_cpu.append(c2 - c1)
        for raw in result.frames:
            frames += 1
            with_provenance += bool(ContextFrame.model_validate(raw).provenance)
    return {
        "documents": documents,
        "queries": len(direct_s),
        "k": k,
        "retriever_ms": {"p50": _ms(direct_s, 0.5), "p95": _ms(direct_s, 0.95)},
        "served_ms": {"p50": _ms(served_s, 0.5), "p95": _ms(served_s, 0.95)},
        "served_over_retriever_p50": round(
            statistics.median(served_s) / statistics.median(direct_s), 2
        ),
        # CPU time of the whole process (every thread): what the adapter costs the
        # machine, less moved by other load than the wall clock is.
        "retriever_cpu_ms_mean": round(statistics.fmean(direct_cpu) * 1000, 3),
        "served_cpu_ms_mean": round(statistics.fmean(served_cpu) * 1000, 3),
        "served_over_retriever_cpu": round(
            statistics.fmean(served_cpu) / statistics.fmean(direct_cpu), 2
        ),
        "frames": frames,
        "frames_with_file_provenance": with_provenance,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--k", type=int, default=8)
    args = parser.parse_args()
    out = anyio.run(_run, args.queries, args.k, backend="asyncio")
    print(orjson.dumps(out, option=orjson.OPT_INDENT_2).decode())


if __name__ == "__main__":
    main()
