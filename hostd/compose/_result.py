"""What a composition returns: the prompt, its citation map and its audit record.

The audit is a total partition of the offered frames: exactly one entry per
frame, included (rank, score, position, tokens, verification) or excluded with
exactly one reason. Entries are kept as compact rows while composing and only
become ``AuditEntry`` objects (or plain dicts, for one log event per entry)
when someone reads them, so a 100k-frame composition does not pay for 100k
objects it may never look at.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from operator import itemgetter
from typing import Any, Literal

import orjson

from hostd.protocol import FrameId, Provenance

from ._candidates import SortKey, frame_id_of_key, key_to_wire

__all__ = [
    "AuditEntry",
    "Citation",
    "ComposedPrompt",
    "CompositionAudit",
    "FloorRecord",
]

INCLUDED: Literal["included"] = "included"
EXCLUDED: Literal["excluded"] = "excluded"

# Row layout (internal): (key, reason, extra, rank, score, position, tokens,
# verification, vouched_by). ``reason`` None means included. ``extra`` holds
# what the reason's detail is built from: remaining tokens (over_budget), the
# kept key (duplicate), (provider, cap, share) (provider_cap) or the caller's
# detail mapping (reasons from earlier stages).
Row = tuple[
    SortKey,
    str | None,
    Any,
    int | None,
    float | None,
    int | None,
    int | None,
    Mapping[str, Any] | None,
    tuple[str, ...],
]


_RANK = itemgetter(3)
_BUILTIN_REASONS = frozenset({"over_budget", "duplicate", "provider_cap"})


def _row_order(r: Row) -> tuple[Any, ...]:
    """A total order on rows: canonical FrameId first, then everything else, so the
    same identity offered twice (even with different bodies) sorts the same way
    whatever the arrival order."""
    key, reason, extra, rank, score, _position, tokens, _verification, _vouched = r
    if reason is None or reason in _BUILTIN_REASONS:
        extra_key = repr(extra)
    else:
        try:
            extra_key = orjson.dumps(extra, option=orjson.OPT_SORT_KEYS, default=repr).decode()
        except TypeError:  # a value orjson cannot carry (an integer past 64 bits): still a key
            extra_key = "\x00" + repr(extra)
    return (
        key,
        reason is not None,
        reason or "",
        -1 if rank is None else rank,
        -1 if tokens is None else tokens,
        -math.inf if score is None or score != score else score,
        extra_key,
    )


def _unranked_order(r: Row) -> tuple[Any, ...]:
    return (r[1] != "duplicate", *_row_order(r))


def _json_float(x: float | None) -> float | None:
    return x if x is None or math.isfinite(x) else None


def _detail(reason: str | None, extra: Any, tokens: int | None, *, wire: bool) -> dict[str, Any]:
    if reason is None:
        return {}
    if reason == "over_budget":
        return {"cost": tokens, "remaining": extra}
    if reason == "duplicate":
        return {"kept": key_to_wire(extra) if wire else frame_id_of_key(extra)}
    if reason == "provider_cap":
        provider, cap, share = extra
        return {"provider": provider, "cap": cap, "share": share}
    return dict(extra) if extra else {}


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

    @property
    def included(self) -> bool:
        return self.disposition == INCLUDED

    @property
    def provider_id(self) -> str:
        return self.frame.provider_id

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
) -> dict[str, Any]:
    out: dict[str, Any] = {
        "frame": frame,
        "provider": provider_id,
        "disposition": INCLUDED if reason is None else EXCLUDED,
    }
    if reason is not None:
        out["reason"] = reason
        out["detail"] = detail
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
    included, never above the budget), ``policy`` (strategy and placement) and
    ``floors``. An entry's ``tokens`` is what its fenced block costs.
    """

    __slots__ = (
        "_entries",
        "_more_rows",
        "_rows",
        "_sorted",
        "floors",
        "global_budget",
        "policy",
        "tokens_used",
    )

    def __init__(
        self,
        rows: list[Row],
        *,
        global_budget: int,
        tokens_used: int,
        policy: Mapping[str, Any],
        floors: tuple[FloorRecord, ...] = (),
        more_rows: Callable[[], list[Row]] | None = None,
    ) -> None:
        """``more_rows`` produces further rows on first read (the packer's bulk of
        excluded frames), so a composition nobody audits does not build them."""
        self._rows = rows
        self._sorted = False
        self._more_rows = more_rows
        self._entries: tuple[AuditEntry, ...] | None = None
        self.global_budget = global_budget
        self.tokens_used = tokens_used
        self.policy = dict(policy)
        self.floors = floors

    def _all_rows(self) -> list[Row]:
        if self._more_rows is not None:
            self._rows.extend(self._more_rows())
            self._more_rows = None
            self._sorted = False
        return self._rows

    def _sorted_rows(self) -> list[Row]:
        rows = self._all_rows()
        if self._sorted:
            return rows
        # Ranked frames first, best first (their rank is already set-pure), then
        # the rest (duplicates, then earlier stages' exclusions) in canonical
        # FrameId order with every other field as the tie-break.
        ranked = [r for r in rows if r[3] is not None]
        ranked.sort(key=_RANK)
        rest = [r for r in rows if r[3] is None]
        rest.sort(key=_unranked_order)
        rows[:] = ranked + rest
        self._sorted = True
        return rows

    @property
    def entries(self) -> tuple[AuditEntry, ...]:
        if self._entries is None:
            self._entries = tuple(
                AuditEntry(
                    frame_id_of_key(key),
                    INCLUDED if reason is None else EXCLUDED,
                    reason,
                    _detail(reason, extra, tokens, wire=False),
                    rank,
                    score,
                    position,
                    tokens,
                    verification,
                    vouched,
                )
                for key, reason, extra, rank, score, position, tokens, verification, vouched in (
                    self._sorted_rows()
                )
            )
        return self._entries

    def __len__(self) -> int:
        return len(self._all_rows())

    def included(self) -> list[AuditEntry]:
        return [e for e in self.entries if e.reason is None]

    def excluded(self) -> list[AuditEntry]:
        return [e for e in self.entries if e.reason is not None]

    def counts(self) -> dict[str, Any]:
        """``{"included": n, "excluded": {reason: n}}`` without building entries."""
        included = 0
        excluded: dict[str, int] = {}
        for row in self._all_rows():
            reason = row[1]
            if reason is None:
                included += 1
            else:
                excluded[reason] = excluded.get(reason, 0) + 1
        return {"included": included, "excluded": dict(sorted(excluded.items()))}

    def entry_dicts(self) -> list[dict[str, Any]]:
        """Every entry as a JSON-ready dict, in ``entries`` order (one log event each)."""
        return [
            _entry_dict(
                key_to_wire(key),
                key[0],
                reason,
                _detail(reason, extra, tokens, wire=True),
                rank,
                score,
                position,
                tokens,
                verification,
                vouched,
            )
            for key, reason, extra, rank, score, position, tokens, verification, vouched in (
                self._sorted_rows()
            )
        ]

    def to_wire(self) -> dict[str, Any]:
        return {
            "entries": self.entry_dicts(),
            "global_budget": self.global_budget,
            "tokens_used": self.tokens_used,
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
    """The prompt block, its citation map (render order) and its audit record."""

    prompt: str
    citations: tuple[Citation, ...]
    audit: CompositionAudit

    @property
    def tokens_used(self) -> int:
        return self.audit.tokens_used

    def to_wire(self) -> dict[str, Any]:
        return {
            "prompt": self.prompt,
            "citations": [c.to_wire() for c in self.citations],
            "audit": self.audit.to_wire(),
        }
