"""Embedding search over a ``Corpus``: cosine similarity against cached chunk vectors.

Each chunk is embedded as its title line plus its text; the vector is cached
under the digest of exactly that input. Cosine similarity (vectors are
L2-normalised) clamped at 0 is the score (F1): a high band next to BM25's, which
is why cross-provider ranking by raw score is a policy choice, not a given.
"""

from __future__ import annotations

import sys
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from hostd.protocol import ContextFrame, ContextQuery, sha256_digest

from .._anchors import FileSpans, anchor_paths, anchor_ranked, banded
from .._corpus import Chunk, Corpus, CorpusOptions, chunk_frame
from .._frames import Packed, now_timestamp, pack, query_text
from ._embed import Embedder, EmbeddingCache, Vectors

__all__ = ["LARGE_BUILD", "EmbeddingMismatch", "SemanticHit", "SemanticIndex", "embed_note"]


class EmbeddingMismatch(ValueError):  # noqa: N818 - named for the condition (E1)
    """A query vector whose length contradicts the declared dimension (E1: ``bad_request``)."""


@dataclass(slots=True, frozen=True)
class SemanticHit:
    chunk: Chunk
    score: float


#: Chunks embedded (and committed to the cache) per step of a build.
_EMBED_BATCH = 64

#: More chunks than this left to embed, and the build's first note says a
#: ``.hostdignore`` shortens it: minutes of embedding on a small machine (the rate is in
#: docs/benchmarks.md), long enough that trimming the tree first is worth the minute.
LARGE_BUILD = 5000


def embed_note(missing: int, total: int) -> str:
    """What a build says as it begins embedding: how many chunks of the index, how many
    its cache already has, and on a large tree what shortens it (a hint, not an error).
    At most ``MAX_PROGRESS_TEXT`` long, so the host keeps it whole."""
    said = f"embedding {missing:,} of {total:,} chunks"
    if missing < total:
        said += f" ({total - missing:,} cached)"
    if missing > LARGE_BUILD:
        said += (
            "; a .hostdignore listing what need not be searched (tests, fixtures, "
            "generated docs, changelogs) shortens it"
        )
    return said


def _embed_input(chunk: Chunk) -> str:
    return f"{chunk.title}\n{chunk.text}"


@dataclass(slots=True)
class _Plan:
    """What one build embeds: its chunks, their cache keys, the vectors the cache has,
    and the indexes of the chunks it lacks."""

    chunks: list[Chunk]
    keys: list[str]
    cached: dict[str, Vectors]
    missing: list[int]


