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
import re
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path, PurePosixPath

import bm25s
import numpy as np

from hostd.chunking import STOPWORDS, _terms, defined_names, item_name, tokenize
from hostd.protocol import ContextQuery

from .._anchors import FileSpans, anchor_paths, anchor_ranked, banded
from .._corpus import Chunk, Corpus, CorpusOptions, chunk_frame
from .._corpus_cache import (
    DEFAULT_MAX_BYTES,
    ChunkTerms,
    SavedIndex,
    load_corpus,
    save_corpus,
)
from .._frames import Packed, now_timestamp, pack, query_text, saturate
from .._prior import DEFAULT_TEST_PRIOR, asks_about_tests, is_test_chunk, lower_tests
from . import _paths
from ._paths import path_terms
from ._together import definition_runs, score_together

__all__ = ["BM25_HALF_SCORE", "FileIndex", "Hit", "tokenize"]

#: The raw BM25 score that maps to 0.5 (F1). Scores are ordinal (F10); this only
#: keeps a typical strong match in the middle of [0, 1] rather than pinned at 1.
BM25_HALF_SCORE = 12.0

#: What a chunk's cached terms were derived by (``ChunkTerms.tag``): the tokenizer's
#: source (``tokenize``, its stemmer and stop words, ``hostd.chunking._terms``) and the
#: path's terms' (``_paths``), so a changed tokenizer or path rule derives them anew.
_TERMS_TAG = hashlib.sha256(
    Path(_terms.__file__).read_bytes() + b"\0" + Path(_paths.__file__).read_bytes()
).hexdigest()[:32]

#: What built a saved BM25 matrix (``SavedIndex.tag``): ``bm25s`` at its default
#: parameters, which are its version's. A matrix another version built is built again.
_INDEX_TAG = f"bm25s {bm25s.__version__}"

#: A build says how many chunks' terms are known every this many (the host is told at
#: most five notes a second whatever the rate: ``hostd.provider.Progress``).
_PROGRESS_EVERY = 500


#: How long a query waits for a refresh of the tree (walk, re-reads, index) it finds
#: under way, counted from the refresh's start, before it answers from the index it has.
#: No deadline reaches a provider (a ``ContextQuery`` carries none), so this is chosen
#: against the host's: a leg's default ``timeout_ms`` is 2000, and the answer must still
#: be ranked, sent and verified within it on a busy machine. A small tree's refresh ends
#: well within it (answered from the fresh index, as always); a large one's rebuild
#: takes seconds, and its first query after an edit would otherwise time out and give
#: nothing.
REFRESH_WAIT_S = 0.5

#: Below this many chunks a query waits for a refresh to its end, whatever the time (with
#: no ``refresh_wait_s`` given): such a rebuild takes a fraction of the bound above, and a
#: small tree's answer after an edit is then decided by the edit, never by how busy the
#: machine is. From it on the bound applies.
WAIT_WHOLE_BELOW_CHUNKS = 5_000


#: A word of a query as it is spelled, which may be an identifier (``new0``, ``btd_adapter``).
_SPELLED_RE = re.compile(r"[A-Za-z_$][\w$]*")
#: What makes a word of a query an identifier: an underscore, a digit, a lower-case
#: letter then a capital, or capitals only, three or more (``x_y``, ``new0``,
#: ``fooBar``, ``DBG``). A plain word is not one even when some chunk defines it: "used",
#: "search", "take" name functions in a large tree, and lifting their definitions
#: pushed the passages that answer such questions down (the repository and stdlib sets).
_IDENTIFIER_RE = re.compile(r"_|\d|[a-z][A-Z]|^[A-Z]{3,}$")


def _loaded(saved: SavedIndex) -> bm25s.BM25:
    """A ``bm25s.BM25`` holding a saved matrix: the attributes its ``index`` sets (and its
    ``load`` sets from a saved directory), so it ranks as the one that was saved."""
    bm25 = bm25s.BM25()
    bm25.scores = {**saved.arrays, "num_docs": saved.docs}
    bm25.vocab_dict = saved.vocab
    bm25.unique_token_ids_set = set(saved.vocab.values())
    bm25.nonoccurrence_array = None  # only bm25l and bm25+ have one; the default has not
    return bm25


