"""Embedding search over a ``Corpus``: cosine similarity against cached chunk vectors.

Each chunk is embedded as its title line (``Chunk.index_title``: without the item a
code chunk sits in) plus its text; the vector is cached
under the digest of exactly that input. Cosine similarity (vectors are
L2-normalised) clamped at 0 is the score (F1): a high band next to BM25's, which
is why cross-provider ranking by raw score is a policy choice, not a given. A test
file's chunks rank at ``test_prior`` of their cosine unless the query asks about tests
(``_prior``), as ``files`` ranks them.
"""

from __future__ import annotations

import sys
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from hostd.protocol import ContextFrame, ContextQuery, sha256_digest

from .._anchors import FileSpans, anchor_paths, anchor_ranked, banded
from .._corpus import Chunk, Corpus, CorpusOptions, chunk_frame
from .._frames import Packed, now_timestamp, pack, query_text
from .._prior import DEFAULT_TEST_PRIOR, asks_about_tests, is_test_chunk, lower_tests
from ._embed import Embedder, EmbeddingCache, Vectors

__all__ = [
    "LARGE_BUILD",
    "EmbeddingMismatch",
    "SemanticHit",
    "SemanticIndex",
    "embed_note",
    "embed_order",
    "embed_rank",
]


class EmbeddingMismatch(ValueError):  # noqa: N818 - named for the condition (E1)
    """A query vector whose length contradicts the declared dimension (E1: ``bad_request``)."""


@dataclass(slots=True, frozen=True)
class SemanticHit:
    chunk: Chunk
    #: What it was ranked by: its cosine, a test chunk's lowered by the test prior when
    #: that applies (``_prior``), banded when anchors apply (``_anchors``).
    score: float


#: Chunks embedded (and committed to the cache) per step of a build.
_EMBED_BATCH = 64

#: More chunks than this left to embed, and the build's first note says a
#: ``.hostdignore`` shortens it: minutes of embedding on a small machine (the rate is in
#: docs/benchmarks.md), long enough that trimming the tree first is worth the minute.
LARGE_BUILD = 5000

#: While embedding, the tree is walked again (an edited ``.hostdignore``, a branch
#: switch) no more than this share of the time: a walk of a large tree takes seconds.
_WALK_SHARE = 0.1


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
    # ``index_title``, not ``title``: the item a code chunk sits in is for its reader;
    # in the input, it would change every code chunk's cache key, and embed again a
    # whole tree embedded before items were shown.
    return f"{chunk.index_title}\n{chunk.text}"


# Directory names (any part of a path) that say what a file is for, and so when it is
# embedded (``embed_rank``); a test is told by ``is_test_chunk``, as the test prior tells it.
_FIXTURE_DIRS = frozenset(
    {"fixtures", "fixture", "__fixtures__", "testdata", "test_data", "__snapshots__"}
)
_DOC_DIRS = frozenset({"doc", "docs", "documentation"})
_LATE_DIRS = frozenset({"locale", "locales", "i18n", "l10n", "generated", "__generated__"})

#: ``embed_rank``'s ranks, first embedded first.
RANK_SOURCE, RANK_TEST, RANK_FIXTURE, RANK_DOC, RANK_LATE = range(5)


def embed_rank(chunk: Chunk) -> int:
    """When a chunk is embedded in a build, by its path (and code item) alone: the
    project's code (``RANK_SOURCE``) first, then tests (``is_test_chunk``: a ``tests/``
    or ``e2e/`` folder, ``test_*.py``, ``*_test.go``, ``*.spec.ts``, a Rust ``mod
    tests``), fixtures and test data, docs
    (a doc file, or a ``docs/`` folder), and last translations and generated code
    (``locale/``, ``generated/``); a path that is several (``tests/fixtures/``) takes
    the latest. Queries meanwhile search what is embedded (``SemanticIndex.search``),
    so the first hour of a long build covers the code a question is most often about."""
    parts = chunk.rel.split("/")
    folders = set(parts[:-1])
    if not folders.isdisjoint(_LATE_DIRS):
        return RANK_LATE
    if chunk.kind == "doc" or not folders.isdisjoint(_DOC_DIRS):
        return RANK_DOC
    if not folders.isdisjoint(_FIXTURE_DIRS):
        return RANK_FIXTURE
    if is_test_chunk(chunk.rel, chunk.item):  # the test prior's rule: one answer to "a test?"
        return RANK_TEST
    return RANK_SOURCE


