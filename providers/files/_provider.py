"""``providers.files`` on the provider runtime: handshake data, query, verify, CLI."""

from __future__ import annotations

import argparse
import time
from collections.abc import Sequence
from pathlib import Path

import anyio.to_thread

from hostd.protocol import (
    Capabilities,
    ContextQuery,
    ContextQueryResult,
    DataFlow,
    FrameIdentity,
    FrameVerdict,
    ProviderInfo,
    QueryCapability,
)
from hostd.provider import Progress, Provider

from .._cli import (
    FILES_CHUNKS,
    byte_size,
    corpus_arguments,
    corpus_options,
    http_arguments,
    serve,
)
from .._corpus import chunks_figure, files_figure, largest_parts, report_build, verify_chunk
from .._corpus_cache import DEFAULT_MAX_BYTES, cache_dir, corpus_key
from .._prior import DEFAULT_TEST_PRIOR, parse_test_prior
from ._index import REFRESH_WAIT_S, WAIT_WHOLE_BELOW_CHUNKS, FileIndex

__all__ = ["FilesProvider", "main"]

VERSION = "0.1.0"


def _report_build(index: FileIndex, seconds: float) -> str:
    """One stderr line per build: what it holds (of a large tree, which parts hold most
    of it), and what the built-in rules left out, so a user can find out why a file is
    missing or what crowds the rest; the same words are the ready message (``hostd
    status`` shows it). The parts come before the left-out files, whose list may run
    past what a ready message keeps: there it ends at a whole reason, the files of the
    rest counted. Every figure is this build's (a rebuild's files read are its own)."""
    cached = " (from cache)" if index.loaded_from_cache else ""
    head = (
        f"{chunks_figure(index.chunk_count)} from {files_figure(index.corpus)} "
        f"under {index.root}{cached}, {index.corpus.last_read} read, in {seconds:.1f}s"
        f"{largest_parts(index.corpus)}"
    )
    return report_build("providers.files", head, index.corpus)