@dataclass(slots=True, frozen=True)
class Hit:
    chunk: Chunk
    #: The relevance it was ranked by: its BM25 score, a test chunk's scaled by the
    #: test prior when that applies (``_prior``), a definition's lifted above the
    #: chunks that only mention the name the query spells (``_lift_definitions``).
    raw: float
    score: float


@dataclass(slots=True, frozen=True)
class _Served:
    """What queries rank over: one generation of the index, swapped whole, so a query
    reads it without waiting on a refresh that builds the next. ``behind``: files a
    refresh found changed that it does not hold yet (the next one is being built).
    ``tests``: which chunks are tests (``is_test_chunk``), ``None`` when none
    is, so a tree without tests is ranked by BM25 alone, as it always was.
    ``defines``: each name a chunk defines (``defined_names``, its item's
    ``item_name``) and the chunks that do, by index, in order. ``runs``: each chunk's
    definition run (``_together.definition_runs``), ``None`` when no chunk is in one."""

    bm25: bm25s.BM25 | None
    chunks: list[Chunk]
    spans: FileSpans
    indexed_at: dict[str, str]
    tests: np.ndarray | None = None
    behind: int = 0
    defines: dict[str, np.ndarray] = field(default_factory=dict)
    runs: np.ndarray | None = None


class FileIndex:
    """BM25 over the chunks of a directory tree, rebuilt when the tree changes.

    Thread-safe: ``search`` and ``refresh`` may be called from worker threads. A query
    that finds the tree due a check starts the refresh in a thread of its own and
    waits for it at most ``refresh_wait_s``, and not once another query waits for its
    turn (``queries_waiting``); past that it answers from the index it has, saying how
    many changed files that index lacks (``Answer.behind``), and the next query after
    the refresh ends ranks over the new one.
    """

    def __init__(
        self,
        options: CorpusOptions,
        *,
        refresh_interval_s: float = 1.0,
        cache_path: Path | None = None,
        refresh_wait_s: float | None = None,
        test_prior: float = DEFAULT_TEST_PRIOR,
    ) -> None:
        self.corpus = Corpus(options)
        #: What a test chunk's BM25 score is scaled by for a query that does not ask
        #: about tests (``_prior``); 1 ranks by BM25 alone.
        self.test_prior = test_prior
        #: Where the chunks persist (``_corpus_cache``), so a restart re-reads only changes.
        self.cache_path = cache_path
        #: The most its cache's folder holds (``save_corpus``): the rest go, least
        #: recently used first.
        self.cache_max_bytes = DEFAULT_MAX_BYTES
        self.loaded_from_cache = False
        self.refresh_interval_s = refresh_interval_s
        self.refresh_wait_s = refresh_wait_s
        #: Held by a build or a refresh: the corpus and the figures a build left are
        #: read whole under it.
        self._lock = threading.Lock()
        #: Guards which refresh runs in the background (one at a time, ``_refreshing``)
        #: and how many queries wait for their turn (``_queued``); a query waiting for
        #: the refresh is woken by either.
        self._waits = threading.Condition()
        self._refreshing = False
        self._queued = 0
        self._refresh_started = float("-inf")
        self._served = _Served(None, [], FileSpans([]), {})
        #: Each chunk's terms, space-separated (``_terms_of``): a rebuild tokenizes only
        #: new chunks, and a restart none (they are cached with the chunks).
        self._terms = ChunkTerms(_TERMS_TAG)
        #: Chunks the last rebuild had to tokenize (its terms were neither held nor cached).
        self.tokenized_last = 0
        #: Chunks the last rebuild had to scan for the names they define (neither held nor
        #: cached: ``ChunkTerms.names``).
        self.named_last = 0
        #: Whether the last rebuild took the BM25 matrix saved in the cache, not built one.
        self.index_loaded = False
        self._last_check = float("-inf")
        #: Rebuilds so far: what the index holds changed when it moves.
        self.generation = 0
        #: What the last rebuild after the first build took (walk, reads and index).
        self.built_in_s = 0.0
        #: Called after each rebuild of a refresh, under ``lock`` (its figures are that
        #: rebuild's): the provider says what the index holds now (its ready message).
        self.on_rebuilt: Callable[[], None] | None = None

    @property
    def root(self) -> Path:
        return self.corpus.root

    @property
    def lock(self) -> threading.Lock:
        """Held by a build or a refresh: what the index holds is read whole under it."""
        return self._lock

    def refresh(self, *, force: bool = False) -> bool:
        """Re-walk the tree (at most once per ``refresh_interval_s``); rebuild on change.
        In the caller's thread, to its end (``search`` does not wait so long)."""
        with self._lock:
            now = time.monotonic()
            if not force and now - self._last_check < self.refresh_interval_s:
                return False
            self._last_check = now
            return self._refresh(now)

    def _refresh(self, started: float) -> bool:
        """Under ``lock``: re-read what changed, then rebuild; meanwhile the index served
        says how many changed files it lacks."""
        changed = self.corpus.refresh()
        if changed or self._served.bm25 is None:
            self._served = replace(self._served, behind=self.corpus.last_changed)
            self._rebuild()
            self.built_in_s = time.monotonic() - started
            if self.on_rebuilt is not None:
                self.on_rebuilt()
        return changed

    def queries_waiting(self, count: int) -> None:
        """How many queries wait for their turn behind the one running (the provider
        runs one at a time): a bounded wait for a refresh ends when one comes."""
        with self._waits:
            self._queued = count
            self._waits.notify_all()

    def _catch_up(self) -> None:
        """Start a background refresh when the tree is due a check, and wait for the
        refresh under way: to its end for an index under ``WAIT_WHOLE_BELOW_CHUNKS``
        chunks (with no ``refresh_wait_s``), else until ``refresh_wait_s`` (by default
        ``REFRESH_WAIT_S``) after it began, and never while another query waits for its
        turn: answering from the index it has, this one does not hold them all up."""
        with self._waits:
            now = time.monotonic()
            if not self._refreshing and now - self._last_check >= self.refresh_interval_s:
                self._last_check = now
                self._refreshing = True
                self._refresh_started = now
                threading.Thread(
                    target=self._refresh_behind, name="files-refresh", daemon=True
                ).start()
            bound = self.refresh_wait_s
            if bound is None and len(self._served.chunks) < WAIT_WHOLE_BELOW_CHUNKS:
                # A small tree's rebuild is quick: its answer after an edit is the
                # rebuilt index's, whatever is queued.
                self._waits.wait_for(lambda: not self._refreshing)
                return
            wait = self._refresh_started + (REFRESH_WAIT_S if bound is None else bound) - now
            self._waits.wait_for(
                lambda: not self._refreshing or self._queued > 0,
                None if wait == float("inf") else max(wait, 0.0),
            )

    def _refresh_behind(self) -> None:
        try:
            with self._lock:
                self._refresh(self._refresh_started)
        finally:
            with self._waits:
                self._refreshing = False
                self._waits.notify_all()

    def build(self, progress: Callable[..., None] | None = None) -> None:
        """The first build: adopt the cached chunks and their terms, re-read what changed
        on disk, index, and save the cache again when anything changed. ``progress(done,
        total, phase=...)`` is told how far it got: ``read files`` (files read of those
        found) then ``index`` (chunks whose search terms are known, of all) for a build
        from the files, ``load`` throughout for one from the cache (what changed since is
        read in it), so a user is not told an index is built when it is loaded, nor that
        one is loaded when there is no cache to load; and, on a large tree, sees figures
        move in a phase that takes as long as the reading."""
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
            self._rebuild(progress, "load" if self.loaded_from_cache else "index")
            self._last_check = time.monotonic()
            # ``modified``, not ``reads``: a cache that held a file now refused (a ``.env``
            # written by an older version) is rewritten without it though nothing was read.
            # A chunk tokenized anew (a changed tokenizer) is saved with its terms too, and
            # a matrix built anew (an older cache had none) with them, and the names of
            # chunks scanned anew (an older cache did not say them).
            stale = (
                self.corpus.modified
                or self.tokenized_last > 0
                or self.named_last > 0
                or not self.loaded_from_cache
                or (self.chunk_count > 0 and not self.index_loaded)
            )
            if self.cache_path is not None and stale:
                try:
                    save_corpus(
                        self.corpus, self.cache_path, self._terms, max_bytes=self.cache_max_bytes
                    )
                except OSError:  # a cache that cannot be written costs the next start only
                    pass

    def _rebuild(self, progress: Callable[..., None] | None = None, phase: str = "index") -> None:
        """Index the corpus's chunks: with the matrix saved in the cache when it was built
        over exactly these, else anew. ``progress(done, total, phase=phase)`` is told of
        the chunks whose terms are known (split now, or the cache's), every
        ``_PROGRESS_EVERY``: on a large tree splitting them takes as long as reading."""
        chunks = list(self.corpus.chunks)
        stamp = now_timestamp()
        old = self._served.indexed_at
        indexed_at = {c.chunk_id: old.get(c.chunk_id, stamp) for c in chunks}
        held, terms = self._terms.by_chunk, {}
        total = len(chunks)
        if progress is not None:
            progress(0, total, phase=phase)
        for n, c in enumerate(chunks, 1):
            key = (c.rel, c.digest)
            if key not in terms:
                cached = held.get(key)
                terms[key] = cached if cached is not None else self._terms_of(c)
            if progress is not None and (n % _PROGRESS_EVERY == 0 or n == total):
                progress(n, total, phase=phase)
        # Only the chunks indexed now: a file gone or changed leaves no terms behind.
        self.tokenized_last = sum(1 for key in terms if key not in held)
        self._terms.by_chunk = terms
        bm25: bm25s.BM25 | None = None
        # A saved matrix serves only the chunks it was built over: those the cache held,
        # while none was dropped on adoption nor changed by a refresh (``modified``).
        saved = self._terms.index
        self.index_loaded = (
            saved is not None
            and saved.tag == _INDEX_TAG
            and not self.corpus.modified
            and saved.docs == len(chunks)
        )
        if saved is not None and self.index_loaded:
            bm25 = _loaded(saved)
        else:
            saved = None
        if bm25 is None and chunks:
            bm25 = bm25s.BM25()
            # Each term mapped to its column as it is split: bm25s given strings would
            # collect them in a set, then map each again (and hold every split string).
            vocab: dict[str, int] = {}
            ids = [
                [vocab.setdefault(t, len(vocab)) for t in terms[c.rel, c.digest].split()]
                for c in chunks
            ]
            bm25.index((ids, vocab), show_progress=False)
            arrays = {name: bm25.scores[name] for name in ("data", "indices", "indptr")}
            saved = SavedIndex(_INDEX_TAG, len(chunks), bm25.vocab_dict, arrays)
        self._terms.index = saved  # saved with the chunks' terms (``build``)
        tests = np.fromiter(
            (is_test_chunk(c.rel, c.item) for c in chunks), dtype=bool, count=len(chunks)
        )
        runs = definition_runs(chunks)
        self._served = _Served(
            bm25,
            chunks,
            FileSpans(chunks),
            indexed_at,
            tests if tests.any() else None,
            defines=self._definitions(chunks),
            runs=runs if bool((runs >= 0).any()) else None,
        )
        self.generation += 1

    def _definitions(self, chunks: list[Chunk]) -> dict[str, np.ndarray]:
        """Each name the chunks define and which chunks do: the definitions that open in
        a chunk's text (held, or cached with the chunks: ``ChunkTerms.names``, else
        scanned now) and the one its first line sits in (its item). Only the chunks
        indexed now are remembered, as their terms are."""
        held = self._terms.names
        names_of: dict[tuple[str, str], tuple[str, ...]] = {}
        defines: dict[str, list[int]] = {}
        scanned = 0
        for i, c in enumerate(chunks):
            key = (c.rel, c.digest)
            names = names_of.get(key)
            if names is None:
                names = held.get(key)
                if names is None:
                    names = tuple(defined_names(PurePosixPath(c.rel).suffix, c.text))
                    scanned += 1
                names_of[key] = names
            own = set(names)
            # A YAML key is an item but defines nothing (``item_name``).
            if c.item is not None and (name := item_name(c.item, PurePosixPath(c.rel).suffix)):
                own.add(name)
            for name in own:
                defines.setdefault(name, []).append(i)
        self.named_last = scanned
        self._terms.names = names_of
        return {name: np.asarray(at, dtype=np.int64) for name, at in defines.items()}

    @staticmethod
    def _terms_of(chunk: Chunk) -> str:
        # Prefix each chunk with its path's terms so a file's name is searchable too (a
        # well-known one by its words: ``_paths``). A term is a word's characters, never
        # a space, so the string splits back into the terms.
        return " ".join(path_terms(chunk.rel) + tokenize(chunk.text))

    def search(self, text: str, *, limit: int = 200, anchors: Sequence[str] = ()) -> list[Hit]:
        """Best first; ties broken by chunk id so equal inputs rank identically. With
        ``anchors`` that name indexed files, those files' chunks lead (``_anchors``).
        Test chunks count for less unless ``text`` names tests (``_prior``)."""
        self._catch_up()
        return self._ranked(self._served, text, limit, anchors, asks_about_tests(text))

    def _ranked(
        self,
        served: _Served,
        text: str,
        limit: int,
        anchors: Sequence[str],
        about_tests: bool,
    ) -> list[Hit]:
        bm25, chunks, spans = served.bm25, served.chunks, served.spans
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
        lowered = None if about_tests or self.test_prior == 1.0 else served.tests
        if lowered is not None:
            # Before anchors apply: an anchored test file still leads (its band is above
            # every unanchored chunk), ranked within the band as any other.
            scores = lower_tests(scores, lowered, self.test_prior)
        if tokens and served.defines:
            scores = _lift_definitions(bm25, chunks, served.defines, text, scores)
        if tokens and served.runs is not None:
            # A definition's chunks scored together: its best one ranks for the whole.
            scale = None if lowered is None else np.where(lowered, self.test_prior, 1.0)
            scores = score_together(bm25, tokens, served.runs, scores, scale)
        matched = np.flatnonzero(scores > 0)
        if 0 < limit < len(matched) and not anchored.chunks:
            # Only chunks that score at least the limit-th best can be in the first
            # ``limit``: sorting those alone (ties at the cut included, so the chunk-id
            # order is the same) keeps what the whole sort would, for a fraction of its
            # cost (a common word matches half of a large tree's chunks).
            best = scores[matched]
            cut = np.partition(best, len(matched) - limit)[len(matched) - limit]
            matched = matched[best >= cut]
        order = [int(i) for i in matched]
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

    def answer(self, query: ContextQuery) -> Packed:
        """The frames for one query under its limits (B1, B4, Q1), its anchors' first,
        from one generation of the index: the one it found, or the one a refresh it
        waited for built, and how many changed files that one lacks (``behind``)."""
        if query.max_frames == 0:
            return Packed([], False, 0)
        self._catch_up()
        served = self._served
        # The goal or the text searched may say the question is about tests.
        about_tests = asks_about_tests(query.goal, query.query_text)
        hits = self._ranked(served, query_text(query), 200, query.anchors, about_tests)
        packed = pack(
            hits,
            query,
            kind_of=lambda h: h.chunk.kind,
            build=lambda h: chunk_frame(h.chunk, h.score, served.indexed_at.get(h.chunk.chunk_id)),
        )
        return replace(packed, behind=served.behind) if served.behind else packed

    @property
    def chunk_count(self) -> int:
        return len(self._served.chunks)


