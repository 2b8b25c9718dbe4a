"""A recorded composition as the shadow store keeps it, and its stored body.

``Recorded`` holds what a replay needs to compose a request again (the contested
budget, the caps, the live policy, every candidate with its provider's own score,
identity, cost and regions, what was included and the citation map), the members
folded into each shown candidate (``_credit``) and the request's feedback. A record
that keeps content keeps what span merging read as well (``Merging``: which
candidates were ``source_verified``, each merged source's line count, the merge
cap), never a byte of a file beyond what its frames quote. The body is JSON with
sorted keys; ``from_row`` reads one back (a body from before a field was kept reads
as it did then), and any shape it cannot read is an error the store turns into
``ShadowUnavailable``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import orjson

from ._feedback import CitationRow, Feedback, Key

__all__ = [
    "Candidate",
    "Members",
    "Merging",
    "Recorded",
    "candidate_wire",
    "from_row",
    "key_indices",
    "record_body",
]

#: Each included candidate that absorbed others (dedup, span merges): its key, then the
#: keys of every frame it absorbed, in the audit's (canonical) order.
Members = tuple[tuple[Key, tuple[Key, ...]], ...]


@dataclass(slots=True, frozen=True)
class Merging:
    """What span merging read of a composition, as a record keeps it: enough for a
    replay to rebuild the source bytes it read from the candidates' own content
    (``_sources.rebuild``), so the live policy's replay merges what the daemon merged.

    Plain tuples (no dict, no set): a held composition's parts stay untracked by the
    garbage collector (``_held``)."""

    #: ``file`` URI -> its line count, for each source two or more candidates quote
    #: (``FanOut.sources``): line counts only, never the file's bytes.
    sources: tuple[tuple[str, int], ...]
    #: The candidates whose verification state was ``source_verified``: the only ones
    #: span merging joins (its other states it does not read).
    verified: tuple[Key, ...]
    #: ``[host] merge_max_ratio`` when the composition was made (None: compose's default).
    max_ratio: float | None

    def to_wire(self, candidates: Sequence[Sequence[Any]]) -> dict[str, Any]:
        """The body's form: ``verified`` as indices into ``candidates`` (``key_indices``)."""
        return {
            "sources": dict(self.sources),
            "verified": key_indices(self.verified, candidates),
            "max_ratio": self.max_ratio,
        }

    @classmethod
    def from_wire(cls, raw: dict[str, Any], candidates: Sequence[Candidate]) -> Merging:
        return cls(
            sources=tuple((str(u), int(n)) for u, n in sorted(raw["sources"].items())),
            verified=tuple(
                (candidates[n].provider, candidates[n].id, candidates[n].digest)
                for n in raw["verified"]
            ),
            max_ratio=None if raw.get("max_ratio") is None else float(raw["max_ratio"]),
        )


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
    #: Its title, when the fence showed some of it (``stored_title``): a replay shows
    #: it again, so each block costs what it cost live.
    title: str | None = None

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
            self.title,
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
            title=raw.get("title"),
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
    #: What span merging read (``None``: kept without content, or recorded before it
    #: was kept; a replay then merges no spans).
    merging: Merging | None = None
    #: The candidates hostd could not check (state ``unverifiable``), whose blocks were
    #: fenced ``verified="no"``: a replay fences (and prices) them the same.
    unverifiable: tuple[Key, ...] = ()

    @property
    def stored_goal(self) -> str | None:
        return self.goal

    def body(self) -> str:
        candidates = [c.to_wire() for c in self.candidates]
        keys = [(c.provider, c.id, c.digest) for c in self.candidates]
        return record_body(
            self.budget,
            self.policy,
            self.caps,
            candidates,
            self.included,
            self.citations,
            self.members or (),
            None if self.merging is None else self.merging.to_wire(keys),
            key_indices(self.unverifiable, keys),
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
    title: str | None = None,
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
    if title is not None:
        out["title"] = title
    return out


def record_body(
    budget: int,
    policy: dict[str, Any],
    caps: dict[str, float] | None,
    candidates: list[dict[str, Any]],
    included: Sequence[Sequence[str | None]],
    citations: Sequence[CitationRow],
    members: Members,
    merging: dict[str, Any] | None = None,
    unverifiable: Sequence[int] = (),
) -> str:
    """The stored body of one composition (``Recorded.body``, ``Held.body``); without
    ``merging`` (``Merging.to_wire``), the shape it had before merging was kept, and
    without ``unverifiable`` (``key_indices``) the shape from before it was."""
    body = {
        "budget": budget,
        "policy": policy,
        "caps": caps,
        "candidates": candidates,
        "included": included,
        "citations": citations,
        "members": members,
    }
    if merging is not None:
        body["merging"] = merging
    if unverifiable:
        body["unverifiable"] = unverifiable
    return orjson.dumps(body, option=orjson.OPT_SORT_KEYS).decode()


def key_indices(keys: Sequence[Key], candidates: Sequence[Sequence[Any]]) -> list[int]:
    """``keys`` as a body keeps them, which keeps it short: sorted indices into
    ``candidates`` (each a wire candidate or a held row: provider, id, digest first)."""
    if not keys:
        return []
    at = {(c[0], c[1], c[2]): n for n, c in enumerate(candidates)}
    return sorted(at[k] for k in keys if k in at)


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
        # A record from before merging was kept, or kept without content: none.
        merging=Merging.from_wire(raw["merging"], candidates) if "merging" in raw else None,
        unverifiable=tuple(
            (candidates[n].provider, candidates[n].id, candidates[n].digest)
            for n in raw.get("unverifiable", ())
        ),
        feedback=(
            Feedback.from_body(request_id, feedback_at or 0.0, feedback)
            if feedback is not None
            else None
        ),
    )
