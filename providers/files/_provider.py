"""``providers.files`` on the provider runtime: handshake data, query, verify, CLI."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

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
from hostd.provider import Provider

from .._cli import corpus_arguments, corpus_options, http_arguments, serve
from .._corpus import verify_chunk
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


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m providers.files",
        description="CGP provider: BM25 search over a directory tree, served on stdio "
        "(JSON-RPC binding), or over HTTPS with --http. Honours .gitignore; skips binary "
        "and huge files.",
    )
    corpus_arguments(parser)
    http_arguments(parser)
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
    serve(FilesProvider(index), args, parser)
    return 0