def _lift_definitions(
    bm25: bm25s.BM25,
    chunks: list[Chunk],
    defines: dict[str, np.ndarray],
    text: str,
    scores: np.ndarray,
) -> np.ndarray:
    """``scores`` with, for each identifier ``text`` spells exactly (``_IDENTIFIER_RE``)
    that a chunk defines, the best-scoring chunk defining it lifted above every chunk
    that only mentions it: the best score of those is added to its own. One chunk per
    name (a class's definition runs over many chunks, which would otherwise all rise
    over the passages that explain it), and only a chunk that matches the name, so a
    query naming no definition ranks as before. Every lift is measured on the scores
    before any, so the names' order does not matter."""
    spelled = sorted(
        {
            word
            for word in _SPELLED_RE.findall(text)
            if word in defines and _IDENTIFIER_RE.search(word) and word.lower() not in STOPWORDS
        }
    )
    lifts = []
    for name in spelled:
        terms = tokenize(name)  # its first term is the whole word, as a chunk's text gives it
        if not terms or terms[0] not in bm25.vocab_dict:
            continue
        mentions = np.asarray(bm25.get_scores(terms[:1])) > 0
        defining = defines[name][mentions[defines[name]]]
        if defining.size == 0:
            continue
        mentions[defining] = False  # those that only mention it
        best = float(scores[mentions].max()) if mentions.any() else 0.0
        if best > 0:
            # The first of the best, as the ranking breaks ties (by chunk id).
            top = min(defining.tolist(), key=lambda i: (-scores[i], chunks[i].chunk_id))
            lifts.append((top, best))
    if not lifts:
        return scores
    lifted = scores.copy()
    for top, best in lifts:
        lifted[top] += best
    return lifted
