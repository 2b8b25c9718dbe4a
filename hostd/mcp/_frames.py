"""What an MCP server served, as evidence: documents cut into pieces, scored, packed.

Pure code over plain values: no SDK session, no I/O, no clock. An MCP server has no
notion of relevance, budgets or regions, so the binding supplies all three, the way
a provider would:

- **cut** (``cut``): every served text (a resource's contents, a tool result block)
  is cut by the chunker the bundled providers use (``hostd.chunk``: runs of whole
  lines; a ``file://`` resource as the ``files`` provider cuts that file, markdown at
  its headings, anything else at its blank lines, so each ``git log`` entry or
  paragraph stands alone). Each piece keeps its range (``L10-40``) and the digest of
  exactly its bytes (F5, F17), and a label drawn from its content or its source: the
  commit ids or file paths it names, the resource's title with the heading or range,
  and the tool's name only when nothing better is there (F3);
- **score** (``rank``): BM25 of each piece against the query text, mapped into
  [0, 1) (F1; provider-local and ordinal, F10). Only the query's terms are counted,
  one regex pass per piece: a full index (``bm25s``, as the ``files`` provider keeps
  one) would build a vocabulary of every word served to answer one query, and could
  not stop halfway;
- **pack**: best first (ties by source, position, then frame id), under
  ``max_frames`` (B4) and ``max_tokens`` (B1) with the canonical ``token_cost`` (B3),
  of the configured kind only (Q1); ``truncated`` when something eligible was left
  out. Resource pieces that match no query term are left out; tool result pieces are
  kept (they answer this very query).

``rank`` takes a ``check`` callable, called between sources: the binding runs it in
a worker thread and stops it there (``Abandoned``) when its leg is cancelled.
"""

from __future__ import annotations

import hashlib
import re
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from urllib.parse import unquote, urlsplit

import numpy as np

from hostd.chunk import (
    DEFAULT_MIN_CHUNK_TOKENS,
    Sections,
    TextChunk,
    chunk_text,
    estimate_pieces,
    file_sections,
)
from hostd.protocol import (
    ContextFrame,
    ContextQuery,
    ContextQueryResult,
    Provenance,
    canonical_token_cost,
)

__all__ = [
    "BM25_HALF_SCORE",
    "Abandoned",
    "Document",
    "Piece",
    "cut",
    "frames_for",
    "piece_key",
    "rank",
    "render_arguments",
    "terms",
]

#: The raw BM25 score that maps to 0.5 (F1): a strong match sits mid-range, not at 1.
BM25_HALF_SCORE = 8.0
#: BM25's term-frequency saturation and length normalisation (the usual values).
_K1, _B = 1.5, 0.75
#: Below this many word pieces a piece is merged with its neighbour (a file: as the
#: files provider merges). A record (one ``git log`` entry, a short paragraph) is
#: often under the files provider's 48 and is evidence of its own: only fragments merge.
_MIN_PIECE_TOKENS = 16
#: A label longer than this is cut: it is quoted in the prompt beside every frame.
_MAX_LABEL = 96

_TERM_RE = re.compile(r"[A-Za-z0-9]+")
_COMMIT_RE = re.compile(r"^[ \t]*commit:?[ \t]+'?([0-9a-f]{7,64})\b", re.IGNORECASE | re.MULTILINE)
_DIFF_PATH_RE = re.compile(r"^(?:diff --git a/(\S+) b/|\+\+\+ b/(\S+))", re.MULTILINE)
# ``path/to/file.py:12: …`` (grep) or ``notes.md: …``: a file named at a line's start.
_PATH_LINE_RE = re.compile(
    r"^([\w.-]+(?:/[\w.-]+)*\.[A-Za-z0-9]{1,8}):(?:\d+:)?[ \t]", re.MULTILINE
)
_MARKDOWN_TYPES = ("text/markdown", "text/x-markdown")


class Abandoned(Exception):
    """Raised by a ``check`` callable: the leg this work was for is gone (cancelled)."""


