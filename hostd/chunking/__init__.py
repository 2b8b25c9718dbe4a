"""One chunker for every source of evidence: runs of whole lines sized by a model's count.

The bundled ``files`` and ``semantic`` providers cut files with ``chunk_file``, so
both serve the same regions (one uri and range, one digest) and cross-provider
dedup (D2) merges them; the ``mcp`` binding cuts what an MCP server serves with
``chunk_text`` (a ``file://`` resource as ``chunk_file`` would). A Jupyter notebook
is cut into its cells' text (``chunk_notebook``), each chunk's range the lines of its
JSON that hold that text. Word pieces are counted by the embedding model's tokenizer
when the ``semantic`` extra is installed, else estimated (``piece_counter``). What a
chunk is searched by is here too (``tokenize``, ``_terms``): the ``files`` provider's
BM25 and the ``mcp`` binding's scores count the same terms, and the names a chunk
defines (``defined_names``, ``item_name``) are what its ranking lifts a definition by. Imports only
``hostd.protocol``.
"""

from ._chunk import (
    DEFAULT_CHUNK_TOKENS,
    DEFAULT_MIN_CHUNK_TOKENS,
    DEFAULT_WINDOW_LINES,
    DOC_SUFFIXES,
    Chunk,
    Sections,
    TextChunk,
    chunk_file,
    chunk_frame,
    chunk_notebook,
    chunk_text,
    file_sections,
    is_binary,
    parse_chunk_id,
    split_lines,
    with_item,
)
from ._items import ITEM_SEPARATOR, defined_names, item_name
from ._notebook import NOTEBOOK_SUFFIX, range_text, read_notebook
from ._terms import QUESTION_WORDS, STOPWORDS, camel_parts, surface_forms, tokenize
from ._tokens import (
    MODEL_TRAINED_LENGTH,
    MODEL_WINDOW,
    Counter,
    counter_identity,
    estimate_pieces,
    piece_counter,
)

__all__ = [
    "DEFAULT_CHUNK_TOKENS",
    "DEFAULT_MIN_CHUNK_TOKENS",
    "DEFAULT_WINDOW_LINES",
    "DOC_SUFFIXES",
    "ITEM_SEPARATOR",
    "MODEL_TRAINED_LENGTH",
    "MODEL_WINDOW",
    "NOTEBOOK_SUFFIX",
    "QUESTION_WORDS",
    "STOPWORDS",
    "Chunk",
    "Counter",
    "Sections",
    "TextChunk",
    "chunk_file",
    "chunk_frame",
    "chunk_notebook",
    "chunk_text",
    "counter_identity",
    "defined_names",
    "estimate_pieces",
    "file_sections",
    "camel_parts",
    "is_binary",
    "item_name",
    "parse_chunk_id",
    "piece_counter",
    "range_text",
    "read_notebook",
    "split_lines",
    "surface_forms",
    "tokenize",
    "with_item",
]
