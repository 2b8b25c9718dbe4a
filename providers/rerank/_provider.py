"""``RerankProvider``: the judge behind hostd's ``[reranker]`` protocol, and its CLI.

The handshake is answered at once (hostd's start deadline is the handshake's);
the model loads on a thread meanwhile. A ``rerank`` that arrives before it is
loaded is answered at once with ``unavailable`` (hostd falls back for that
composition) rather than held past hostd's deadline, which would count as a
missed deadline and, three in a row, as a hung reranker. Scoring runs on a
thread, one batch of calls at a time, so the process keeps reading its input.
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import sys
import threading
from collections.abc import Callable, Sequence
from typing import Any

import anyio
import anyio.to_thread
from pydantic import BaseModel, ConfigDict, Field

from hostd.protocol import CgpErrorCode, ProviderInfo
from hostd.provider import Provider, ProviderRefusal, run_stdio
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

    def __init__(self, load: Callable[[], Judge]) -> None:
        self.info = ProviderInfo(name="hostd-rerank", version=VERSION)
        self._load = load
        self._judge: Judge | None = None
        self._failure: BaseException | None = None
        self._ready = threading.Event()
        self._lock = threading.Lock()

    def start(self) -> None:
        threading.Thread(target=self._build, name="rerank-model", daemon=True).start()

    def _build(self) -> None:
        try:
            self._judge = self._load()
            print(f"providers.rerank: model {self._judge.model} loaded", file=sys.stderr)
        except BaseException as exc:  # answered on every rerank instead of killing the process
            self._failure = exc
            print(f"providers.rerank: model failed to load: {exc!r}", file=sys.stderr)
        finally:
            self._ready.set()

    def wait_ready(self) -> None:
        self._ready.wait()

    async def rerank(self, params: RerankParams) -> dict[str, Any]:
        if not self._ready.is_set():
            raise ProviderRefusal("the model is still loading", CgpErrorCode.UNAVAILABLE)
        judge = self._judge
        if judge is None:
            raise ProviderRefusal(
                f"model failed to load: {self._failure!r}", CgpErrorCode.UNAVAILABLE
            )
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
    # Looked up, not imported: the import (torch) takes seconds, and the handshake,
    # hostd's start deadline, is answered before the model loads.
    if importlib.util.find_spec("sentence_transformers") is None:
        print(
            "providers.rerank: sentence-transformers is not installed (the semantic extra)",
            file=sys.stderr,
        )
        return 3

    def load() -> Judge:
        if args.bi_encoder:
            return BiEncoderJudge(
                args.model, max_length=args.max_length, batch_size=args.batch_size
            )
        return CrossEncoderJudge(args.model, max_length=args.max_length, batch_size=args.batch_size)

    provider = RerankProvider(load)
    provider.start()
    run_stdio(provider)
    # Interpreter teardown with torch loaded takes seconds; nothing here is durable.
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)
