"""The bundled CGP providers, each a program: ``python -m providers.<name> --help``.

- ``files``: lexical (BM25) search over a directory tree;
- ``memory``: durable, bitemporal agent memory in SQLite;
- ``semantic``: sentence-embedding search (needs the ``semantic`` extra).

Shared pieces: ``Corpus`` (walking, ignoring, chunking a tree) and ``pack``
(the budget rules every provider must honour).
"""

from ._corpus import (
    Chunk,
    Corpus,
    CorpusOptions,
    chunk_file,
    chunk_frame,
    split_lines,
    verify_chunk,
)
from ._frames import Packed, format_timestamp, now_timestamp, pack, query_text, saturate

__all__ = [
    "Chunk",
    "Corpus",
    "CorpusOptions",
    "Packed",
    "chunk_file",
    "chunk_frame",
    "format_timestamp",
    "now_timestamp",
    "pack",
    "query_text",
    "saturate",
    "split_lines",
    "verify_chunk",
]
