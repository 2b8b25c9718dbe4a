"""Lexical (BM25) search over a ``Corpus``: tokenising, indexing, ranking, frame building.

BM25 is ``bm25s`` over our own tokens rather than SQLite FTS5: the index is
derived state, rebuilt from the files in milliseconds at repository scale, so
FTS5's persistence buys nothing, while ``bm25s`` takes pre-tokenised input and
lets code identifiers be split the way code is written (``address_line_range``
and ``addressLineRange`` both match ``address line range``) — FTS5 would need a
custom tokenizer, which stdlib ``sqlite3`` cannot register.
"""

from __future__ import annotations

import hashlib
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import bm25s
import numpy as np

from hostd.chunking import _terms, tokenize
from hostd.protocol import ContextFrame, ContextQuery

from .._anchors import FileSpans, anchor_paths, anchor_ranked, banded
from .._corpus import Chunk, Corpus, CorpusOptions, chunk_frame
from .._corpus_cache import ChunkTerms, load_corpus, save_corpus
from .._frames import Packed, now_timestamp, pack, query_text, saturate

__all__ = ["BM25_HALF_SCORE", "FileIndex", "Hit", "tokenize"]

#: The raw BM25 score that maps to 0.5 (F1). Scores are ordinal (F10); this only
#: keeps a typical strong match in the middle of [0, 1] rather than pinned at 1.
BM25_HALF_SCORE = 12.0

#: What a chunk's cached terms were derived by (``ChunkTerms.tag``): the tokenizer's
#: source (``tokenize`` and its stop words, ``hostd.chunking._terms``), so a changed
#: tokenizer derives them anew.
_TERMS_TAG = hashlib.sha256(Path(_terms.__file__).read_bytes()).hexdigest()[:32]


@dataclass(slots=True, frozen=True)
class Hit:
    chunk: Chunk
    raw: float
    score: float