class SemanticIndex:
    """Chunks of a tree, their vectors (embedded once, cached on disk), and cosine search."""

    def __init__(
        self,
        options: CorpusOptions,
        embedder: Embedder,
        cache: EmbeddingCache,
        *,
        min_score: float = 0.15,
        refresh_interval_s: float = 1.0,
    ) -> None:
        self.corpus = Corpus(options)
        self.embedder = embedder
        self.cache = cache
        self.min_score = min_score
        self.refresh_interval_s = refresh_interval_s
        self._lock = threading.Lock()
        self._chunks: list[Chunk] = []
        self._spans = FileSpans([])
        self._matrix: Vectors = np.zeros((0, embedder.dim), dtype=np.float32)
        self._indexed_at: dict[str, str] = {}
        self._last_check = float("-inf")
        self._built = False
        self.embedded_last = 0  # how many chunks the last rebuild had to embed
        #: The chunks the embedding thread is to embed next, and whether it runs.
        self._pending: list[Chunk] | None = None
        self._embedding = False

    @property
    def root(self) -> Path:
        return self.corpus.root

    @property
    def chunk_count(self) -> int:
        return len(self._chunks)

    def refresh(
        self,
        *,
        force: bool = False,
        progress: Callable[..., None] | None = None,
        chunked: Callable[[], None] | None = None,
    ) -> bool:
        """Re-walk (at most once per ``refresh_interval_s``) and embed what is new;
        ``progress(done, total, phase=..., message=...)`` is told of each embedded batch
        (over the whole index, the first with ``embed_note`` as its message), and
        ``chunked()`` once the chunks are known, before any is embedded.

        Once built, more than a batch to embed (a formatter run, a branch switch) is
        embedded in a thread of its own: queries meanwhile answer at once from the
        index as it was (the host's source check drops a chunk whose file changed), not
        after minutes of embedding, which a host would take for a hung provider."""
        with self._lock:
            now = time.monotonic()
            if not force and self._built and now - self._last_check < self.refresh_interval_s:
                return False
            self._last_check = now
            changed = self.corpus.refresh()
            if not changed and self._built:
                return False
            if chunked is not None:
                chunked()
            chunks = list(self.corpus.chunks)
            plan = self._plan(chunks)
            if self._built and not force and len(plan.missing) > _EMBED_BATCH:
                self._pending = chunks
                if not self._embedding:
                    self._embedding = True
                    threading.Thread(
                        target=self._embed_behind, name="semantic-embed", daemon=True
                    ).start()
                return changed
            self._install(chunks, self._embed(plan, progress))
            return changed

    def _plan(self, chunks: list[Chunk]) -> _Plan:
        keys = [sha256_digest(_embed_input(c).encode("utf-8")) for c in chunks]
        cached = self.cache.get_many(list(dict.fromkeys(keys)))
        return _Plan(chunks, keys, cached, [i for i, k in enumerate(keys) if k not in cached])

    def _embed(self, plan: _Plan, progress: Callable[..., None] | None = None) -> Vectors:
        """The matrix of ``plan``'s chunks, embedding what the cache lacks in batches,
        each committed to the cache at once: a build cut short (a stop, a kill) keeps
        what it embedded, so the next start resumes rather than restarts."""
        chunks, keys, cached, missing = plan.chunks, plan.keys, plan.cached, plan.missing
        # Progress over the whole index, the cached chunks counted done: a resumed build
        # stands where the last one stopped, not at a fresh 0 of what is left.
        total, kept = len(chunks), len(chunks) - len(missing)
        step = _EMBED_BATCH
        for at in range(0, len(missing), step):
            if progress is not None:
                note = embed_note(len(missing), total) if at == 0 else None
                progress(kept + at, total, phase="embed", message=note)
            part = missing[at : at + step]
            vectors = self.embedder.encode([_embed_input(chunks[i]) for i in part])
            fresh = [(keys[i], vectors[j]) for j, i in enumerate(part)]
            self.cache.put_many(fresh)
            cached.update(fresh)
        if progress is not None and missing:
            progress(total, total, phase="embed")
        self.embedded_last = len(missing)
        if not keys:
            return np.zeros((0, self.embedder.dim), dtype=np.float32)
        return np.vstack([cached[k] for k in keys])

    def _install(self, chunks: list[Chunk], matrix: Vectors) -> None:
        """Make ``chunks`` and their ``matrix`` the index queries search (lock held)."""
        stamp = now_timestamp()
        self._indexed_at = {c.chunk_id: self._indexed_at.get(c.chunk_id, stamp) for c in chunks}
        self._chunks, self._matrix, self._built = chunks, matrix, True
        self._spans = FileSpans(chunks)

    def _embed_behind(self) -> None:
        """The embedding thread: the latest chunks the walk found, until none is
        pending; each installed once embedded."""
        while True:
            with self._lock:
                chunks, self._pending = self._pending, None
                if chunks is None:
                    self._embedding = False
                    return
            try:
                matrix = self._embed(self._plan(chunks))
            except Exception as exc:  # the next refresh tries again; queries go on
                sys.stderr.write(f"providers.semantic: embedding failed: {exc!r}\n")
                with self._lock:
                    self._embedding = False
                    self._last_check = float("-inf")
                return
            with self._lock:
                self._install(chunks, matrix)

    @property
    def embedding(self) -> bool:
        """Whether an embedding thread is at work (``refresh``)."""
        return self._embedding

    def search(
        self,
        text: str | None,
        vector: list[float] | None = None,
        anchors: Sequence[str] = (),
    ) -> list[SemanticHit]:
        """Best first by cosine; ties by chunk id. ``vector`` (E1) is used instead of
        ``text``. With ``anchors`` that name indexed files, those files' chunks lead
        (``_anchors``)."""
        self.refresh()
        with self._lock:
            chunks, matrix, spans = self._chunks, self._matrix, self._spans
        if not chunks:
            return []
        if vector is not None:
            if len(vector) != self.embedder.dim:
                raise EmbeddingMismatch(
                    f"query embedding has {len(vector)} dimensions, "
                    f"this index has {self.embedder.dim}"
                )
            q = np.asarray(vector, dtype=np.float32)
            norm = float(np.linalg.norm(q))
            q = q / norm if norm > 0 else q
        elif text:
            q = self.embedder.encode([text])[0]
        else:
            return []
        sims = matrix @ q
        order = [int(i) for i in np.flatnonzero(sims >= self.min_score)]
        anchored = spans.anchored(anchor_paths(anchors, self.root))
        if anchored.chunks:
            cosine = sims.tolist()
            return [
                SemanticHit(chunks[i], banded(cosine[i], i in anchored.chunks))
                for i in anchor_ranked(order, cosine, chunks, anchored)
            ]
        order.sort(key=lambda i: (-float(sims[i]), chunks[i].chunk_id))
        return [SemanticHit(chunks[i], min(float(sims[i]), 1.0)) for i in order]

    def frame(self, hit: SemanticHit) -> ContextFrame:
        return chunk_frame(hit.chunk, hit.score, self._indexed_at.get(hit.chunk.chunk_id))

    def answer(self, query: ContextQuery) -> Packed:
        if query.max_frames == 0:
            return Packed([], False, 0)
        hits = self.search(query_text(query), query.embedding, query.anchors)
        return pack(hits, query, kind_of=lambda h: h.chunk.kind, build=self.frame)
