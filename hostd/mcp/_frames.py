"""What an MCP server served, as evidence: documents cut into pieces, scored, packed.

Pure code over plain values: no SDK session, no I/O, no clock. An MCP server has no
notion of relevance, budgets or regions, so the binding supplies all three, the way
a provider would:

- **cut** (``cut``): every served text (a resource's contents, a tool result block)
  is cut by the chunker the bundled providers use (``hostd.chunking``: runs of whole
  lines; a ``file://`` resource as the ``files`` provider cuts that file; any other
  text by its content alone, wherever it came from, into its records when it is a
  sequence of them, markdown sections and the elements of indented JSON included, so
  each ``git log`` entry stands alone with its paragraphs, else at its blank lines;
  a line longer than a piece may hold into parts within it). Each piece keeps its
  range (``L10-40``), ends at its last line of text, and carries the digest of exactly
  its bytes (F5, F17), so the same text from a tool and a resource is one digest, and
  a label drawn from its content or its source: the commit ids or file paths it
  names, the record's header, the resource's title with the heading or range, and the
  tool's name only when nothing better is there (F3), numbered ``(2/3)`` in text order
  where pieces of one text share it, and in the result's order where the text items of
  one tool result would (``notes (2/3)``: its second item). A piece of a text with no
  URI (a tool's answer) is named by what it holds, not where: a tool answers anew each
  time, and the same record at other lines is the same frame (D2, feedback by FrameId).
  A piece that holds nothing (``_empty``: an empty JSON answer, ``No matches found``)
  is none;
- **score** (``rank``): BM25 of each piece against the query text, mapped into
  [0, 1) (F1; provider-local and ordinal, F10), by the terms the ``files`` provider
  searches for (``hostd.chunking.tokenize``: no stop words, an identifier whole and
  by its snake_case and camelCase parts), less the words a question is worded with
  (``QUESTION_WORDS``: "we", "use", "may", "work"), counted in a piece as ``tokenize`` counts
  them; a piece that holds only terms most pieces hold is no match when another holds
  a rarer one (``_Bm25.fit``). Only the query's terms are counted: one regex pass per
  piece finds the words that hold one, and only those are tokenized; a full index
  (``bm25s``, as the ``files`` provider keeps one) would build a vocabulary of every
  word served to answer one query, and could not stop halfway;
- **pack**: best first (ties by source, then position in its text), under
  ``max_frames`` (B4) and ``max_tokens`` (B1) with the canonical ``token_cost`` (B3),
  of the configured kind only (Q1); ``truncated`` when something eligible was left
  out. Pieces that match no query term are left out, but a tool's answer nothing of
  which matches is offered as its head, its first piece, when that fits (``rank``
  says why); a matching piece over the whole ask is offered as its best part that
  fits (``_part``).

``rank`` takes a ``check`` callable, called between documents: the binding runs it in
a worker thread and stops it there (``Abandoned``) when its leg is cancelled.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import PurePosixPath
from typing import NamedTuple
from urllib.parse import unquote, urlsplit

import numpy as np

from hostd.chunking import (
    DEFAULT_MIN_CHUNK_TOKENS,
    MODEL_WINDOW,
    QUESTION_WORDS,
    Sections,
    TextChunk,
    chunk_text,
    estimate_pieces,
    file_sections,
    split_lines,
    surface_forms,
    tokenize,
    with_item,
)
from hostd.protocol import (
    ContextFrame,
    ContextQuery,
    ContextQueryResult,
    Provenance,
    canonical_token_cost,
    sha256_digest,
)

__all__ = [
    "BM25_HALF_SCORE",
    "Abandoned",
    "Cut",
    "Document",
    "Piece",
    "cut",
    "frames_for",
    "piece_key",
    "rank",
    "render_arguments",
    "takes_goal",
]

#: The raw BM25 score that maps to 0.5 (F1): a strong match sits mid-range, not at 1.
BM25_HALF_SCORE = 8.0
#: BM25's term-frequency saturation and length normalisation (the usual values).
_K1, _B = 1.5, 0.75
#: Below this many word pieces a piece is merged with its neighbour (a file: as the
#: files provider merges). A short paragraph is often under the files provider's 48
#: and is evidence of its own: only fragments merge (records never do).
_MIN_PIECE_TOKENS = 16
#: Word pieces a record (one ``git log`` entry with its message) may take in one piece:
#: the most any chunk may, the model's window. Nothing an MCP server serves is embedded
#: (outside files), and a commit cut from its message is two half-answers.
_RECORD_TOKENS = MODEL_WINDOW
#: The fewest pieces among which a term most of them hold is no match on its own
#: (``_Bm25.fit``): of three short notes, the word two share is their subject (notes on
#: the cache asked about its eviction, one saying "evicts"), not what every section of
#: a handbook says.
_COMMON_FROM = 4
#: The terms ``tokenize`` makes of the words a question is worded with: not searched for
#: in a section ("how does shell completion work" does not match a section on the
#: working directory, "may" one saying releases may ship any day).
_QUESTION_TERMS = frozenset(t for w in QUESTION_WORDS for t in tokenize(w))
#: A label longer than this is cut: it is quoted in the prompt beside every frame.
_MAX_LABEL = 96

#: One short line that says a search found nothing (``No matches found``, ``0 results
#: for 'x'``, ``Nothing found.``): an empty answer in words, whatever terms it echoes.
_NOTHING_RE = re.compile(
    r"(?:no|0|zero)\s+(?:matching\s+|relevant\s+)?"
    r"(?:results?|matches|hits|entries|items|records|documents|files|nodes|entities)"
    r"(?:\s+(?:were\s+)?found)?(?:\s+for\s+[^\n]{0,80})?[.!]?"
    r"|nothing\s+(?:was\s+)?found[.!]?",
    re.IGNORECASE,
)
#: Where a line of prose may be cut into parts: after a sentence's end and its spaces.
_SENTENCE_END_RE = re.compile(r"[.!?][\"')\]]*[ \t]+")
_COMMIT_RE = re.compile(r"^[ \t]*commit:?[ \t]+'?([0-9a-f]{7,64})\b", re.IGNORECASE | re.MULTILINE)
_DIFF_PATH_RE = re.compile(r"^(?:diff --git a/(\S+) b/|\+\+\+ b/(\S+))", re.MULTILINE)
# ``path/to/file.py:12: …`` (grep) or ``notes.md: …``: a file named at a line's start.
_PATH_LINE_RE = re.compile(
    r"^([\w.-]+(?:/[\w.-]+)*\.[A-Za-z0-9]{1,8}):(?:\d+:)?[ \t]", re.MULTILINE
)


class Abandoned(Exception):
    """Raised by a ``check`` callable: the leg this work was for is gone (cancelled)."""


@dataclass(slots=True, frozen=True)
class Document:
    """One text an MCP server served: a resource's contents or a tool result block."""

    #: ``resources/read`` or ``tools/call:<name>``: how it was obtained.
    method: str
    text: str
    uri: str | None = None
    #: The resource's title (else its name), as the server listed it.
    title: str | None = None
    #: A tool's answer chosen for this very query (its arguments carry the goal, or the
    #: config says ``always``): its head is offered even when no query term matches.
    always: bool = False
    #: ``(k, n)``: the k-th of the n text items of one tool result, which share the
    #: tool's name as their label's source and are told apart by their place in it.
    item: tuple[int, int] | None = None

    @property
    def tool(self) -> str | None:
        kind, _, name = self.method.partition(":")
        return name if kind == "tools/call" and name else None

    @property
    def hollow(self) -> bool:
        """Whether its text as a whole holds nothing to read (``_empty``): an empty
        answer, not one that matched nothing."""
        return _empty(self.text)


