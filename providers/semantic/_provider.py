"""``providers.semantic`` on the provider runtime: background index build, query, verify, CLI."""

from __future__ import annotations

import argparse
import os
import sys
import time
from collections.abc import Sequence
from pathlib import Path

import anyio.to_thread

from hostd.protocol import (
    Capabilities,
    CgpErrorCode,
    ContextQuery,
    ContextQueryResult,
    DataFlow,
    FrameIdentity,
    FrameVerdict,
    ProviderInfo,
    QueryCapability,
)
from hostd.provider import Progress, Provider, ProviderRefusal, run_stdio

from .._cli import byte_size, corpus_arguments, corpus_options
from .._corpus import (
    chunks_figure,
    files_figure,
    largest_parts,
    not_indexed,
    report_build,
    verify_chunk,
)
from .._corpus_cache import DEFAULT_MAX_BYTES as CORPUS_MAX_BYTES
from .._corpus_cache import corpus_key, load_corpus, save_corpus
from .._prior import DEFAULT_TEST_PRIOR, parse_test_prior
from ._embed import (
    DEFAULT_MAX_BYTES,
    FINGERPRINT,
    EmbeddingCache,
    MiniLMEmbedder,
    default_cache_path,
    semantic_unavailable,
)
from ._index import EmbeddingMismatch, SemanticIndex

__all__ = ["SemanticProvider", "main"]

VERSION = "0.1.0"


