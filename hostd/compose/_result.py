"""What a composition returns: the prompt, its citation map and its audit record.

The audit is a total partition of the offered frames: exactly one entry per
frame, included (rank, score, position, tokens, verification) or excluded with
exactly one reason. The composition builds each entry once, as the JSON-ready
dict the wire and the log carry; ``AuditEntry`` is its typed reading.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from hostd.protocol import ContextFrame, FrameId, Provenance

from ._evidence import evidence_dicts

__all__ = [
    "AuditEntry",
    "Citation",
    "ComposedPrompt",
    "CompositionAudit",
    "FloorRecord",
]

#: Exclusions whose ``detail.kept`` names the candidate that stands for the frame.
_KEPT_REASONS = frozenset({"duplicate", "merged_into", "contained_in"})
INCLUDED: Literal["included"] = "included"
EXCLUDED: Literal["excluded"] = "excluded"


def _json_float(x: float | None) -> float | None:
    return x if x is None or math.isfinite(x) else None


@dataclass(slots=True, frozen=True)
class AuditEntry:
    """One offered frame and what became of it."""

    frame: FrameId
    disposition: Literal["included", "excluded"]
    reason: str | None = None
    detail: Mapping[str, Any] = field(default_factory=dict)
    rank: int | None = None
    score: float | None = None
    position: int | None = None
    tokens: int | None = None
    verification: Mapping[str, Any] | None = None
    vouched_by: tuple[str, ...] = ()
    #: A candidate span merging made: its region, digest and the absorbed ``members``.
    merged: Mapping[str, Any] | None = None
    #: Why span merging left this candidate apart from the ones it touches.
    span: Mapping[str, Any] | None = None
    #: Admitted blocks that touch, quoted as this one's: the region, digest, the
    #: block's ``tokens`` and the other ``members`` (each ``merged_into`` this one).
    coalesced: Mapping[str, Any] | None = None
    #: An excluded frame's own citation label, when it reached composition: which
    #: ticket or file was left out (an included one's is its citation's).
    label: str | None = None

    @property
    def included(self) -> bool:
        return self.disposition == INCLUDED

    @property
    def provider_id(self) -> str:
        return self.frame.provider_id

    @classmethod
    def from_wire(cls, entry: Mapping[str, Any]) -> AuditEntry:
        """An entry read back from its wire form (``CompositionAudit.entry_dicts``)."""
        reason = entry.get("reason")
        detail = dict(entry.get("detail") or {})
        if reason in _KEPT_REASONS and isinstance(detail.get("kept"), dict):
            detail["kept"] = FrameId.from_wire(detail["kept"])
        verification = entry.get("verification")
        return cls(
            FrameId.from_wire(entry["frame"]),
            entry["disposition"],
            reason,
            detail,
            entry.get("rank"),
            entry.get("score"),
            entry.get("position"),
            entry.get("tokens"),
            dict(verification) if verification is not None else None,
            tuple(entry.get("vouched_by", ())),
            entry.get("merged"),
            entry.get("span"),
            entry.get("coalesced"),
            entry.get("label"),
        )

    def to_wire(self) -> dict[str, Any]:
        """A JSON-ready dict (also the fields of the ``compose.audit`` log event)."""
        detail = dict(self.detail)
        if "kept" in detail and isinstance(detail["kept"], FrameId):
            detail["kept"] = detail["kept"].to_wire()
        return _entry_dict(
            self.frame.to_wire(),
            self.frame.provider_id,
            self.reason,
            detail,
            self.rank,
            self.score,
            self.position,
            self.tokens,
            self.verification,
            self.vouched_by,
            self.merged,
            self.span,
            self.coalesced,
            self.label,
        )


def _entry_dict(
    frame: dict[str, Any],
    provider_id: str,
    reason: str | None,
    detail: dict[str, Any],
    rank: int | None,
    score: float | None,
    position: int | None,
    tokens: int | None,
    verification: Mapping[str, Any] | None,
    vouched_by: tuple[str, ...],
    merged: Mapping[str, Any] | None = None,
    span: Mapping[str, Any] | None = None,
    coalesced: Mapping[str, Any] | None = None,
    label: str | None = None,
) -> dict[str, Any]:
    out: dict[str, Any] = {
        "frame": frame,
        "provider": provider_id,
        "disposition": INCLUDED if reason is None else EXCLUDED,
    }
    if reason is not None:
        out["reason"] = reason
        out["detail"] = detail
    if label is not None:
        out["label"] = label
    if rank is not None:
        out["rank"] = rank
    if score is not None:
        out["score"] = _json_float(score)
    if tokens is not None:
        out["tokens"] = tokens
    if reason is None:
        out["position"] = position
        out["verification"] = dict(verification) if verification is not None else None
        out["vouched_by"] = list(vouched_by)
    if merged is not None:
        out["merged"] = dict(merged)
    if span is not None:
        out["span"] = dict(span)
    if coalesced is not None:
        out["coalesced"] = dict(coalesced)
    return out


@dataclass(slots=True, frozen=True)
class FloorRecord:
    """A floor as admitted: its label, where it was pinned and what it cost."""

    label: str
    position: str
    tokens: int

    def to_wire(self) -> dict[str, Any]:
        return {"label": self.label, "position": self.position, "tokens": self.tokens}


class CompositionAudit:
    """The record of one composition.

    ``entries`` (one per offered frame: the ranked frames best first, whether
    included or not, then duplicates, then earlier stages' exclusions, each of
    those in canonical FrameId order), ``global_budget``,
    ``tokens_used`` (the canonical cost of the whole prompt, preamble and fences
    included, never above the budget), ``policy`` (strategy, placement and, from a
    fan-out, ``overfetch`` and the tokens each provider was ``asked``) and
    ``floors``. An entry's ``tokens`` is what its fenced block costs.

    ``tokens_other`` is what ``tokens_used`` holds beyond the included entries'
    ``tokens``, so the two add up to it: the preamble, the floors, the lines a
    coalesced block quotes beyond its lead's own block (its ``merged_into`` members',
    less the fences saved) and rounding (each block is counted on its own, the prompt
    once whole), which can make it negative.

    The entries are built once by the composition, in their wire form
    (``entry_dicts``, shared: read them, do not change them); ``entries`` reads
    them as typed ``AuditEntry`` values.
    """

    __slots__ = (
        "_entries",
        "_wire",
        "floors",
        "global_budget",
        "policy",
        "tokens_other",
        "tokens_used",
    )

    def __init__(
        self,
        entries: list[dict[str, Any]],
        *,
        global_budget: int,
        tokens_used: int,
        policy: Mapping[str, Any],
        floors: tuple[FloorRecord, ...] = (),
        tokens_other: int = 0,
    ) -> None:
        self._wire = entries
        self._entries: tuple[AuditEntry, ...] | None = None
        self.global_budget = global_budget
        self.tokens_used = tokens_used
        self.tokens_other = tokens_other
        self.policy = dict(policy)
        self.floors = floors

    @property
    def entries(self) -> tuple[AuditEntry, ...]:
        if self._entries is None:
            self._entries = tuple(map(AuditEntry.from_wire, self._wire))
        return self._entries

    def __len__(self) -> int:
        return len(self._wire)

    def included(self) -> list[AuditEntry]:
        return [e for e in self.entries if e.reason is None]

    def excluded(self) -> list[AuditEntry]:
        return [e for e in self.entries if e.reason is not None]

    def counts(self) -> dict[str, Any]:
        """``{"included": n, "excluded": {reason: n}}``."""
        included = 0
        excluded: dict[str, int] = {}
        for entry in self._wire:
            reason = entry.get("reason")
            if reason is None:
                included += 1
            else:
                excluded[reason] = excluded.get(reason, 0) + 1
        return {"included": included, "excluded": dict(sorted(excluded.items()))}

    def entry_dicts(self) -> list[dict[str, Any]]:
        """Every entry as a JSON-ready dict, in ``entries`` order (one log event each)."""
        return list(self._wire)

    def to_wire(self) -> dict[str, Any]:
        return {
            "entries": list(self._wire),
            "global_budget": self.global_budget,
            "tokens_used": self.tokens_used,
            "tokens_other": self.tokens_other,
            "policy": dict(self.policy),
            "floors": [f.to_wire() for f in self.floors],
        }

    def __repr__(self) -> str:
        return (
            f"CompositionAudit(entries={len(self)}, global_budget={self.global_budget}, "
            f"tokens_used={self.tokens_used}, policy={self.policy!r}, counts={self.counts()!r})"
        )


@dataclass(slots=True, frozen=True)
class Citation:
    """A rendered label resolved to the frame's identity and merged provenance."""

    label: str
    frame: FrameId
    provenance: tuple[Provenance, ...]

    def to_wire(self) -> dict[str, Any]:
        return {
            "label": self.label,
            "frame": self.frame.to_wire(),
            "provenance": [p.to_wire() for p in self.provenance],
        }