def terms(text: str) -> list[str]:
    """Lower-cased alphanumeric runs: the BM25 vocabulary of queries and served texts."""
    return _TERM_RE.findall(text.lower())


@dataclass(slots=True, frozen=True)
class Document:
    """One text an MCP server served: a resource's contents or a tool result block."""

    #: ``resources/read`` or ``tools/call:<name>``: how it was obtained.
    method: str
    text: str
    uri: str | None = None
    #: The resource's title (else its name), as the server listed it.
    title: str | None = None
    mime_type: str | None = None
    #: Tool results answer this very query: kept even when no query term matches.
    always: bool = False

    @property
    def tool(self) -> str | None:
        kind, _, name = self.method.partition(":")
        return name if kind == "tools/call" and name else None


@dataclass(slots=True, frozen=True)
class Piece:
    """One chunk of a document: the text of one frame, its range and its label."""

    method: str
    uri: str | None
    start: int
    end: int
    text: str
    digest: str  # sha256 of exactly the text's bytes (F5, F17)
    label: str
    title: str
    always: bool
    cost: int  # canonical token cost (B3)
    #: The frame id: unique within the provider, stable across calls (``piece_key``).
    key: str

    @property
    def range(self) -> str:
        return f"L{self.start}-{self.end}"

    @property
    def size(self) -> int:
        """Bytes held (for the read cache's bound)."""
        return len(self.text) + len(self.label) + len(self.title) + len(self.uri or "") + 200


def piece_key(method: str, uri: str | None, start: int, end: int, digest: str) -> str:
    """A digest of how, where and what: the same text at the same place is the same id."""
    basis = f"{method}\n{uri or ''}\nL{start}-{end}\n{digest}"
    return method[:1] + ":" + hashlib.sha256(basis.encode()).hexdigest()[:24]


def _sections(doc: Document) -> Sections:
    if doc.uri and doc.uri.startswith("file:"):
        return file_sections(unquote(urlsplit(doc.uri).path))  # as the files provider cuts it
    names = (doc.uri or "", doc.title or "")
    if doc.mime_type in _MARKDOWN_TYPES or any(n.endswith((".md", ".markdown")) for n in names):
        return "markdown"
    return "paragraphs"


def _unique(found: Iterable[str]) -> list[str]:
    return list(dict.fromkeys(f for f in found if f))


def _listed(what: str, names: Sequence[str]) -> str:
    shown = ", ".join(names[:3])
    more = f" +{len(names) - 3}" if len(names) > 3 else ""
    return f"{what}{'s' if len(names) > 1 else ''} {shown}{more}" if what else shown + more


def _label(doc: Document, chunk: TextChunk, many: bool) -> str:
    """F3: what the frame is, in a few words, from its content or its source."""
    source = doc.title or doc.uri
    if doc.tool is not None and doc.title is None:
        # A tool's output has no name of its own: what it is about is in its text.
        commits = _unique(c[:7] for c in _COMMIT_RE.findall(chunk.text))
        if commits:
            return _listed("commit", commits)
        paths = _unique(a or b for a, b in _DIFF_PATH_RE.findall(chunk.text))
        paths = paths or _unique(_PATH_LINE_RE.findall(chunk.text))
        if paths:
            return _listed("", paths)
        source = doc.uri
    if chunk.heading:
        return f"{source} § {chunk.heading}" if source else chunk.heading
    base = source or doc.tool or "mcp"
    return f"{base} {chunk.range}" if many else base


def _clip(label: str) -> str:
    label = " ".join(label.split())  # one line: it is an attribute in the prompt's fence
    return label if len(label) <= _MAX_LABEL else label[: _MAX_LABEL - 1] + "…"


