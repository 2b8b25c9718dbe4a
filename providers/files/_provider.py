"""``providers.files`` on the provider runtime: handshake data, query, verify, CLI."""

from __future__ import annotations

import argparse
import sys
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
from hostd.provider import Provider, run_stdio

from .._corpus import DEFAULT_MAX_FILE_BYTES, DEFAULT_WINDOW_LINES, CorpusOptions, verify_chunk
from ._index import FileIndex

__all__ = ["FilesProvider", "main"]

VERSION = "0.1.0"


class FilesProvider(Provider):
    """Lexical search over one directory tree; ``snippet`` (code) and ``doc`` (prose) frames."""

    def __init__(self, index: FileIndex) -> None:
        self.index = index
        self.info = ProviderInfo(
            name="hostd-files", version=VERSION, data_flow=DataFlow(reads=True)
        )
        self.capabilities = Capabilities(
            query=QueryCapability(kinds=["snippet", "doc"]), verify=True
        )

    async def query(self, query: ContextQuery) -> ContextQueryResult:
        # Ranking is CPU work; keep the stdio loop free for pipelined requests.
        packed = await anyio.to_thread.run_sync(self.index.answer, query)
        return packed.to_result()

    async def verify(self, frames: list[FrameIdentity]) -> list[FrameVerdict]:
        root = self.index.root
        return await anyio.to_thread.run_sync(lambda: [verify_chunk(root, f) for f in frames])


def corpus_arguments(parser: argparse.ArgumentParser) -> None:
    """The options ``files`` and ``semantic`` share: what to read and how to chunk it."""
    parser.add_argument(
        "--root", type=Path, default=Path.cwd(), help="directory to index (default: cwd)"
    )
    parser.add_argument(
        "--include",
        action="append",
        default=[],
        metavar="GLOB",
        help="only index paths matching this .gitignore-style glob (repeatable)",
    )
    parser.add_argument(
        "--exclude",
        action="append",
        default=[],
        metavar="GLOB",
        help="never index paths matching this .gitignore-style glob (repeatable)",
    )
    parser.add_argument(
        "--max-file-bytes",
        type=int,
        default=DEFAULT_MAX_FILE_BYTES,
        help="skip files larger than this (default: %(default)s)",
    )
    parser.add_argument(
        "--window-lines",
        type=int,
        default=DEFAULT_WINDOW_LINES,
        help="lines per chunk; markdown is also cut at headings (default: %(default)s)",
    )
    parser.add_argument(
        "--no-gitignore", action="store_true", help="do not honour .gitignore files"
    )


def corpus_options(args: argparse.Namespace) -> CorpusOptions:
    return CorpusOptions(
        root=args.root,
        include=tuple(args.include),
        exclude=tuple(args.exclude),
        max_file_bytes=args.max_file_bytes,
        window_lines=args.window_lines,
        honour_gitignore=not args.no_gitignore,
    )


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m providers.files",
        description="CGP provider: BM25 search over a directory tree, served on stdio "
        "(JSON-RPC binding). Honours .gitignore; skips binary and huge files.",
    )
    corpus_arguments(parser)
    parser.add_argument(
        "--refresh-interval",
        type=float,
        default=1.0,
        metavar="SECONDS",
        help="re-check file mtimes at most this often (default: %(default)s)",
    )
    args = parser.parse_args(argv)
    if not args.root.is_dir():
        parser.error(f"--root {args.root} is not a directory")
    index = FileIndex(corpus_options(args), refresh_interval_s=args.refresh_interval)
    index.refresh(force=True)  # built at start, so the first query is fast
    print(
        f"providers.files: {index.chunk_count} chunks from {index.corpus.file_count} files "
        f"under {index.root}",
        file=sys.stderr,
    )
    run_stdio(FilesProvider(index))
    return 0