@dataclass(slots=True, frozen=True)
class ComposedPrompt:
    """The prompt block, its citation map (render order) and its audit record.

    ``shown``: the ``(provider_id, frame)`` behind each citation, in the same
    (prompt) order: the evidence itself, laid out only when a client asks for it.
    """

    prompt: str
    citations: tuple[Citation, ...]
    audit: CompositionAudit
    #: With a tokenizer: the prompt's count in its tokens (what the budget bounded).
    model_tokens: int | None = None
    #: The tokenizer's name (None: the budget counted canonical tokens, B3).
    tokenizer: str | None = None
    shown: tuple[tuple[str, ContextFrame], ...] = ()
    #: The prompt's UTF-8 size when the composition already counted it (the packer
    #: counts the bytes of every block it admits); None: measured when asked.
    prompt_bytes: int | None = field(default=None, repr=False, compare=False)

    @property
    def tokens_used(self) -> int:
        return self.audit.tokens_used

    def prompt_usage(self) -> dict[str, Any]:
        """The prompt's size both ways: ``bytes`` (UTF-8), ``canonical_tokens``
        (B3: ``ceil(bytes / 4)``) and, with a tokenizer, ``tokens`` in its count
        and its name (``tokenizer``): the ``usage.prompt`` of a composition."""
        size = self.prompt_bytes
        if size is None:  # encoding a prompt of 16 KB that is not ASCII is a copy of it
            size = len(self.prompt.encode("utf-8", "surrogatepass"))
        out: dict[str, Any] = {"bytes": size, "canonical_tokens": (size + 3) >> 2}
        if self.tokenizer is not None:
            out["tokens"] = self.model_tokens
            out["tokenizer"] = self.tokenizer
        return out

    def evidence(self) -> list[dict[str, Any]]:
        """The included frames in prompt order, each with its provider's own content
        (not the fenced text) and a digest of it (``_evidence``)."""
        return evidence_dicts(
            [c.label for c in self.citations], self.shown, self.audit.entry_dicts()
        )

    def to_wire(
        self, *, include_content: bool = False, then: dict[str, Any] | None = None
    ) -> dict[str, Any]:
        """The wire form; ``include_content`` adds ``evidence`` (absent otherwise, so a
        reply that did not ask is the same bytes as one from before it existed).

        ``then``: members the caller's reply carries after ``audit``, in their order
        (a fan-out's ``providers`` and ``usage``, say); a ``usage`` among them gets the
        prompt's size as its ``prompt`` (``prompt_usage``). The whole reply is built in
        this one call, each dict once: ``then``'s are taken as they are, not copied."""
        citations = self.citations
        # Every citation's provenance in one serializer call, then sliced back.
        dumped = Provenance.many_to_wire([p for c in citations for p in c.provenance])
        wire: list[dict[str, Any]] = []
        at = 0
        for c in citations:
            end = at + len(c.provenance)
            wire.append(
                {"label": c.label, "frame": c.frame.to_wire(), "provenance": dumped[at:end]}
            )
            at = end
        out: dict[str, Any] = {"prompt": self.prompt, "citations": wire}
        if include_content:
            out["evidence"] = self.evidence()
        out["audit"] = self.audit.to_wire()
        if then is not None:
            out.update(then)
            usage = then.get("usage")
            if isinstance(usage, dict):
                usage["prompt"] = self.prompt_usage()
        return out