def cut(doc: Document) -> list[Piece]:
    """The pieces of one document, in text order (empty for a blank one)."""
    name = doc.title or doc.uri or doc.tool or "mcp"
    is_file = doc.uri is not None and doc.uri.startswith("file:")
    # A file is cut by the model's count, as the files and semantic providers cut it
    # (one region, one digest: D2 merges them). Nothing else an MCP server serves is
    # embedded, so the estimate sizes it: a tenth of the model tokenizer's cost.
    chunks = chunk_text(
        doc.text.encode("utf-8"),
        name,
        sections=_sections(doc),
        min_tokens=DEFAULT_MIN_CHUNK_TOKENS if is_file else _MIN_PIECE_TOKENS,
        counter=None if is_file else estimate_pieces,
    )
    many = len(chunks) > 1
    pieces = []
    for chunk in chunks:
        label = _clip(_label(doc, chunk, many)) or "mcp"
        pieces.append(
            Piece(
                method=doc.method,
                uri=doc.uri,
                start=chunk.start,
                end=chunk.end,
                text=chunk.text,
                digest=chunk.digest,
                label=label,
                title=label,
                always=doc.always,
                cost=canonical_token_cost(chunk.text),
                key=piece_key(doc.method, doc.uri, chunk.start, chunk.end, chunk.digest),
            )
        )
    return pieces


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


def _bm25(
    groups: Sequence[Sequence[Piece]], query: Sequence[str], check: Callable[[], None]
) -> tuple[list[Piece], list[float]]:
    """Every piece and its score in [0, 1). One regex pass per piece finds the query's
    terms (as ``terms`` cuts them: alphanumeric runs); a piece's length is its
    characters, which BM25 only uses as a ratio to the mean."""
    pieces: list[Piece] = []
    lengths: list[int] = []
    counts: list[list[int]] = []
    find = (
        re.compile(r"(?<![a-z0-9])(?:" + "|".join(query) + r")(?![a-z0-9])").findall
        if query
        else None
    )
    for group in groups:
        check()  # between sources: a cancelled leg stops here
        for piece in group:
            pieces.append(piece)
            if find is None:
                continue
            # Label and URI are searchable too: they often say what the text is about.
            hay = f"{piece.label} {piece.uri or ''} {piece.text}".lower()
            found = Counter(find(hay))
            lengths.append(len(hay))
            counts.append([found[q] for q in query])
    if not pieces or find is None:
        return pieces, [0.0] * len(pieces)
    tf = np.asarray(counts, dtype=np.float64)
    dl = np.asarray(lengths, dtype=np.float64)
    n = len(pieces)
    df = (tf > 0).sum(axis=0)
    idf = np.log1p((n - df + 0.5) / (df + 0.5))
    norm = _K1 * (1 - _B + _B * dl / max(float(dl.mean()), 1.0))
    raw = ((tf * (_K1 + 1)) / (tf + norm[:, None]) * idf).sum(axis=1)
    return pieces, [float(r) / (float(r) + BM25_HALF_SCORE) if r > 0 else 0.0 for r in raw]


def rank(
    groups: Sequence[Sequence[Piece]],
    query: ContextQuery,
    *,
    kind: str,
    server: str,
    check: Callable[[], None] = _never,
) -> ContextQueryResult:
    """The frames to return: matched pieces best first, packed under the query's
    limits. ``truncated`` says an eligible piece was left out."""
    if query.kinds and kind not in query.kinds:
        return ContextQueryResult(frames=[])
    text = (query.query_text or "").strip() or query.goal
    wanted = sorted(set(terms(text)))
    pieces, scores = _bm25(groups, wanted, check)
    check()
    order = sorted(
        (i for i in range(len(pieces)) if scores[i] > 0 or pieces[i].always),
        key=lambda i: (
            -scores[i],
            pieces[i].uri or "",
            pieces[i].method,
            pieces[i].start,
            pieces[i].key,
        ),
    )
    remaining, dropped = query.max_tokens, 0
    frames: list[dict[str, object]] = []
    seen: set[str] = set()
    for i in order:
        piece = pieces[i]
        if piece.key in seen:  # the same text at the same place, served twice, is one frame
            continue
        seen.add(piece.key)
        if len(frames) >= query.max_frames or piece.cost > remaining:
            dropped += 1
            continue
        frames.append(_frame(piece, round(scores[i], 6), kind, server).to_wire())
        remaining -= piece.cost
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