class Piece(NamedTuple):
    """One chunk of a document: the text of one frame, its range and its label."""

    method: str
    uri: str | None
    start: int
    end: int
    text: str
    digest: str  # sha256 of exactly the text's bytes (F5, F17)
    label: str
    always: bool
    cost: int  # canonical token cost (B3)
    #: The frame id: stable across calls (``piece_key``); pieces of equal text from one
    #: tool share it (one piece of evidence, as D2 would merge them anyway).
    key: str
    #: A code file resource's piece: the definitions it sits in (``TextChunk.item``).
    item: str | None = None

    @property
    def range(self) -> str:
        return f"L{self.start}-{self.end}"

    @property
    def title(self) -> str:
        """Its label, and the item it sits in as the ``files`` provider titles it."""
        return with_item(self.label, self.item)


@dataclass(slots=True, frozen=True)
class Cut:
    """One document's pieces, column by column.

    Tuples of plain values, not an object per piece, on purpose: a large server is
    hundreds of thousands of pieces, and the collector walks every object it tracks
    on each full pass while holding the interpreter lock (half a second a pass at
    16 MiB served, as long a stall of the event loop). A tuple of strings and numbers
    is tracked only until its first pass; a ``Cut`` is a handful of objects.
    """

    method: str
    uri: str | None
    always: bool
    #: Its place among the text items of one tool result (``Document.item``'s k, 0 when
    #: it is the only one): the text an unmatched answer's head is taken from (``rank``).
    place: int
    starts: tuple[int, ...]
    ends: tuple[int, ...]
    texts: tuple[str, ...]
    digests: tuple[str, ...]
    labels: tuple[str, ...]
    costs: tuple[int, ...]
    keys: tuple[str, ...]
    items: tuple[str | None, ...]

    def __len__(self) -> int:
        return len(self.keys)

    def __getitem__(self, i: int) -> Piece:
        return Piece(
            self.method,
            self.uri,
            self.starts[i],
            self.ends[i],
            self.texts[i],
            self.digests[i],
            self.labels[i],
            self.always,
            self.costs[i],
            self.keys[i],
            self.items[i],
        )

    def __iter__(self) -> Iterator[Piece]:
        return (self[i] for i in range(len(self)))

    @property
    def size(self) -> int:
        """Bytes held, about (for the read cache's bound)."""
        held = sum(map(len, self.texts)) + sum(map(len, self.labels))
        return held + len(self) * 160 + len(self.uri or "") + 256


