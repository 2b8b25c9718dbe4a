"""The bundled CGP providers, each a program: ``python -m providers.<name> --help``.

- ``files``: lexical (BM25) search over a directory tree;
- ``memory``: durable, bitemporal agent memory in SQLite;
- ``semantic``: sentence-embedding search (needs the ``semantic`` extra);
- ``langchain``, ``llama_index``: an existing LangChain or LlamaIndex retriever served
  as a provider (``--retriever module:factory``; the ``langchain`` or ``llama-index``
  extra, docs/integrations.md).

Shared pieces: ``Corpus`` (walking and ignoring a tree), ``chunk_file`` (one
chunker for both search providers, sized by the embedding model's word-piece
count) and ``pack`` (the budget rules every provider must honour).
"""

from hostd.chunking import Chunk, chunk_file, chunk_frame, split_lines

from ._corpus import Corpus, CorpusOptions, verify_chunk
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
