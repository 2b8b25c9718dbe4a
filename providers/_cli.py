"""Command-line options shared by the bundled providers: what to read and how to chunk
it (``files``, ``semantic``), and where to serve (stdio, or HTTPS with ``--http``)."""

from __future__ import annotations

import argparse
from dataclasses import dataclass
from pathlib import Path

from hostd.chunking import MODEL_WINDOW
from hostd.provider import Provider, run_http, run_stdio

from ._corpus import (
    DEFAULT_CHUNK_TOKENS,
    DEFAULT_MAX_FILE_BYTES,
    DEFAULT_MIN_CHUNK_TOKENS,
    DEFAULT_WINDOW_LINES,
    CorpusOptions,
)

__all__ = [
    "FILES_CHUNKS",
    "SEMANTIC_CHUNKS",
    "ChunkBound",
    "byte_size",
    "corpus_arguments",
    "corpus_options",
    "http_arguments",
    "serve",
]

#: The smallest chunk budget that leaves room for a title line and some text.
_MIN_CHUNK_TOKENS_FLAG = 32


@dataclass(slots=True, frozen=True)
class ChunkBound:
    """A provider's ``--chunk-tokens``: its default, the most it takes, and why no more."""

    default: int
    most: int
    why: str

    def parse(self, text: str) -> int:
        """An integer from 32 to ``most``, else an argparse error naming the range."""
        try:
            n = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"not an integer: {text!r}") from None
        if not _MIN_CHUNK_TOKENS_FLAG <= n <= self.most:
            raise argparse.ArgumentTypeError(
                f"{n} is outside {_MIN_CHUNK_TOKENS_FLAG}..{self.most} ({self.why})"
            )
        return n


#: ``semantic`` embeds each chunk: at most the model's window, by default the length it
#: was trained at (``hostd.chunking``).
SEMANTIC_CHUNKS = ChunkBound(
    DEFAULT_CHUNK_TOKENS,
    MODEL_WINDOW,
    f"the model reads at most {MODEL_WINDOW} word pieces; a longer chunk would be cut "
    "when embedded",
)
#: ``files`` embeds nothing, so the model's window is no bound of its own: a chunk
#: stays a small part of a prompt (a budget of 2,000 tokens holds a few), and
#: ``--window-lines`` bounds it too.
FILES_CHUNKS = ChunkBound(
    DEFAULT_CHUNK_TOKENS, 1024, "a chunk should stay a small part of a prompt"
)


def corpus_arguments(parser: argparse.ArgumentParser, chunks: ChunkBound = SEMANTIC_CHUNKS) -> None:
    """The options ``files`` and ``semantic`` share: what to read and how to chunk it.

    One set of defaults for what to read; ``chunks`` is the provider's own bound on a
    chunk's word pieces (``semantic``'s is its model's; where the two cut differently,
    compose merges the overlapping regions of a file)."""
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
        metavar="N",
        help="skip files larger than N bytes, counted in the ready line's 'not indexed' "
        "(default: %(default)s)",
    )
    parser.add_argument(
        "--window-lines",
        type=int,
        default=DEFAULT_WINDOW_LINES,
        help="at most this many lines per chunk; markdown is also cut at headings "
        "(default: %(default)s)",
    )
    parser.add_argument(
        "--chunk-tokens",
        type=chunks.parse,
        default=chunks.default,
        metavar="N",
        help="at most this many embedding-model word pieces per chunk, title included, "
        f"{_MIN_CHUNK_TOKENS_FLAG}..{chunks.most} (default: %(default)s)",
    )
    parser.add_argument(
        "--definition-tokens",
        type=chunks.parse,
        default=None,
        metavar="N",
        help="keep a definition of code (its doc comment included) that --chunk-tokens "
        "would cut in one chunk when it fits N word pieces and --window-lines "
        f"(up to {chunks.most}; default: off, cut as any code is)",
    )
    parser.add_argument(
        "--min-chunk-tokens",
        type=int,
        default=DEFAULT_MIN_CHUNK_TOKENS,
        metavar="N",
        help="merge a chunk under this many word pieces into a neighbour when both fit; "
        "0 never merges (default: %(default)s)",
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
        chunk_tokens=args.chunk_tokens,
        min_chunk_tokens=args.min_chunk_tokens,
        definition_tokens=args.definition_tokens,
    )


_UNITS = {"": 1, "k": 1024, "m": 1024**2, "g": 1024**3, "t": 1024**4}


def byte_size(text: str) -> int:
    """A size in bytes: an integer, or one with a binary unit (``512M``, ``2G``, ``1.5G``:
    K, M, G, T, each 1024 times the one before; ``MiB``/``MB`` read as ``M``); 0 or more."""
    said = text.strip().lower().removesuffix("b").removesuffix("i")
    unit = said[-1:] if said[-1:] in _UNITS else ""
    try:
        n = float(said[: len(said) - len(unit)])
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"not a size: {text!r} (bytes, or with a unit: 512M, 2G)"
        ) from None
    if not n >= 0 or n == float("inf"):
        raise argparse.ArgumentTypeError(f"not a size: {text!r} (0 or more)")
    return int(n * _UNITS[unit])


def http_arguments(parser: argparse.ArgumentParser) -> None:
    """``--http HOST:PORT`` and its TLS and token files (docs/remote.md)."""
    group = parser.add_argument_group("serving over HTTPS (docs/remote.md)")
    group.add_argument(
        "--http",
        metavar="HOST:PORT",
        help="serve over HTTP(S) on this address instead of stdio (port 0: any free one; "
        "the URL is written to stderr); plaintext only on loopback",
    )
    group.add_argument(
        "--request-timeout",
        type=float,
        default=10.0,
        metavar="SECONDS",
        help="close a connection that sends no complete request within this (default 10)",
    )
    group.add_argument(
        "--max-connections",
        type=int,
        metavar="N",
        help="connections open at once (default: the descriptor limit less 64, at most 1024)",
    )
    group.add_argument("--certfile", type=Path, help="the server certificate chain (PEM)")
    group.add_argument("--keyfile", type=Path, help="its private key (PEM)")
    group.add_argument(
        "--token-file",
        type=Path,
        help="require this file's bearer token (never on the command line, where ps shows it)",
    )


def _address(text: str) -> tuple[str, int]:
    host, sep, port = text.rpartition(":")
    if not sep or not port.isdigit() or not host:
        raise argparse.ArgumentTypeError(f"--http: expected HOST:PORT, got {text!r}")
    return host.strip("[]"), int(port)


def serve(provider: Provider, args: argparse.Namespace, parser: argparse.ArgumentParser) -> None:
    """Serve on stdio, or over HTTPS when ``--http`` was given."""
    if getattr(args, "http", None) is None:
        run_stdio(provider)
        return
    try:
        host, port = _address(args.http)
    except argparse.ArgumentTypeError as exc:
        parser.error(str(exc))
    token = None
    if args.token_file is not None:
        try:
            token = args.token_file.read_text(encoding="utf-8").strip()
        except OSError as exc:
            parser.error(f"--token-file {args.token_file}: {exc.strerror}")
        if not token:
            parser.error(f"--token-file {args.token_file} is empty")
    if (args.certfile is None) != (args.keyfile is None):
        parser.error("--certfile and --keyfile go together")
    try:
        run_http(
            provider,
            host,
            port,
            args.certfile,
            args.keyfile,
            token,
            request_timeout_s=args.request_timeout,
            max_connections=args.max_connections,
        )
    except ValueError as exc:  # plaintext on a non-loopback address
        parser.error(str(exc))