def piece_key(method: str, uri: str | None, range_: str | None, digest: str) -> str:
    """A digest of how, where and what: the same text at the same place is the same id.

    A text with a URI (a resource) is a place: its pieces are named with their range.
    A tool's answer (no URI) is not: it is made anew for each call and its lines shift
    (a new commit pushes every ``git log`` entry down), so its pieces are named by
    method and content alone (``range_`` None) and a record keeps its id from call to
    call, as dedup (D2), session reuse and feedback by FrameId need."""
    basis = f"{method}\n{uri or ''}\n{range_ or ''}\n{digest}"
    return method[:1] + ":" + hashlib.sha256(basis.encode()).hexdigest()[:24]


def _sections(doc: Document) -> Sections:
    """A file as the files provider cuts it; any other text by its content alone, never
    by where it came from: the same text from a tool and from a resource is the same
    pieces (one digest each, so dedup, D2, quotes it once). Markdown is records too: a
    heading is a record header."""
    if doc.uri and doc.uri.startswith("file:"):
        return file_sections(unquote(urlsplit(doc.uri).path))
    return "records"  # at its blank lines when it has none


def _suffix(doc: Document) -> str:
    """A ``file://`` resource's suffix (``.rs``), as ``chunk_file`` reads a file's."""
    return PurePosixPath(unquote(urlsplit(doc.uri or "").path)).suffix


def _unique(found: Iterable[str]) -> list[str]:
    return list(dict.fromkeys(f for f in found if f))


def _listed(what: str, names: Sequence[str]) -> str:
    shown = ", ".join(names[:3])
    more = f" +{len(names) - 3}" if len(names) > 3 else ""
    return f"{what}{'s' if len(names) > 1 else ''} {shown}{more}" if what else shown + more


def _label(doc: Document, chunk: TextChunk, many: bool) -> str:
    """F3: what the frame is, in a few words, from its content or its source. A record's
    label is its first piece's (``cut`` numbers the parts of one cut within itself)."""
    source = doc.title or doc.uri
    if doc.tool is not None and doc.title is None:
        # A tool's output has no name of its own: what it is about is in its text. A
        # record whose header names a commit is that commit, whatever its message cites.
        named = _COMMIT_RE.findall(chunk.heading or "") if chunk.record is not None else []
        commits = _unique(c[:7] for c in named or _COMMIT_RE.findall(chunk.text))
        if commits:
            return _listed("commit", commits)
        paths = _unique(a or b for a, b in _DIFF_PATH_RE.findall(chunk.text))
        paths = paths or _unique(_PATH_LINE_RE.findall(chunk.text))
        if paths:
            return _listed("", paths)
        source = doc.uri or doc.tool
        if doc.uri is None and doc.item is not None:  # ``notes (2/3)``: its place, not rank
            source = f"{doc.tool} ({doc.item[0]}/{doc.item[1]})"
    if chunk.heading:
        return f"{source} § {chunk.heading}" if source else chunk.heading
    base = source or doc.tool or "mcp"
    return f"{base} {chunk.range}" if many else base


def _clip(label: str, suffix: str = "") -> str:
    label = " ".join(label.split())  # one line: it is an attribute in the prompt's fence
    room = _MAX_LABEL - len(suffix)
    return (label if len(label) <= room else label[: room - 1] + "…") + suffix