class FilesProvider(Provider):
    """Lexical search over one directory tree; ``snippet`` (code) and ``doc`` (prose) frames."""

    # A ranking is CPU work under the GIL: a burst of queries run together would all
    # finish late, together; one at a time, in the order they came, the first asked are
    # answered in time and the rest late, never none.
    queries_at_once = 1

    def __init__(self, index: FileIndex) -> None:
        self.index = index
        #: What the index holds: said after its build, and after each rebuild.
        self._said: str | None = None
        index.on_rebuilt = self._rebuilt
        self.info = ProviderInfo(
            name="hostd-files", version=VERSION, data_flow=DataFlow(reads=True)
        )
        self.capabilities = Capabilities(
            query=QueryCapability(kinds=["snippet", "doc"]), verify=True
        )

    def warm(self, progress: Progress) -> str:
        # After the handshake is answered (the runtime's worker thread): a cold build of a
        # large checkout takes seconds, a warm restart reads only what changed.
        started = time.perf_counter()
        self.index.build(progress)
        self._said = _report_build(self.index, time.perf_counter() - started)
        return self._said

    def ready_message(self) -> str | None:
        return self._said

    def _rebuilt(self) -> None:
        """A refresh rebuilt the index (a file changed, a new ``.hostdignore``): what it
        holds now is the ready message (and logged, as a build is), so ``hostd status``
        does not show what it held at its start. Called under the index's lock, so the
        figures are the ones this rebuild left."""
        self._said = _report_build(self.index, self.index.built_in_s)

    def queries_waiting(self, count: int) -> None:
        # A query waiting for a large tree's refresh answers from the index it has once
        # another waits its turn: one at a time, its wait would be theirs too.
        self.index.queries_waiting(count)

    async def query(self, query: ContextQuery) -> ContextQueryResult:
        # Ranking is CPU work; keep the stdio loop free for pipelined requests (one
        # query at a time, in the order they came: ``queries_at_once``).
        packed = await anyio.to_thread.run_sync(self.index.answer, query)
        return packed.to_result()

    async def verify(self, frames: list[FrameIdentity]) -> list[FrameVerdict]:
        root = self.index.root
        return await anyio.to_thread.run_sync(lambda: [verify_chunk(root, f) for f in frames])


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m providers.files",
        description="CGP provider: BM25 search over a directory tree, served on stdio "
        "(JSON-RPC binding), or over HTTPS with --http. Honours .gitignore and .hostdignore; "
        "skips binary and huge files (--max-file-bytes), vendor/, *.egg-info/, *.dist-info/, "
        "the root's PKG-INFO and *.svg in any case (a line such as !vendor/ in .hostdignore "
        "brings one back), virtualenvs (.venv, .tox, .nox), tagged cache directories and "
        "hostd's state directory, lockfiles (unless an --include glob names one) and, always, "
        "files that hold credentials (.env, private keys, .npmrc, *.tfstate, ...). Reads a "
        "Jupyter notebook as its cells' text, without outputs.",
    )
    corpus_arguments(parser, FILES_CHUNKS)
    http_arguments(parser)
    parser.add_argument(
        "--refresh-interval",
        type=float,
        default=1.0,
        metavar="SECONDS",
        help="re-check file mtimes at most this often (default: %(default)s)",
    )
    parser.add_argument(
        "--refresh-wait",
        type=float,
        default=None,
        metavar="SECONDS",
        help="how long a query waits for the rebuild of a changed tree before it answers "
        f"from the index it has and says so; the rebuild goes on (default: to its end "
        f"for an index under {WAIT_WHOLE_BELOW_CHUNKS:,} chunks, else {REFRESH_WAIT_S}, "
        "within the host's default timeout_ms of 2000); a bounded wait ends once another "
        "query waits its turn",
    )
    parser.add_argument(
        "--cache",
        type=Path,
        metavar="DIR",
        help="keep the chunks here so a restart re-reads only changed files "
        "(default: $XDG_CACHE_HOME/hostd/files)",
    )
    parser.add_argument("--no-cache", action="store_true", help="never read or write a cache")
    parser.add_argument(
        "--cache-max-bytes",
        type=byte_size,
        default=DEFAULT_MAX_BYTES,
        metavar="SIZE",
        help="bound the --cache folder's caches together to SIZE (512M, 2G): writing one "
        "removes the least recently used of the others, never one a running provider "
        "uses; 0: no bound (default: 1G)",
    )
    parser.add_argument(
        "--test-prior",
        type=parse_test_prior,
        default=DEFAULT_TEST_PRIOR,
        metavar="F",
        help="multiply the score of a test file's chunks (tests/, test_*.py, *_test.go, "
        "*.test.ts, ...) by F, above 0 and at most 1, unless the query names tests "
        "(test, testing, spec, fixture, ...); 1 ranks tests as any file "
        "(default: %(default)s; docs/providers.md)",
    )
    args = parser.parse_args(argv)
    if not args.root.is_dir():
        parser.error(f"--root {args.root} is not a directory")
    options = corpus_options(args)
    index = FileIndex(
        options,
        refresh_interval_s=args.refresh_interval,
        refresh_wait_s=args.refresh_wait,
        test_prior=args.test_prior,
    )
    if not args.no_cache:
        folder = args.cache or cache_dir("files")
        index.cache_path = folder / f"{corpus_key(index.corpus)}.json"
        index.cache_max_bytes = args.cache_max_bytes
    if getattr(args, "http", None) is not None:
        # Over HTTPS no progress can reach the host: built before serving, as before.
        started = time.perf_counter()
        index.build()
        _report_build(index, time.perf_counter() - started)
    # On stdio, built after the handshake (FilesProvider.warm): the host learns at once
    # that this provider is up and warming, instead of waiting blind on a silent process.
    serve(FilesProvider(index), args, parser)
    return 0