class SemanticProvider(Provider):
    """Cosine search over sentence embeddings; the index is built after the handshake.

    The handshake is answered at once; until the first build has a chunk embedded a
    query is answered ``unavailable`` saying the provider warms (``hostd.provider``),
    then from the chunks embedded so far (code first, ``embed_rank``): the host, told
    of each embedded batch as progress, reads such an answer as partial and says how
    much it searched. A large tree takes hours to embed on a small machine; an answer
    from its code meanwhile is worth more than none.
    """

    # An embedding and a search are CPU work (the model uses every core already): a burst
    # of queries run together would all finish late, together; one at a time, in the
    # order they came, the first asked are answered in time.
    queries_at_once = 1

    def __init__(
        self,
        index: SemanticIndex,
        fingerprint: str = FINGERPRINT,
        corpus_cache: Path | None = None,
        corpus_cache_max_bytes: int = CORPUS_MAX_BYTES,
    ) -> None:
        self.index = index
        #: Where the chunks persist (``_corpus_cache``): a restart re-reads only changes.
        self.corpus_cache = corpus_cache
        #: The most the corpus caches beside it hold (``save_corpus``).
        self.corpus_cache_max_bytes = corpus_cache_max_bytes
        self.info = ProviderInfo(
            name="hostd-semantic", version=VERSION, data_flow=DataFlow(reads=True)
        )
        self.capabilities = Capabilities(
            query=QueryCapability(kinds=["snippet", "doc"]),
            verify=True,
            embeddings_fingerprint=fingerprint,  # E1
        )

    def warm(self, progress: Progress) -> str:
        started = time.perf_counter()
        progress(0, None, phase="load model")
        # Load the model first, even when every chunk vector is cached, so the first
        # query does not pay for it.
        self.index.embedder.encode(["warm-up"])
        corpus, cache = self.index.corpus, self.corpus_cache
        if cache is not None:
            load_corpus(corpus, cache)

        def save_chunks() -> None:
            # Before embedding, which takes longest: a build stopped midway (a one-shot
            # command ends, a kill) keeps its chunks, as the vector cache keeps every
            # embedded batch, so the next start resumes where this one stopped.
            # ``modified``: something was read, or a cached file the rules now refuse (a
            # ``.env`` from an older version) was dropped and must leave the cache too.
            if cache is not None and corpus.modified:
                try:
                    save_corpus(corpus, cache, max_bytes=self.corpus_cache_max_bytes)
                except OSError:  # a cache that cannot be written costs the next start only
                    pass

        self.index.refresh(
            force=True,
            progress=progress,
            chunked=save_chunks,
            searchable=progress.answer_meanwhile,
            reading=lambda done, total: progress(done, total, phase="read files"),
        )
        head = (
            f"{chunks_figure(self.index.chunk_count)} from {files_figure(corpus)} "
            f"({self.index.embedded_last} embedded) in {time.perf_counter() - started:.1f}s"
            f"{largest_parts(corpus)}"
        )
        return report_build("providers.semantic", head, corpus)

    async def query(self, query: ContextQuery) -> ContextQueryResult:
        try:
            packed = await anyio.to_thread.run_sync(self.index.answer, query)
        except EmbeddingMismatch as exc:
            raise ProviderRefusal(str(exc), CgpErrorCode.BAD_REQUEST) from exc
        return packed.to_result()

    async def verify(self, frames: list[FrameIdentity]) -> list[FrameVerdict]:
        root = self.index.root
        return await anyio.to_thread.run_sync(lambda: [verify_chunk(root, f) for f in frames])


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m providers.semantic",
        description="CGP provider: sentence-embedding search (all-MiniLM-L6-v2, offline) over "
        "a directory tree, served on stdio (JSON-RPC binding). Needs the 'semantic' extra: "
        "pip install '/path/to/hostd[semantic]' (a checkout or a wheel).",
    )
    corpus_arguments(parser)
    parser.add_argument(
        "--cache",
        type=Path,
        default=default_cache_path(),
        help="embedding cache database (default: %(default)s)",
    )
    parser.add_argument(
        "--cache-max-bytes",
        type=byte_size,
        metavar="SIZE",
        help="bound the embedding cache to SIZE (512M, 2G), and the chunk caches beside "
        "it to SIZE together: past it, the least recently used go, never the vectors or "
        "chunks a running provider uses; 0: no bound (default: 2G for the embeddings, "
        "1G for the chunks)",
    )
    parser.add_argument(
        "--min-score",
        type=float,
        default=0.15,
        help="leave out chunks whose cosine is below this (default: %(default)s)",
    )
    parser.add_argument(
        "--test-prior",
        type=parse_test_prior,
        default=DEFAULT_TEST_PRIOR,
        metavar="F",
        help="multiply the cosine of a test file's chunks (tests/, test_*.py, *_test.go, "
        "*.test.ts, ...) by F (divide it, when negative), above 0 and at most 1, unless the "
        "query names tests (test, testing, spec, fixture, ...); 1 ranks tests as any file; "
        "--min-score reads the cosine before it (default: %(default)s; docs/providers.md)",
    )
    parser.add_argument(
        "--refresh-interval",
        type=float,
        default=1.0,
        metavar="SECONDS",
        help="re-check file mtimes at most this often (default: %(default)s)",
    )
    parser.add_argument(
        "--model",
        metavar="PATH_OR_NAME",
        help="a sentence-transformers model directory (or a hub name where the hub is "
        "reachable, with HF_HUB_OFFLINE=0) instead of the packaged all-MiniLM-L6-v2",
    )
    parser.add_argument(
        "--warm",
        action="store_true",
        help="build the index (filling the cache), print its size and exit",
    )
    args = parser.parse_args(argv)
    if not args.root.is_dir():
        parser.error(f"--root {args.root} is not a directory")
    reason = semantic_unavailable()
    if reason is not None:
        print(f"providers.semantic: {reason}", file=sys.stderr)
        return 3
    embedder = MiniLMEmbedder(model=args.model)  # another model is loaded here, for its size
    bound = args.cache_max_bytes
    cache = EmbeddingCache(
        args.cache,
        embedder.fingerprint,
        embedder.dim,
        max_bytes=DEFAULT_MAX_BYTES if bound is None else bound,
    )
    index = SemanticIndex(
        corpus_options(args),
        embedder,
        cache,
        min_score=args.min_score,
        refresh_interval_s=args.refresh_interval,
        test_prior=args.test_prior,
    )
    if args.warm:
        started = time.perf_counter()

        def say(done: int, total: int | None, *, phase: str, message: str | None = None) -> None:
            if message:  # how many chunks it embeds (and what shortens a long build)
                print(f"providers.semantic: {message}", file=sys.stderr, flush=True)

        index.refresh(force=True, progress=say)
        print(
            f"providers.semantic: {chunks_figure(index.chunk_count)}, "
            f"{index.embedded_last} embedded, "
            f"in {time.perf_counter() - started:.1f}s (cache {args.cache})"
            f"{largest_parts(index.corpus)}{not_indexed(index.corpus)}",
            file=sys.stderr,
        )
        return 0
    corpus_cache = args.cache.parent / f"corpus-{corpus_key(index.corpus)}.json"
    chunks_bound = CORPUS_MAX_BYTES if bound is None else bound
    run_stdio(SemanticProvider(index, embedder.fingerprint, corpus_cache, chunks_bound))
    # Interpreter teardown with torch loaded takes seconds; a host waiting on our exit
    # after context/shutdown should not. Everything durable (the cache) is committed.
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)