def _labels(doc: Document, chunks: Sequence[TextChunk]) -> list[str]:
    """Each chunk's label; the parts of one record share the record's. Chunks of one
    text that share a label (a record's parts, the pieces of one markdown section, the
    parts of one long line) are numbered in text order, ``(2/3)``: each is cited by a
    label of its own that says where it sits, never by a ``#2`` handed out in rank
    order. A record of a tool's answer that shows a diff, whole or a part, also names
    the files it shows (``commit 1a2b3c4: src/cache.py``, ``commit 1a2b3c4 (2/3):
    src/cache.py``)."""
    many = len(chunks) > 1
    named: dict[int, str] = {}
    bases: list[str] = []
    for c in chunks:
        if c.record is None:
            bases.append(_label(doc, c, many))
            continue
        if c.record not in named:
            named[c.record] = _label(doc, c, many)
        bases.append(named[c.record])
    shared = Counter(bases)
    seen: Counter[str] = Counter()
    labels: list[str] = []
    for c, base in zip(chunks, bases, strict=True):
        n = shared[base]
        suffix = ""
        if n > 1:
            seen[base] += 1
            suffix = f" ({seen[base]}/{n})"
        if c.record is not None and doc.tool is not None and doc.title is None:
            # Whole or a part: a commit's diff (git_show) is told from its log entry
            # (git_log), which has the same label otherwise and would be cited "#2".
            paths = _unique(a or b for a, b in _DIFF_PATH_RE.findall(c.text))
            suffix += f": {_listed('', paths)}" if paths else ""
        labels.append(_clip(base, suffix) or "mcp")
    return labels


def _captions(chunks: list[TextChunk]) -> list[TextChunk]:
    """Without the text before the first record when it is one line ending in a colon
    (``Commit history:``, ``Found 4 results:``): it announces the records, it is not
    evidence of its own."""
    before = [c for c in chunks if c.record is None]
    if len(before) != 1 or len(chunks) == 1:
        return chunks
    (caption,) = before
    if caption.start != caption.end or not caption.text.rstrip().endswith(":"):
        return chunks
    return [c for c in chunks if c.record is not None]


def _hollow(value: object) -> bool:
    if isinstance(value, dict):
        return all(_hollow(v) for v in value.values())
    if isinstance(value, list):
        return all(_hollow(v) for v in value)
    # ``False == 0`` in Python: one test covers null, "", false, 0 and 0.0.
    return value is None or value == "" or value == 0


def _empty(text: str) -> bool:
    """Whether a piece holds nothing to read: JSON whose every leaf is ``null``, ``""``,
    ``false`` or zero, or an empty container (``{"entities": [], "relations": []}``,
    ``{"total": 0, "results": []}``: a count of nothing is nothing; ``{"hour": 5}`` is
    something), or one line saying a search found nothing. A server answers so when it
    has nothing for this query; quoted, it would only take budget."""
    stripped = text.strip()
    if _NOTHING_RE.fullmatch(stripped):
        return True
    if stripped[:1] not in ("{", "[") and stripped not in ("null", '""'):
        return False
    try:  # a record of a list ends with its comma
        return _hollow(json.loads(stripped.removesuffix(",")))
    except (ValueError, RecursionError):
        return False


def cut(doc: Document) -> Cut:
    """The pieces of one document, in text order (none for a blank one); a piece that
    holds nothing (``_empty``) is no piece."""
    name = doc.title or doc.uri or doc.tool or "mcp"
    is_file = doc.uri is not None and doc.uri.startswith("file:")
    # A file is cut by the model's count, as the files and semantic providers cut it
    # (one region, one digest: D2 merges them). Nothing else an MCP server serves is
    # embedded, so the estimate sizes it: a tenth of the model tokenizer's cost.
    chunks = chunk_text(
        # A lone surrogate (a JSON ``\\ud800`` escape) cannot be UTF-8: it becomes "?",
        # and the piece's text, digest and cost are those of the bytes served on.
        doc.text.encode("utf-8", "replace"),
        name,
        sections=_sections(doc),
        min_tokens=DEFAULT_MIN_CHUNK_TOKENS if is_file else _MIN_PIECE_TOKENS,
        counter=None if is_file else estimate_pieces,
        record_tokens=_RECORD_TOKENS,
        # A file's pieces are whole lines, as its range addresses them (F5, F17).
        split_long_lines=not is_file,
        # A file's code pieces name the item they sit in, as the files provider's do; a
        # tool's text is cut by its content alone, whatever language it quotes.
        code_suffix=_suffix(doc) if is_file else None,
    )
    chunks = [c for c in _captions(chunks) if not _empty(c.text)]
    # A tool's answer has no URI: its pieces are named by content, not range (piece_key).
    placed = doc.uri is not None
    return Cut(
        method=doc.method,
        uri=doc.uri,
        always=doc.always,
        place=doc.item[0] if doc.item is not None else 0,
        starts=tuple(c.start for c in chunks),
        ends=tuple(c.end for c in chunks),
        texts=tuple(c.text for c in chunks),
        digests=tuple(c.digest for c in chunks),
        labels=tuple(_labels(doc, chunks)),
        costs=tuple(canonical_token_cost(c.text) for c in chunks),
        keys=tuple(
            piece_key(doc.method, doc.uri, c.range if placed else None, c.digest) for c in chunks
        ),
        items=tuple(c.item for c in chunks),
    )