#: Code files by language (their suffixes): ``embed_order`` embeds a tree's own first.
_LANGUAGES = {
    suffix: language
    for language, suffixes in {
        "python": ".py .pyi .pyx .pxd",
        "rust": ".rs",
        "go": ".go",
        "javascript": ".js .jsx .mjs .cjs",
        "typescript": ".ts .tsx .mts .cts",
        "java": ".java",
        "kotlin": ".kt .kts",
        "csharp": ".cs",
        "c": ".c .h",
        "cpp": ".cc .cpp .cxx .hh .hpp .hxx",
        "objc": ".m .mm",
        "swift": ".swift",
        "scala": ".scala",
        "ruby": ".rb",
        "php": ".php",
        "perl": ".pl .pm",
        "shell": ".sh .bash .zsh",
        "lua": ".lua",
        "elixir": ".ex .exs",
        "erlang": ".erl .hrl",
        "haskell": ".hs",
        "ocaml": ".ml .mli",
        "clojure": ".clj .cljs .cljc",
        "dart": ".dart",
        "zig": ".zig",
        "julia": ".jl",
        "r": ".r",
        "vue": ".vue",
        "svelte": ".svelte",
    }.items()
    for suffix in suffixes.split()
}


def _language(rel: str) -> str | None:
    name = rel.rpartition("/")[2]
    dot = name.rfind(".")
    return _LANGUAGES.get(name[dot:].lower()) if dot > 0 else None


def embed_order(chunks: Sequence[Chunk], which: Iterable[int]) -> list[int]:
    """``which`` (positions in ``chunks``) in the order a build embeds them: by
    ``embed_rank``, and within the project's code (``RANK_SOURCE``) the files in the
    language most of its chunks are in (``.rs`` in a Rust crate with a Python wrapper)
    first, then other code (its ``.py`` and ``.pyi``), then what is no code (manifests,
    config, data, licence): a query while a build runs meets the code the project is
    written in, not its ``Cargo.toml``. Ties keep the order of ``which`` (by path).
    A function of the chunk list alone, so a build resumed embeds in the same order."""
    of_file: dict[str, tuple[int, str | None]] = {}
    for chunk in chunks:
        if chunk.rel not in of_file:
            of_file[chunk.rel] = (embed_rank(chunk), _language(chunk.rel))
    counts = Counter(
        language
        for rank, language in map(of_file.__getitem__, (c.rel for c in chunks))
        if rank == RANK_SOURCE and language is not None
    )
    # The most chunks; a tie goes to the name first in order, so the order is the same
    # whichever files came first.
    main = min(counts, key=lambda lang: (-counts[lang], lang)) if counts else None

    def key(i: int) -> tuple[int, int]:
        rank, language = of_file[chunks[i].rel]
        if rank != RANK_SOURCE:
            return rank, 0
        return rank, 0 if language == main else 1 if language is not None else 2

    return sorted(which, key=key)


