"""A recorded composition as the shadow store keeps it, and its stored body.

``Recorded`` holds what a replay needs to compose a request again (the contested
budget, the caps, the live policy, every candidate with its provider's own score,
identity, cost and regions, what was included and the citation map), the members
folded into each shown candidate (``_credit``) and the request's feedback. The
body is JSON with sorted keys; ``from_row`` reads one back, and any shape it cannot
read is an error the store turns into ``ShadowUnavailable``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import orjson

from ._feedback import CitationRow, Feedback, Key

__all__ = ["Candidate", "Members", "Recorded", "candidate_wire", "from_row", "record_body"]

#: Each included candidate that absorbed others (dedup, span merges): its key, then the
#: keys of every frame it absorbed, in the audit's (canonical) order.
Members = tuple[tuple[Key, tuple[Key, ...]], ...]


@dataclass(slots=True, frozen=True)
class Candidate:
    """One offered frame as recorded: identity, its provider's score, cost and regions."""

    provider: str
    id: str
    digest: str | None
    kind: str
    score: float
    cost: int
    label: str
    regions: tuple[tuple[str, str | None, str | None, str | None], ...]
    content: str | None = None

    def to_wire(self) -> dict[str, Any]:
        return candidate_wire(
            self.provider,
            self.id,
            self.digest,
            self.kind,
            self.score,
            self.cost,
            self.label,
            self.regions,
            self.content,
        )

    @classmethod
    def from_wire(cls, raw: dict[str, Any]) -> Candidate:
        return cls(
            provider=raw["provider"],
            id=raw["id"],
            digest=raw.get("digest"),
            kind=raw["kind"],
            score=float(raw["score"]),
            cost=int(raw["cost"]),
            label=raw["label"],
            regions=tuple(tuple(r) for r in raw.get("regions", ())),
            content=raw.get("content"),
        )


@dataclass(slots=True, frozen=True)
class Recorded:
    """One recorded composition: what it contested, how it ranked, what it included."""

    request_id: str
    recorded_at: float
    budget: int  # the tokens the frames contested: the global budget minus floors
    policy: dict[str, Any]
    caps: dict[str, float] | None
    candidates: tuple[Candidate, ...]
    included: tuple[tuple[str, str, str | None], ...]  # (provider, frame id, digest)
    goal_digest: str
    goal: str | None = None
    #: The citation map as rendered: (label, provider, frame id, digest), render order.
    citations: tuple[CitationRow, ...] = ()
    #: What the agent reported it used (``usage/feedback``), when it did.
    feedback: Feedback | None = None
    #: The included candidates that absorbed other frames, with those frames (``None``:
    #: a record from before they were kept; ``credited`` recomputes them).
    members: Members | None = None

    @property
    def stored_goal(self) -> str | None:
        return self.goal

    def body(self) -> str:
        return record_body(
            self.budget,
            self.policy,
            self.caps,
            [c.to_wire() for c in self.candidates],
            self.included,
            self.citations,
            self.members or (),
        )


def candidate_wire(
    provider: str,
    id: str,
    digest: str | None,
    kind: str,
    score: float,
    cost: int,
    label: str,
    regions: Sequence[Sequence[str | None]],
    content: str | None = None,
) -> dict[str, Any]:
    """One candidate as a record's body holds it (``Candidate``'s fields, in order)."""
    out: dict[str, Any] = {
        "provider": provider,
        "id": id,
        "digest": digest,
        "kind": kind,
        "score": score,
        "cost": cost,
        "label": label,
        "regions": regions,  # tuples: orjson writes them as arrays
    }
    if content is not None:
        out["content"] = content
    return out


def record_body(
    budget: int,
    policy: dict[str, Any],
    caps: dict[str, float] | None,
    candidates: list[dict[str, Any]],
    included: Sequence[Sequence[str | None]],
    citations: Sequence[CitationRow],
    members: Members,
) -> str:
    """The stored body of one composition (``Recorded.body``, ``Held.body``)."""
    return orjson.dumps(
        {
            "budget": budget,
            "policy": policy,
            "caps": caps,
            "candidates": candidates,
            "included": included,
            "citations": citations,
            "members": members,
        },
        option=orjson.OPT_SORT_KEYS,
    ).decode()


def _citations(raw: dict[str, Any], candidates: Sequence[Candidate]) -> tuple[CitationRow, ...]:
    if "citations" in raw:
        return tuple((lb, p, i, d) for lb, p, i, d in raw["citations"])
    # A record from before the citation map was kept: its candidates' labels stand in.
    labels = {(c.provider, c.id, c.digest): c.label for c in candidates}
    return tuple((labels.get((p, i, d), i), p, i, d) for p, i, d in raw["included"])


def _members(raw: dict[str, Any]) -> Members | None:
    if "members" not in raw:
        return None  # recorded before members were kept
    return tuple(
        ((k[0], k[1], k[2]), tuple((p, i, d) for p, i, d in absorbed))
        for k, absorbed in raw["members"]
    )


def from_row(
    request_id: str,
    recorded_at: float,
    goal_digest: str,
    goal: str | None,
    body: str,
    feedback_at: float | None,
    feedback: str | None,
) -> Recorded:
    raw = orjson.loads(body)
    candidates = tuple(Candidate.from_wire(c) for c in raw["candidates"])
    return Recorded(
        request_id=request_id,
        recorded_at=recorded_at,
        budget=raw["budget"],
        policy=raw["policy"],
        caps=raw.get("caps"),
        candidates=candidates,
        included=tuple((p, i, d) for p, i, d in raw["included"]),
        goal_digest=goal_digest,
        goal=goal,
        citations=_citations(raw, candidates),
        members=_members(raw),
        feedback=(
            Feedback.from_body(request_id, feedback_at or 0.0, feedback)
            if feedback is not None
            else None
        ),
    )