def _frame(piece: Piece, score: float, kind: str, server: str) -> ContextFrame:
    provenance = [
        Provenance(type="mcp", uri=piece.uri, range=piece.range, method=piece.method, by=server)
    ]
    if piece.uri is not None and piece.uri.startswith("file:"):
        # F5: the host re-reads this range under its trusted roots and compares digests.
        provenance.append(
            Provenance(type="file", uri=piece.uri, range=piece.range, digest=piece.digest)
        )
    return ContextFrame(
        id=piece.key,
        kind=kind,
        title=piece.title,
        content=piece.text,
        content_digest=piece.digest,
        uri=piece.uri,
        score=score,
        token_cost=piece.cost,
        canonical_token_cost=piece.cost,
        provenance=provenance,
        citation_label=piece.label,
    )


def _never() -> None:
    return None


class _Bm25:
    """BM25 of one query over a set of pieces: the query's terms as the ``files``
    provider's tokenizer makes them (``tokenize``: stop words out, so a piece that
    holds only "how", "does" and "the" of the goal matches nothing), counted in a piece
    as ``tokenize`` counts them, and the statistics (IDF, mean length) a part of a piece
    is scored by too. A piece's length is its characters, which BM25 only uses as a
    ratio to the mean."""

    def __init__(self, query: str) -> None:
        self.terms = sorted(set(tokenize(query)) - _QUESTION_TERMS)
        self._index = {t: k for k, t in enumerate(self.terms)}
        forms = sorted({f for t in self.terms for f in surface_forms(t)}, key=len, reverse=True)
        # A run of word characters (``\w``: letters, digits, ``_``) that holds one of the
        # words a query term is made of (``surface_forms``) anywhere in it. ``tokenize``
        # never makes a term across such runs, so the terms of a text are those of its
        # runs, and a run that holds none of these words holds none of the query's
        # terms: only the runs found are tokenized, one regex pass finds them.
        words = "|".join(re.escape(f) for f in forms)
        self._runs = re.compile(r"(?<!\w)\w*?(?:" + words + r")\w*").finditer
        #: Each run tokenized, by its text: the query terms it holds (as their places in
        #: ``terms``). Identifiers recur across the pieces of one answer; a query with a
        #: short term (``x``, ``c``) finds most runs, and tokenizes each once.
        self._held: dict[str, list[int]] = {}
        #: Which terms are numbers (``fit``: a number is weak evidence).
        self._numbers = np.asarray([t.isdigit() for t in self.terms], dtype=bool)
        self.idf = np.zeros(len(self.terms))
        self.mean_length = 1.0

    def counts(self, text: str) -> list[int]:
        """How often each query term is in ``text``, as ``tokenize`` counts it: a word,
        an identifier whole, and the snake_case and camelCase parts of an identifier
        (``prefetch_related(``: prefetch_related, prefetch, related; ``getUserName``:
        getusername, get, user, name), never letters inside a longer part."""
        row = [0] * len(self.terms)
        lower = text.lower()
        if len(lower) != len(text):  # a letter whose lower case is longer (``İ``): rare
            for k in self._of(tokenize(text)):
                row[k] += 1
            return row
        held = self._held
        for m in self._runs(lower):  # at ``text``'s offsets: no letter changed its length
            run = text[m.start() : m.end()]
            found = held.get(run)
            if found is None:
                found = held[run] = self._of(tokenize(run))
            for k in found:
                row[k] += 1
        return row

    def _of(self, terms: Iterable[str]) -> list[int]:
        """The places in ``self.terms`` of those of ``terms`` that the query holds."""
        index = self._index
        return [index[t] for t in terms if t in index]

    def fit(self, tf: np.ndarray, lengths: np.ndarray) -> np.ndarray:
        """Every piece's score in [0, 1) from its term counts (a row per piece); keeps
        the IDF and mean length these pieces give for ``score``.

        A term most pieces hold (more than half, of ``_COMMON_FROM`` or more) tells none
        of them apart: when some piece holds a rarer word of the query, a piece that
        holds only such common terms is no match (score 0). Asked about "click shell
        completion", a click handbook's sections all but two say "click", and only the
        one on shell completion answers. When no piece holds a rarer word, the common
        ones are all the query has, and they match as any term does (a design document
        asked about its billing, which five of its six sections are about; "the last
        5 commits to the tutorial", five of seven commits being to the tutorial).

        A number (all digits) is weak evidence: in a question it is more often a count
        ("the last 5 commits", "top 3") than what the answer is about, and digits
        recur in dates, versions and sizes. So a rarer number never makes the pieces
        without it no match, and a piece that holds of the query's words only those
        every piece holds is scored as if it held none of the numbers, and never above
        a piece that holds a word of the query some piece lacks: "5" in a commit's
        date does not put it above the commits to the tutorial. When no piece holds
        such a word, the numbers tell the pieces apart as any term does ("issue
        1234" over a list whose every item says "issue")."""
        held = tf > 0
        df = held.sum(axis=0)
        n = len(tf)
        self.idf = np.log1p((n - df + 0.5) / (df + 0.5))
        self.mean_length = max(float(lengths.mean()), 1.0)
        scores = self.score(tf, lengths)
        words = ~self._numbers
        if n >= _COMMON_FROM:
            rare = held[:, (2 * df <= n) & words].any(axis=1)
            if rare.any():
                scores = np.where(rare, scores, 0.0)
        worded = held[:, (df < n) & words].any(axis=1)
        numbered = held[:, self._numbers].any(axis=1) & ~worded
        if worded.any() and numbered.any():
            plain = self.score(np.where(self._numbers, 0.0, tf), lengths)
            floor = float(scores[worded].min())
            scores = np.where(numbered, np.minimum(plain, floor), scores)
        return scores

    def score(self, tf: np.ndarray, lengths: np.ndarray) -> np.ndarray:
        norm = _K1 * (1 - _B + _B * lengths / self.mean_length)
        raw = ((tf * (_K1 + 1)) / (tf + norm[:, None]) * self.idf).sum(axis=1)
        mapped: np.ndarray = np.where(raw > 0, raw / (raw + BM25_HALF_SCORE), 0.0)
        return mapped

    def matched(self, tf: np.ndarray) -> float:
        """What a run of text holds of the query (its term counts), without BM25's
        length normalisation: more of the text never holds less."""
        return float(((tf * (_K1 + 1)) / (tf + _K1) * self.idf).sum())