class FileIndex:
    """BM25 over the chunks of a directory tree, rebuilt when the tree changes.

    Thread-safe: ``search`` and ``refresh`` may be called from worker threads.
    """

    def __init__(
        self,
        options: CorpusOptions,
        *,
        refresh_interval_s: float = 1.0,
        cache_path: Path | None = None,
    ) -> None:
        self.corpus = Corpus(options)
        #: Where the chunks persist (``_corpus_cache``), so a restart re-reads only changes.
        self.cache_path = cache_path
        self.loaded_from_cache = False
        self.refresh_interval_s = refresh_interval_s
        self._lock = threading.Lock()
        self._bm25: bm25s.BM25 | None = None
        #: Each chunk's terms, space-separated (``_terms_of``): a rebuild tokenizes only
        #: new chunks, and a restart none (they are cached with the chunks).
        self._terms = ChunkTerms(_TERMS_TAG)
        #: Chunks the last rebuild had to tokenize (its terms were neither held nor cached).
        self.tokenized_last = 0
        self._chunks: list[Chunk] = []
        self._spans = FileSpans([])
        self._indexed_at: dict[str, str] = {}
        self._last_check = float("-inf")
        #: Rebuilds so far: what the index holds changed when it moves.
        self.generation = 0
        #: What the last rebuild after the first build took (walk, reads and index).
        self.built_in_s = 0.0

    @property
    def root(self) -> Path:
        return self.corpus.root

    @property
    def lock(self) -> threading.Lock:
        """Held by a refresh: what the index holds is read whole under it."""
        return self._lock

    def refresh(self, *, force: bool = False) -> bool:
        """Re-walk the tree (at most once per ``refresh_interval_s``); rebuild on change."""
        with self._lock:
            now = time.monotonic()
            if not force and now - self._last_check < self.refresh_interval_s:
                return False
            self._last_check = now
            changed = self.corpus.refresh()
            if changed or self._bm25 is None:
                self._rebuild()
                self.built_in_s = time.monotonic() - now
            return changed

    def build(self, progress: Callable[..., None] | None = None) -> None:
        """The first build: adopt the cached chunks and their terms, re-read what changed
        on disk, index, and save the cache again when anything changed. ``progress(done,
        total, phase=...)`` is told how far it got: ``read files`` then ``index`` for a
        build from the files, ``load`` throughout for one from the cache (what changed
        since is read in it), so a user is not told an index is built when it is loaded,
        nor that one is loaded when there is no cache to load."""
        with self._lock:
            phase = "read files"
            if self.cache_path is not None:
                if progress is not None and self.cache_path.is_file():
                    progress(0, None, phase="load")
                self.loaded_from_cache = load_corpus(self.corpus, self.cache_path, self._terms)
                if self.loaded_from_cache:
                    phase = "load"

            def read(done: int, total: int) -> None:
                if progress is not None:
                    progress(done, total, phase=phase)

            self.corpus.refresh(read)
            if progress is not None:
                progress(0, None, phase="load" if self.loaded_from_cache else "index")
            self._rebuild()
            self._last_check = time.monotonic()
            # ``modified``, not ``reads``: a cache that held a file now refused (a ``.env``
            # written by an older version) is rewritten without it though nothing was read.
            # A chunk tokenized anew (a changed tokenizer) is saved with its terms too.
            stale = self.corpus.modified or self.tokenized_last > 0 or not self.loaded_from_cache
            if self.cache_path is not None and stale:
                try:
                    save_corpus(self.corpus, self.cache_path, self._terms)
                except OSError:  # a cache that cannot be written costs the next start only
                    pass

    def _rebuild(self) -> None:
        chunks = list(self.corpus.chunks)
        stamp = now_timestamp()
        indexed_at = {c.chunk_id: self._indexed_at.get(c.chunk_id, stamp) for c in chunks}
        held, terms = self._terms.by_chunk, {}
        for c in chunks:
            key = (c.rel, c.digest)
            if key not in terms:
                cached = held.get(key)
                terms[key] = cached if cached is not None else self._terms_of(c)
        # Only the chunks indexed now: a file gone or changed leaves no terms behind.
        self.tokenized_last = sum(1 for key in terms if key not in held)
        self._terms.by_chunk = terms
        bm25: bm25s.BM25 | None = None
        if chunks:
            bm25 = bm25s.BM25()
            bm25.index([terms[c.rel, c.digest].split() for c in chunks], show_progress=False)
        self._bm25, self._chunks, self._indexed_at = bm25, chunks, indexed_at
        self._spans = FileSpans(chunks)
        self.generation += 1

    @staticmethod
    def _terms_of(chunk: Chunk) -> str:
        # Prefix each chunk with its path so a file's name is searchable too. A term is a
        # word's characters, never a space, so the string splits back into the terms.
        return " ".join(tokenize(chunk.rel) + tokenize(chunk.text))

    def search(self, text: str, *, limit: int = 200, anchors: Sequence[str] = ()) -> list[Hit]:
        """Best first; ties broken by chunk id so equal inputs rank identically. With
        ``anchors`` that name indexed files, those files' chunks lead (``_anchors``)."""
        self.refresh()
        with self._lock:
            bm25, chunks, spans = self._bm25, self._chunks, self._spans
        tokens = tokenize(text)
        if bm25 is None:
            return []
        anchored = spans.anchored(anchor_paths(anchors, self.root))
        if not tokens and not anchored.files:
            return []
        scores = (
            np.asarray(bm25.get_scores(tokens), dtype=np.float64)
            if tokens
            else np.zeros(len(chunks), dtype=np.float64)
        )
        order = [int(i) for i in np.flatnonzero(scores > 0)]
        if anchored.chunks:
            raw = scores.tolist()
            return [
                Hit(
                    chunks[i],
                    raw[i],
                    banded(saturate(raw[i], BM25_HALF_SCORE), i in anchored.chunks),
                )
                for i in anchor_ranked(order, raw, chunks, anchored)[:limit]
            ]
        order.sort(key=lambda i: (-scores[i], chunks[i].chunk_id))
        return [
            Hit(chunks[i], float(scores[i]), saturate(float(scores[i]), BM25_HALF_SCORE))
            for i in order[:limit]
        ]

    def frame(self, hit: Hit) -> ContextFrame:
        return chunk_frame(hit.chunk, hit.score, self._indexed_at.get(hit.chunk.chunk_id))

    def answer(self, query: ContextQuery) -> Packed:
        """The frames for one query under its limits (B1, B4, Q1), its anchors' first."""
        if query.max_frames == 0:
            return Packed([], False, 0)
        hits = self.search(query_text(query), anchors=query.anchors)
        return pack(hits, query, kind_of=lambda h: h.chunk.kind, build=self.frame)

    @property
    def chunk_count(self) -> int:
        return len(self._chunks)
