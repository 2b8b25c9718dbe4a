"""``RerankProvider``: the judge behind hostd's ``[reranker]`` protocol, and its CLI.

The model is loaded before the process serves, so an answered handshake means
a reranker that can answer (hostd waits for it at most ``reranker.start_timeout_ms``,
and falls back meanwhile with reason ``starting``, off the request's path). Were
the handshake answered first, a ``rerank`` during the load would either be
refused or held past hostd's deadline, and three missed deadlines in a row read
as a hung reranker, restarted, and loading again. A model that cannot be loaded
exits with status 3 (hostd restarts it with backoff, then parks it). Scoring runs
on a thread, one call at a time, so the process keeps reading its input.
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import sys
import threading
from collections.abc import Sequence
from typing import Any

import anyio
import anyio.to_thread
from pydantic import BaseModel, ConfigDict, Field

from hostd.protocol import ProviderInfo
from hostd.provider import Provider, run_stdio
from hostd.rpc import Method

from ._judge import BiEncoderJudge, CrossEncoderJudge, Judge, order_by_scores

__all__ = ["RerankProvider", "main"]

VERSION = "0.1.0"


class Candidate(BaseModel):
    model_config = ConfigDict(extra="ignore")

    key: str
    kind: str = ""
    title: str = ""
    content: str = ""


class RerankParams(BaseModel):
    model_config = ConfigDict(extra="ignore")

    query: str
    candidates: list[Candidate] = Field(default_factory=list)


async def _rerank(server: Any, params: RerankParams) -> dict[str, Any]:
    provider: RerankProvider = server.provider
    return await provider.rerank(params)


class RerankProvider(Provider):
    """Orders candidates by ``judge``'s score of (query, title + content), ties by key."""

    methods = {"rerank": Method(RerankParams, _rerank)}

    def __init__(self, judge: Judge) -> None:
        self.info = ProviderInfo(name="hostd-rerank", version=VERSION)
        self.judge = judge
        self._lock = threading.Lock()

    async def rerank(self, params: RerankParams) -> dict[str, Any]:
        judge = self.judge
        keys = [c.key for c in params.candidates]
        texts = [f"{c.title}\n{c.content}" if c.title else c.content for c in params.candidates]

        def score() -> list[float]:
            with self._lock:  # one model call at a time: it already uses every core
                return judge.scores(params.query, texts)

        scores = await anyio.to_thread.run_sync(score)
        return {"order": order_by_scores(keys, scores), "model": judge.model}


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m providers.rerank",
        description="hostd's reranker: orders a composition's candidates by a cross-encoder's "
        "score of (query, candidate), served on stdio (docs/eval.md). Needs the 'semantic' "
        "extra.",
    )
    parser.add_argument(
        "--model",
        metavar="PATH_OR_NAME",
        help="a cross-encoder: a local directory, or a hub name where the hub is reachable "
        "(with HF_HUB_OFFLINE=0); with --bi-encoder default the packaged all-MiniLM-L6-v2",
    )
    parser.add_argument(
        "--bi-encoder",
        action="store_true",
        help="score by the cosine of sentence embeddings instead (a stand-in judge)",
    )
    parser.add_argument(
        "--max-length",
        type=int,
        default=512,
        metavar="N",
        help="word pieces of (query, candidate) the model reads at most (default: %(default)s)",
    )
    parser.add_argument(
        "--batch-size", type=int, default=32, metavar="N", help="pairs per model call"
    )
    args = parser.parse_args(argv)
    if args.model is None and not args.bi_encoder:
        parser.error("--model is required (a cross-encoder directory or name)")
    if args.max_length < 8 or args.batch_size < 1:
        parser.error("--max-length must be at least 8 and --batch-size at least 1")
    # Looked up first: a missing extra is one line, not a traceback from deep in the load.
    if importlib.util.find_spec("sentence_transformers") is None:
        print(
            "providers.rerank: sentence-transformers is not installed (the semantic extra)",
            file=sys.stderr,
        )
        return 3

    try:
        if args.bi_encoder:
            judge: Judge = BiEncoderJudge(
                args.model, max_length=args.max_length, batch_size=args.batch_size
            )
        else:
            judge = CrossEncoderJudge(
                args.model, max_length=args.max_length, batch_size=args.batch_size
            )
    except Exception as exc:  # a missing directory, a file that is no model, …
        print(
            f"providers.rerank: cannot load {args.model or 'the model'}: {exc!r}", file=sys.stderr
        )
        return 3
    print(f"providers.rerank: model {judge.model} loaded", file=sys.stderr)
    run_stdio(RerankProvider(judge))
    # Interpreter teardown with torch loaded takes seconds; nothing here is durable.
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)