def _bm25(cuts: Sequence[Cut], bm25: _Bm25, check: Callable[[], None]) -> np.ndarray:
    """Every piece's score in [0, 1), in order."""
    n = sum(len(c) for c in cuts)
    if not n or not bm25.terms:
        for _ in cuts:
            check()
        return np.zeros(n)
    lengths: list[int] = []
    counts: list[int] = []  # flat, a row of len(terms) per piece: one list, not one each
    for c in cuts:
        check()  # between documents: a cancelled leg stops here
        # Label and URI are searchable too: they often say what the text is about.
        for label, text in zip(c.labels, c.texts, strict=True):
            hay = f"{label} {c.uri or ''} {text}"
            lengths.append(len(hay))
            counts.extend(bm25.counts(hay))
    tf = np.asarray(counts, dtype=np.float64).reshape(n, len(bm25.terms))
    return bm25.fit(tf, np.asarray(lengths, dtype=np.float64))


def _units(piece: Piece) -> list[tuple[int, str]]:
    """What a part of ``piece`` is made of, with the line (from 0) each is on: its
    lines, and outside a file each line's sentences (a file's range addresses whole
    lines, F17)."""
    units: list[tuple[int, str]] = []
    whole_lines = piece.uri is not None and piece.uri.startswith("file:")
    for n, raw in enumerate(split_lines(piece.text.encode("utf-8"))):
        line = raw.decode("utf-8")
        last = 0
        if not whole_lines:
            for end in _SENTENCE_END_RE.finditer(line):
                units.append((n, line[last : end.end()]))
                last = end.end()
        if last < len(line):
            units.append((n, line[last:]))
    return units