@dataclass(slots=True, eq=False)  # compared by identity (``_shown``)
class _Plan:
    """What one build embeds and how far it got: its chunks and their cache keys; the
    positions of those that have a vector, in ``order``, their vectors in the first rows
    of ``matrix`` in that order (cached ones first); and ``missing``, the positions
    still to embed, the first to embed first (``embed_rank``)."""

    chunks: list[Chunk]
    keys: list[str]
    matrix: Vectors
    order: list[int]
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
        clock: Callable[[], float] = time.monotonic,
        test_prior: float = DEFAULT_TEST_PRIOR,
    ) -> None:
        self.corpus = Corpus(options)
        self.embedder = embedder
        self.cache = cache
        #: The cosine a chunk needs to be a hit at all, read before the test prior: the
        #: prior reorders the hits, as it does in ``files``, and never drops one.
        self.min_score = min_score
        #: What lowers a test chunk's cosine for a query that does not ask about tests
        #: (``_prior.lower_tests``); 1 ranks by cosine alone.
        self.test_prior = test_prior
        self.refresh_interval_s = refresh_interval_s
        #: When walks are due and how long they take (a test's own clock decides them).
        self._clock = clock
        self._lock = threading.Lock()
        self._chunks: list[Chunk] = []
        self._spans = FileSpans([])
        self._matrix: Vectors = np.zeros((0, embedder.dim), dtype=np.float32)
        #: Which of ``_chunks`` are tests (``is_test_chunk``), ``None`` when none
        #: is, so a tree without tests is ranked by cosine alone, as it always was.
        self._tests: np.ndarray | None = None
        self._indexed_at: dict[str, str] = {}
        self._last_check = float("-inf")
        #: How long the last walk took: while embedding, the tree is walked again no
        #: more often than ``_WALK_SHARE`` of the time allows (``_newer``).
        self._walk_s = 0.0
        self._built = False
        self.embedded_last = 0  # how many chunks the last rebuild had to embed
        #: The plan whose vectors queries search (once built, whole).
        self._installed: _Plan | None = None
        #: During the first build, the plan being embedded: queries search what it has,
        #: installed when a query comes (``_shown``: the plan and count installed).
        self._growing: _Plan | None = None
        self._shown: tuple[_Plan, int] | None = None
        #: Newer chunks a walk found while an embedding runs (it takes them between
        #: batches), and whether one runs.
        self._pending: list[Chunk] | None = None
        self._embedding = False

    @property
    def root(self) -> Path:
        return self.corpus.root

    @property
    def chunk_count(self) -> int:
        return len(self._chunks)

    @property
    def built(self) -> bool:
        """Whether every chunk of a walk has been embedded once: until then, queries
        search the chunks embedded so far (``searched``)."""
        return self._built

    @property
    def searched(self) -> tuple[int, int]:
        """``(chunks searched, chunks in the index)``: equal once built."""
        with self._lock:
            plan = self._growing if not self._built else self._installed
            if plan is None:
                return 0, 0
            return len(plan.order), len(plan.chunks)

    def refresh(
        self,
        *,
        force: bool = False,
        progress: Callable[..., None] | None = None,
        chunked: Callable[[], None] | None = None,
        searchable: Callable[[], None] | None = None,
        reading: Callable[[int, int], None] | None = None,
    ) -> bool:
        """Re-walk (at most once per ``refresh_interval_s``) and embed what is new;
        ``progress(done, total, phase=..., message=...)`` is told of each embedded batch
        (over the whole index, the first with ``embed_note`` as its message; ``done``
        is what a query searches meanwhile), ``chunked()`` once the chunks are known,
        before any is embedded, ``searchable()`` once the first build has a chunk
        to search, and ``reading(done, total)`` of the files its walk reads (before any
        chunk is known: on a large tree, a while).

        The first build (or a forced one) embeds in the caller's thread, without the
        lock: queries meanwhile search the chunks embedded so far. Once built, more than
        a batch to embed (a formatter run, a branch switch) is embedded in a thread of
        its own: queries meanwhile answer at once from the index as it was (the host's
        source check drops a chunk whose file changed), not after minutes of embedding,
        which a host would take for a hung provider. Either way the embedding takes up
        what a walk finds meanwhile (an edited ``.hostdignore``) between batches."""
        with self._lock:
            now = self._clock()
            settled = self._built or self._embedding
            if not force and settled and now - self._last_check < self.refresh_interval_s:
                return False
            changed = self._walk(now, reading)
            if not changed and settled and not force:
                return False
            if chunked is not None:
                chunked()
            chunks = list(self.corpus.chunks)
            if self._embedding:  # it takes them between batches (``_newer``)
                self._pending = chunks
                return changed
            plan = self._plan(chunks, self._installed)
            if self._built and not force:
                if len(plan.missing) > _EMBED_BATCH:
                    self._embedding = True
                    threading.Thread(
                        target=self._embed_behind, args=(plan,), name="semantic-embed", daemon=True
                    ).start()
                else:  # a few edited chunks: embedded now, the query waits a moment
                    self.embedded_last = len(plan.missing)
                    self._install(self._embed_batches(plan))
                return changed
            self._embedding = True
            if not self._built:
                self._growing = plan
        try:
            self._embed(plan, progress, None if self._built else searchable)
        finally:
            with self._lock:
                self._embedding = False
        return changed

    def _walk(self, now: float, reading: Callable[[int, int], None] | None = None) -> bool:
        """``corpus.refresh(reading)``, timed (lock held)."""
        self._last_check = now
        changed = self.corpus.refresh(reading)
        self._walk_s = self._clock() - now
        return changed

    def _plan(self, chunks: list[Chunk], before: _Plan | None = None) -> _Plan:
        """``chunks``' plan: the vectors ``before`` has (a build under way, or the
        index) kept, the rest looked up in the cache; what neither has is missing.
        A chunk ``before`` holds is the same object when its file did not change, so
        its key is not computed again: a re-plan of a large tree costs a lookup each."""
        known: dict[str, int] = {}
        prior: dict[int, str] = {}
        if before is not None:
            known = {before.keys[i]: row for row, i in enumerate(before.order)}
            prior = {id(c): k for c, k in zip(before.chunks, before.keys, strict=True)}
        keys = [prior.get(id(c)) or sha256_digest(_embed_input(c).encode("utf-8")) for c in chunks]
        cached = self.cache.get_many([k for k in dict.fromkeys(keys) if k not in known])
        order: list[int] = []
        missing: list[int] = []
        rows: list[int] = []  # each kept chunk's row in ``before.matrix``; -1: the cache's
        fresh: list[tuple[int, Vectors]] = []  # the cache's vectors, by row of the new matrix
        for i, key in enumerate(keys):
            row = known.get(key, -1)
            if row < 0:
                vector = cached.get(key)
                if vector is None:
                    missing.append(i)
                    continue
                fresh.append((len(order), vector))
            rows.append(row)
            order.append(i)
        matrix = np.empty((len(chunks), self.embedder.dim), dtype=np.float32)
        if before is not None and known:
            # One gather of the kept rows straight into the new matrix: at 120k chunks a
            # row at a time took most of a re-plan, which queries wait for (lock held).
            # A row of the cache's (-1) takes row 0 here ("clip": and no buffered copy of
            # the output, which "raise" makes) and is overwritten below.
            np.take(before.matrix, rows, axis=0, out=matrix[: len(rows)], mode="clip")
        for row, vector in fresh:  # separate arrays: a stack of them would be a 2nd copy
            matrix[row] = vector
        missing = embed_order(chunks, missing)
        return _Plan(chunks, keys, matrix, order, missing)

    def _embed_batches(self, plan: _Plan, count: int | None = None) -> _Plan:
        """Embed ``plan``'s next ``count`` missing chunks (all of them: ``None``), each
        batch committed to the cache at once: a build cut short (a stop, a kill) keeps
        what it embedded, so the next start resumes rather than restarts."""
        todo = plan.missing if count is None else plan.missing[:count]
        for at in range(0, len(todo), _EMBED_BATCH):
            part = todo[at : at + _EMBED_BATCH]
            vectors = self.embedder.encode([_embed_input(plan.chunks[i]) for i in part])
            self.cache.put_many([(plan.keys[i], vectors[j]) for j, i in enumerate(part)])
            filled = len(plan.order)
            plan.matrix[filled : filled + len(part)] = vectors
            plan.order.extend(part)
        del plan.missing[: len(todo)]
        return plan

    def _embed(
        self,
        plan: _Plan,
        progress: Callable[..., None] | None = None,
        searchable: Callable[[], None] | None = None,
    ) -> None:
        """Embed ``plan`` a batch at a time, then install it; between batches, take up
        newer chunks (``_newer``: a query's walk, or one of its own), dropping what left
        the tree from the work and the total, so progress and time left stay true.

        Progress is over the whole index, the cached chunks counted done: a resumed
        build stands where the last one stopped, not at a fresh 0 of what is left. Its
        first note says what it embeds (``embed_note``), and again when a walk changed
        that."""
        embedded = 0
        said: tuple[int, int] | None = None
        while True:
            total, left = len(plan.chunks), len(plan.missing)
            if searchable is not None and plan.order:  # cached, or a batch embedded
                searchable()
                searchable = None
            if progress is not None and left:
                note = None
                if said is None or said[1] != total:  # a new plan: what it embeds now
                    note = embed_note(left, total)
                    said = (left, total)
                progress(total - left, total, phase="embed", message=note)
            self._embed_batches(plan, _EMBED_BATCH)
            embedded += min(left, _EMBED_BATCH)
            with self._lock:
                newer = self._newer()
                if newer is not None:
                    plan = self._plan(newer, plan)
                if not self._built:
                    self._growing = plan
                if newer is None and not plan.missing:
                    self._install(plan)
                    break
        if progress is not None and embedded:
            progress(len(plan.chunks), len(plan.chunks), phase="embed")
        self.embedded_last = embedded

    def _newer(self) -> list[Chunk] | None:
        """Chunks newer than the plan being embedded (lock held): what a query's walk
        left pending, else what a walk of its own finds once one is due. A walk costs
        no more than ``_WALK_SHARE`` of the embedding's time (a large tree takes a
        second or more to walk), nor comes sooner than ``refresh_interval_s``."""
        if self._pending is not None:
            chunks, self._pending = self._pending, None
            return chunks
        now = self._clock()
        due = max(self.refresh_interval_s, self._walk_s / _WALK_SHARE)
        if now - self._last_check >= due and self._walk(now):
            return list(self.corpus.chunks)
        return None

    def _install(self, plan: _Plan) -> None:
        """Make ``plan``'s embedded chunks the index queries search (lock held): all of
        them, or during the first build those embedded so far."""
        stamp = now_timestamp()
        chunks = [plan.chunks[i] for i in plan.order]
        self._indexed_at = {c.chunk_id: self._indexed_at.get(c.chunk_id, stamp) for c in chunks}
        self._chunks, self._matrix = chunks, plan.matrix[: len(chunks)]
        self._spans = FileSpans(chunks)
        tests = np.fromiter(
            (is_test_chunk(c.rel, c.item) for c in chunks), dtype=bool, count=len(chunks)
        )
        self._tests = tests if tests.any() else None
        self._shown = (plan, len(chunks))
        if not plan.missing:
            self._installed, self._growing, self._built = plan, None, True

    def _embed_behind(self, plan: _Plan) -> None:
        """The embedding thread: ``plan`` and whatever walks find meanwhile, installed
        once all is embedded."""
        try:
            self._embed(plan)
        except Exception as exc:  # the next refresh tries again; queries go on
            sys.stderr.write(f"providers.semantic: embedding failed: {exc!r}\n")
            with self._lock:
                self._last_check = float("-inf")
        finally:
            with self._lock:
                self._embedding = False

    @property
    def embedding(self) -> bool:
        """Whether an embedding thread is at work (``refresh``)."""
        return self._embedding

    def search(
        self,
        text: str | None,
        vector: list[float] | None = None,
        anchors: Sequence[str] = (),
        *,
        about_tests: bool | None = None,
    ) -> list[SemanticHit]:
        """Best first by cosine; ties by chunk id. ``vector`` (E1) is used instead of
        ``text``. With ``anchors`` that name indexed files, those files' chunks lead
        (``_anchors``). Test chunks count for less unless the query asks about tests:
        ``about_tests``, or when it is ``None`` whether ``text`` names them (``_prior``)."""
        self.refresh()
        with self._lock:
            growing = self._growing
            if growing is not None and self._shown != (growing, len(growing.order)):
                self._install(growing)  # the first build's chunks embedded so far
            chunks, matrix, spans, tests = self._chunks, self._matrix, self._spans, self._tests
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
        if about_tests is None:
            about_tests = asks_about_tests(text)
        if tests is not None and not about_tests and self.test_prior != 1.0:
            # After the floor, before anchors apply: an anchored test file still leads
            # (its band is above every unanchored chunk), ranked within the band as any
            # other; the wire score is the lowered one, so a host ranking by score (F10)
            # sees the order given here.
            sims = lower_tests(sims, tests, self.test_prior)
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
        # The goal or the text searched may say the question is about tests.
        about_tests = asks_about_tests(query.goal, query.query_text)
        hits = self.search(
            query_text(query), query.embedding, query.anchors, about_tests=about_tests
        )
        return pack(hits, query, kind_of=lambda h: h.chunk.kind, build=self.frame)
