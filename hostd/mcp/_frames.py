"""What an MCP server served, as frames: documents, BM25 relevance, budget packing, caching.

Pure code over plain values, apart from the clock the cache is given: no SDK
session, no I/O. An MCP server has no notion of relevance or budgets, so the
adapter supplies both, the way a provider would: every served text is scored
by BM25 (``bm25s``, the library the bundled ``files`` provider uses) against
the query text, mapped into [0, 1) (F1; ordinal, F10), and the frames are
packed best first under ``max_frames`` (B4) and ``max_tokens`` (B1) with the
canonical ``token_cost`` (B3), of the configured kind only (Q1): the leg is
honest by construction, and the leg audit still checks it like any other.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import bm25s
import numpy as np

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
    "Document",
    "ReadCache",
    "frames_for",
    "render_arguments",
    "terms",
]

#: The raw BM25 score that maps to 0.5 (F1): a strong match sits mid-range, not at 1.
BM25_HALF_SCORE = 8.0

_TERM_RE = re.compile(r"[A-Za-z0-9]+")


def terms(text: str) -> list[str]:
    """Lower-cased alphanumeric runs: the BM25 vocabulary of queries and served texts."""
    return [t.lower() for t in _TERM_RE.findall(text)]


@dataclass(slots=True, frozen=True)
class Document:
    """One text an MCP server served: a resource's contents or a tool result block."""

    #: ``resources/read`` or ``tools/call:<name>``: how it was obtained.
    method: str
    text: str
    uri: str | None = None
    title: str | None = None
    #: The digest of the bytes behind a ``file://`` resource (its ``file`` provenance).
    file_digest: str | None = None
    #: Tool results answer this very query: kept even when no query term matches.
    always: bool = False

    @property
    def key(self) -> str:
        """A frame id unique within the provider and stable across calls."""
        basis = f"{self.method}\n{self.uri or ''}\n{sha256_digest(self.text.encode())}"
        return (
            self.method.split(":", 1)[0][:1] + ":" + hashlib.sha256(basis.encode()).hexdigest()[:24]
        )


def _scores(docs: Sequence[Document], text: str) -> list[float]:
    query = terms(text)
    if not docs or not query:
        return [0.0] * len(docs)
    index = bm25s.BM25()
    # Title and URI are searchable too: a file's name often says what it is about.
    index.index(
        [terms(f"{d.title or ''} {d.uri or ''} {d.text}") or ["\x00"] for d in docs],
        show_progress=False,
    )
    raw = np.asarray(index.get_scores(query), dtype=np.float64)
    return [float(r) / (float(r) + BM25_HALF_SCORE) if r > 0 else 0.0 for r in raw]


def _frame(doc: Document, score: float, kind: str, server: str) -> ContextFrame:
    provenance = [Provenance(type="mcp", uri=doc.uri, method=doc.method, by=server)]
    if doc.file_digest is not None:
        # F5: the host re-reads this file under its trusted roots and compares digests.
        provenance.append(Provenance(type="file", uri=doc.uri, digest=doc.file_digest))
    label = doc.title or doc.uri or f"{server} {doc.method}"
    return ContextFrame(
        id=doc.key,
        kind=kind,
        title=label,
        content=doc.text,
        content_digest=sha256_digest(doc.text.encode()),
        uri=doc.uri,
        score=score,
        token_cost=canonical_token_cost(doc.text),
        canonical_token_cost=canonical_token_cost(doc.text),
        provenance=provenance,
        citation_label=label,
    )


def frames_for(
    docs: Sequence[Document], query: ContextQuery, *, kind: str, server: str
) -> ContextQueryResult:
    """The frames to return: matched documents best first (ties by frame id), packed
    under the query's limits. ``truncated`` says an eligible document was left out."""
    if query.kinds and kind not in query.kinds:
        return ContextQueryResult(frames=[])
    text = (query.query_text or "").strip() or query.goal
    scored = [
        (score, doc)
        for score, doc in zip(_scores(docs, text), docs, strict=True)
        if score > 0 or doc.always
    ]
    scored.sort(key=lambda pair: (-pair[0], pair[1].key))
    remaining, dropped = query.max_tokens, 0
    frames: list[dict[str, object]] = []
    seen: set[str] = set()
    for score, doc in scored:
        if doc.key in seen:  # the same text served twice under one URI is one frame
            continue
        seen.add(doc.key)
        cost = canonical_token_cost(doc.text)
        if len(frames) >= query.max_frames or cost > remaining:
            dropped += 1
            continue
        frames.append(_frame(doc, score, kind, server).to_wire())
        remaining -= cost
    return ContextQueryResult(
        frames=frames, truncated=dropped > 0, dropped_estimate=dropped or None
    )


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


@dataclass(slots=True, frozen=True)
class _Entry:
    value: object
    expires: float
    last_modified: str | None


class ReadCache:
    """Listings and reads kept per the server's ``ttlMs`` (else ``default_ttl_s``); a
    read whose resource reports the same ``lastModified`` as when it was read is kept
    past its expiry too: the server said it has not changed."""

    def __init__(self, clock: Callable[[], float], default_ttl_s: float) -> None:
        self._clock = clock
        self._default = default_ttl_s
        self._entries: dict[str, _Entry] = {}

    def get(self, key: str, last_modified: str | None = None) -> object | None:
        entry = self._entries.get(key)
        if entry is None:
            return None
        if self._clock() < entry.expires:
            return entry.value
        if last_modified is not None and last_modified == entry.last_modified:
            return entry.value
        del self._entries[key]
        return None

    def put(
        self, key: str, value: object, *, ttl_ms: int | None, last_modified: str | None = None
    ) -> None:
        ttl = ttl_ms / 1000 if ttl_ms else self._default
        self._entries[key] = _Entry(value, self._clock() + ttl, last_modified)