def _part(piece: Piece, bm25: _Bm25, room: int) -> tuple[Piece, float] | None:
    """The part of ``piece`` that holds the most of the query within ``room`` tokens:
    a run of its lines or sentences, never a cut inside one, starting at a line or
    sentence with text; the longest such run when several hold as much. ``None``
    when no part that fits matches the query."""
    units = _units(piece)
    if not units:
        return None
    context = f"{piece.label} {piece.uri or ''} "
    tf = np.asarray([bm25.counts(text) for _, text in units], dtype=np.float64)
    tf = np.vstack([np.zeros(len(bm25.terms)), np.cumsum(tf, axis=0)])
    size = np.concatenate([[0], np.cumsum([len(t.encode("utf-8")) for _, t in units])])
    best: tuple[float, int, int] | None = None
    end = 0
    for start, (_, text) in enumerate(units):
        end = max(end, start)
        # Bytes add up, so the canonical cost (B3: a quarter of the bytes) of a run is
        # known from its ends; the longest run from each start holds the most.
        while end < len(units) and (size[end + 1] - size[start] + 3) // 4 <= room:
            end += 1
        while end > start and not units[end - 1][1].strip():
            end -= 1  # its blank lines at the end say nothing
        if end == start or not text.strip():
            continue
        held = bm25.matched(tf[end] - tf[start])
        if held > 0 and (best is None or held > best[0]):
            best = (held, start, end)
    if best is None:
        return None
    _, start, end = best
    text = "".join(t for _, t in units[start:end])
    hay = tf[end] - tf[start] + np.asarray(bm25.counts(context), dtype=np.float64)
    score = float(bm25.score(hay[None, :], np.asarray([len(context) + len(text)]))[0])
    first, last = piece.start + units[start][0], piece.start + units[end - 1][0]
    digest = sha256_digest(text.encode("utf-8"))
    placed = f"L{first}-{last}" if piece.uri is not None else None
    part = piece._replace(
        start=first,
        end=last,
        text=text,
        digest=digest,
        label=_clip(piece.label, " (part)"),
        cost=canonical_token_cost(text),
        key=piece_key(piece.method, piece.uri, placed, digest),
    )
    return part, score


def _canonical(cuts: Iterable[Cut]) -> list[Cut]:
    """Documents in an order of their own (URI, method, first frame id), never the
    order they were read or held in: the same documents give the same bytes."""
    return sorted((c for c in cuts if len(c)), key=lambda c: (c.uri or "", c.method, c.keys[0]))


