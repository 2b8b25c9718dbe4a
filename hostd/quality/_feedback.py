"""Feedback: which cited frames the model used in its answer, kept beside the shadow record.

``usage/feedback`` names a request and the evidence its answer used, each item
a citation label of that request's prompt or a FrameId; ``resolve_used``
checks every item against the request's citation map and returns the frames
(an unknown item is an ``UnknownCitation`` naming all of them). A label two
citations share names both: the model cannot say which it read. The note is
stored only with ``store_content`` (otherwise its digest and length), as frame
content and goals are. One feedback per request: a later one replaces it.

The feedback table lives in ``shadow.db`` beside ``requests``; triggers count
its size in the same ``totals`` and delete it with its request, so the store's
bounds and retention hold for both.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import orjson

from hostd.errors import UnknownCitation
from hostd.protocol import sha256_digest

__all__ = ["FEEDBACK_SCHEMA", "Feedback", "resolve_used"]

Key = tuple[str, str, str | None]
#: One entry of a record's citation map: (label, provider, frame id, digest).
CitationRow = tuple[str, str, str, str | None]

# Split on ";\n" and run one statement at a time, after the requests' own bounds.
FEEDBACK_SCHEMA = """
CREATE TABLE IF NOT EXISTS feedback (
    request_id TEXT PRIMARY KEY,
    recorded_at REAL NOT NULL,
    size INTEGER NOT NULL,
    body TEXT NOT NULL
);
CREATE TRIGGER IF NOT EXISTS feedback_counted AFTER INSERT ON feedback
    BEGIN UPDATE totals SET size = size + NEW.size; END;
CREATE TRIGGER IF NOT EXISTS feedback_uncounted AFTER DELETE ON feedback
    BEGIN UPDATE totals SET size = size - OLD.size; END;
CREATE TRIGGER IF NOT EXISTS requests_feedback_gone AFTER DELETE ON requests
    BEGIN DELETE FROM feedback WHERE request_id = OLD.request_id; END;
"""


@dataclass(slots=True, frozen=True)
class Feedback:
    """What the agent reported of one request: the frames used, and optionally a verdict."""

    request_id: str
    recorded_at: float
    used: tuple[Key, ...]
    helpful: bool | None = None
    note: str | None = None  # only with store_content
    note_digest: str | None = None
    note_chars: int = 0

    @classmethod
    def of(
        cls,
        request_id: str,
        recorded_at: float,
        used: Sequence[Key],
        helpful: bool | None,
        note: str | None,
        *,
        store_content: bool,
    ) -> Feedback:
        digest = sha256_digest(note.encode("utf-8")) if note is not None else None
        return cls(
            request_id=request_id,
            recorded_at=recorded_at,
            used=tuple(used),
            helpful=helpful,
            note=note if store_content else None,
            note_digest=digest,
            note_chars=len(note) if note is not None else 0,
        )

    def body(self) -> str:
        out: dict[str, Any] = {
            "used": [list(k) for k in self.used],
            "helpful": self.helpful,
            "note_digest": self.note_digest,
            "note_chars": self.note_chars,
        }
        if self.note is not None:
            out["note"] = self.note
        return orjson.dumps(out, option=orjson.OPT_SORT_KEYS).decode()

    @classmethod
    def from_body(cls, request_id: str, recorded_at: float, body: str) -> Feedback:
        raw = orjson.loads(body)
        return cls(
            request_id=request_id,
            recorded_at=recorded_at,
            used=tuple((p, i, d) for p, i, d in raw["used"]),
            helpful=raw.get("helpful"),
            note=raw.get("note"),
            note_digest=raw.get("note_digest"),
            note_chars=int(raw.get("note_chars", 0)),
        )

    def to_wire(self) -> dict[str, Any]:
        return {
            "used": [
                {"provider_id": p, "frame_id": i, "content_digest": d} for p, i, d in self.used
            ],
            "helpful": self.helpful,
        }


def _describe(item: str | dict[str, Any]) -> str:
    if isinstance(item, str):
        return item
    return f"{item.get('provider_id')}/{item.get('frame_id')}"


def resolve_used(
    citations: Sequence[CitationRow], used: Sequence[str | dict[str, Any]]
) -> tuple[Key, ...]:
    """The frames ``used`` names, in citation-map order, each once.

    An item is a label (every citation rendered under it) or a FrameId object
    ``{provider_id, frame_id, content_digest?}`` (without a digest: that frame
    of that provider, whatever its digest). Items the map does not hold raise
    one ``UnknownCitation`` whose ``data.unknown`` lists them all.
    """
    chosen: set[Key] = set()
    unknown: list[str] = []
    for item in used:
        if isinstance(item, str):
            hits = [(p, i, d) for label, p, i, d in citations if label == item]
        else:
            pid, fid = item.get("provider_id"), item.get("frame_id")
            digest = item.get("content_digest")
            hits = [
                (p, i, d)
                for _, p, i, d in citations
                if p == pid and i == fid and (digest is None or d == digest)
            ]
        if not hits:
            unknown.append(_describe(item))
        chosen.update(hits)
    if unknown:
        raise UnknownCitation(
            "invalid params: used: not in the request's citation map: " + ", ".join(unknown),
            field="used",
            unknown=unknown,
        )
    order: list[Key] = []
    for _, p, i, d in citations:
        if (p, i, d) in chosen and (p, i, d) not in order:
            order.append((p, i, d))
    return tuple(order)
