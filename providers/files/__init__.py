"""``providers.files``: lexical (BM25) search over a directory tree as a CGP provider.

Run it with ``python -m providers.files [--root DIR]`` (``--help`` lists options).
"""

from ._index import BM25_HALF_SCORE, FileIndex, Hit, tokenize
from ._provider import FilesProvider, main

__all__ = ["BM25_HALF_SCORE", "FileIndex", "FilesProvider", "Hit", "main", "tokenize"]
