"""``providers.semantic``: sentence-embedding search over a directory tree as a CGP provider.

Needs the ``semantic`` extra (``pip install '/path/to/hostd[semantic]'``); run it with
``python -m providers.semantic [--root DIR]`` (``--help`` lists options). This
package imports without the extra; only building an index loads the model.
"""

from ._embed import (
    DIM,
    FINGERPRINT,
    Embedder,
    EmbeddingCache,
    MiniLMEmbedder,
    default_cache_path,
    semantic_unavailable,
)
from ._index import EmbeddingMismatch, SemanticHit, SemanticIndex
from ._provider import SemanticProvider, main

__all__ = [
    "DIM",
    "FINGERPRINT",
    "Embedder",
    "EmbeddingCache",
    "EmbeddingMismatch",
    "MiniLMEmbedder",
    "SemanticHit",
    "SemanticIndex",
    "SemanticProvider",
    "default_cache_path",
    "main",
    "semantic_unavailable",
]
