"""Command-line options shared by the providers that read a directory tree."""

from __future__ import annotations

import argparse
from pathlib import Path

from ._corpus import DEFAULT_MAX_FILE_BYTES, DEFAULT_WINDOW_LINES, CorpusOptions

__all__ = ["corpus_arguments", "corpus_options"]


def corpus_arguments(
    parser: argparse.ArgumentParser, *, window_lines: int = DEFAULT_WINDOW_LINES
) -> None:
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
        default=window_lines,
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