def rank(
    cuts: Iterable[Cut],
    query: ContextQuery,
    *,
    kind: str,
    server: str,
    check: Callable[[], None] = _never,
) -> ContextQueryResult:
    """The frames to return: matched pieces best first (ties in document order, then
    text order), packed under the query's limits; then the head of each tool's answer
    none of whose pieces matched. ``truncated`` says an eligible piece was left out,
    or offered only in part.

    A piece larger than the whole ask (``max_tokens``) could never be offered: its
    part that holds the most of the query and fits what is left is offered instead
    (``_part``), labelled ``(part)``, before any worse piece. Of a tool's answer, the
    pieces that match the query are offered when any does (the rest is filler: the
    billing sections of a design document asked about its cache); when none does and
    the server chose the answer for this goal (``Document.always``: its arguments carry
    the goal, a lookup that finds a record in other words; or the config wants it
    whatever is asked, the current time), its head (the first piece of its first text,
    bounded as every piece is) is offered, score 0, if it fits, and only that: there is
    nothing to choose another piece by, and every piece of a handbook that matches
    nothing, each its own frame, would take a rank of its own in a fusion that ranks
    each provider's list apart (``rrf``) ahead of better evidence from others. An
    answer asked the same whatever the goal (``git_show HEAD``) that matches none of
    it is no evidence and gives nothing: a goal nothing matches finds no evidence.
    The rest of such an answer was left out by that bound, not by the goal
    (nothing tells its pieces apart), so the result is ``truncated``: the same head
    whatever the goal is an answer cut, not one served whole. An answer that is one
    piece is offered whole, as before."""
    if query.kinds and kind not in query.kinds:
        return ContextQueryResult(frames=[])
    bm25 = _Bm25((query.query_text or "").strip() or query.goal)
    ordered = _canonical(cuts)
    scores = _bm25(ordered, bm25, check)
    check()
    # Piece i is piece local[i] of document doc[i]: numbers, not a tuple per piece.
    sizes = np.fromiter((len(c) for c in ordered), dtype=np.int64, count=len(ordered))
    doc = np.repeat(np.arange(len(ordered)), sizes)
    local = np.arange(len(doc)) - np.repeat(np.cumsum(sizes) - sizes, sizes)
    # A tool's answer is all it served for one call: several documents may share it.
    answered = {ordered[d].method for d in set(doc[scores > 0].tolist()) if ordered[d].always}
    whole = np.fromiter(
        (c.always and c.method not in answered for c in ordered), dtype=bool, count=len(ordered)
    )[doc]
    eligible = np.flatnonzero((scores > 0) | whole)
    # Of an answer none of whose pieces matched, its head alone is offered: the first
    # piece of its first text (in the result's order; then its embedded resources, in
    # canonical order). The rest is eligible all the same, so it counts as left out.
    firsts = (np.cumsum(sizes) - sizes).tolist()
    heads: dict[str, tuple[tuple[bool, int, int], int]] = {}
    for d, c in enumerate(ordered):
        if c.always and c.method not in answered:
            place = (c.uri is not None, c.place, d)
            if c.method not in heads or place < heads[c.method][0]:
                heads[c.method] = (place, firsts[d])
    head = {i for _, i in heads.values()}
    # Best first; ties by position. numpy's stable sort over numbers, not a sort of
    # Python tuples: it does not hold the interpreter lock for a sort of every piece.
    order = eligible[np.argsort(-scores[eligible], kind="stable")].tolist()
    rounded = np.round(scores, 6)
    remaining = query.max_tokens
    frames: list[dict[str, object]] = []
    seen: set[str] = set()  # frame ids offered, and pieces offered in part
    docs, locals_ = doc.tolist(), local.tolist()
    unmatched: list[int] = []  # the heads of tools' answers none of whose pieces matched
    for i in order:
        c, j = ordered[docs[i]], locals_[i]
        key = c.keys[j]
        if not scores[i]:
            if i in head:
                unmatched.append(i)
            continue
        if key in seen:  # one frame id, served twice (piece_key), is one frame
            continue
        if len(frames) >= query.max_frames:
            break
        if c.costs[j] <= remaining:
            seen.add(key)
            frames.append(_frame(c[j], float(rounded[i]), kind, server).to_wire())
            remaining -= c.costs[j]
        elif c.costs[j] > query.max_tokens:
            check()
            found = _part(c[j], bm25, remaining)
            if found is not None and found[0].key not in seen:
                part, score = found
                seen.update((key, part.key))
                frames.append(_frame(part, round(score, 6), kind, server).to_wire())
                remaining -= part.cost
    for i in unmatched:
        c, j = ordered[docs[i]], locals_[i]
        if c.keys[j] in seen or len(frames) >= query.max_frames or c.costs[j] > remaining:
            continue
        seen.add(c.keys[j])
        frames.append(_frame(c[j], 0.0, kind, server).to_wire())
        remaining -= c.costs[j]
    # Every eligible piece not offered whole was left out (one per distinct frame id):
    # of an unmatched answer, every piece but its head.
    eligible_keys = {ordered[docs[i]].keys[locals_[i]] for i in order}
    dropped = len(eligible_keys - {str(f["id"]) for f in frames})
    return ContextQueryResult(
        frames=frames, truncated=dropped > 0, dropped_estimate=dropped or None
    )


def frames_for(
    docs: Sequence[Document], query: ContextQuery, *, kind: str, server: str
) -> ContextQueryResult:
    """``rank`` over the pieces of ``docs``, cut here: the whole job in one call."""
    return rank([cut(d) for d in docs], query, kind=kind, server=server)


def render_arguments(template: object, *, query: str, goal: str) -> object:
    """The configured tool arguments with ``{query}`` and ``{goal}`` filled in, in
    string values at any depth; nothing else is interpreted."""
    if isinstance(template, str):
        return template.replace("{query}", query).replace("{goal}", goal)
    if isinstance(template, dict):
        return {k: render_arguments(v, query=query, goal=goal) for k, v in template.items()}
    if isinstance(template, list):
        return [render_arguments(v, query=query, goal=goal) for v in template]
    return template


def takes_goal(template: object) -> bool:
    """Whether the configured tool arguments carry the goal: ``{query}`` or ``{goal}``
    in a string value at any depth (``render_arguments``' rule)."""
    if isinstance(template, str):
        return "{query}" in template or "{goal}" in template
    if isinstance(template, dict):
        return any(takes_goal(v) for v in template.values())
    if isinstance(template, list):
        return any(takes_goal(v) for v in template)
    return False
