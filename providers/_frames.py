"""What every bundled provider does the same way: timestamps, score maps, budget packing.

``pack`` is the one place a provider turns its ranked candidates into the frames
it may return: it honours ``kinds`` (Q1), ``max_frames`` (B4) and ``max_tokens``
(B1) with ``token_cost`` computed as the protocol defines it (B3), so no
provider can get those rules wrong on its own.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TypeVar

from hostd.protocol import ContextFrame, ContextQuery, ContextQueryResult

__all__ = [
    "Packed",
    "format_timestamp",
    "now_timestamp",
    "pack",
    "query_text",
    "saturate",
]

T = TypeVar("T")


def format_timestamp(at: datetime) -> str:
    """An aware datetime in the F4 profile: ``YYYY-MM-DDTHH:MM:SS(.ffffff)?Z``, UTC."""
    at = at.astimezone(UTC)
    base = at.strftime("%Y-%m-%dT%H:%M:%S")
    if at.microsecond:
        base += f".{at.microsecond:06d}".rstrip("0")
    return base + "Z"


def now_timestamp() -> str:
    return format_timestamp(datetime.now(UTC))


def saturate(raw: float, half: float) -> float:
    """Map an unbounded non-negative score into ``[0, 1)``: ``raw / (raw + half)`` (F1).

    Monotone, so the provider's order is kept (scores are ordinal, F10); ``half``
    is the raw score that maps to 0.5.
    """
    if raw <= 0.0:
        return 0.0
    return raw / (raw + half)


def query_text(query: ContextQuery) -> str:
    """The text to search for: ``query_text`` when given, the ``goal`` otherwise."""
    text = (query.query_text or "").strip()
    return text or query.goal.strip()


@dataclass(slots=True, frozen=True)
class Packed:
    frames: list[ContextFrame]
    truncated: bool
    dropped: int
    #: Files changed on disk that the index answered from does not hold yet: a rebuild
    #: is under way (``unindexed_changes`` on the wire).
    behind: int = 0

    def to_result(self) -> ContextQueryResult:
        return ContextQueryResult(
            frames=[f.to_wire() for f in self.frames],
            truncated=self.truncated,
            dropped_estimate=self.dropped if self.truncated else None,
            unindexed_changes=self.behind or None,
        )


def pack(
    candidates: Iterable[T],
    query: ContextQuery,
    *,
    kind_of: Callable[[T], str],
    build: Callable[[T], ContextFrame],
    scan_limit: int = 500,
) -> Packed:
    """Best-first candidates → the frames to return under the query's limits.

    Candidates whose kind the query excludes are not eligible (Q1). Frames are
    taken in order while ``max_frames`` allows (B4); one whose ``token_cost``
    does not fit the remaining ``max_tokens`` is skipped and a cheaper later one
    may still fit (B1). ``truncated`` says an eligible candidate was left out.
    """
    kinds = set(query.kinds)
    remaining = query.max_tokens
    frames: list[ContextFrame] = []
    dropped = 0
    for scanned, cand in enumerate(candidates):
        if kinds and kind_of(cand) not in kinds:
            continue
        if len(frames) >= query.max_frames or scanned >= scan_limit:
            dropped += 1
            continue
        frame = build(cand)
        if frame.token_cost > remaining:
            dropped += 1
            continue
        frames.append(frame)
        remaining -= frame.token_cost
    return Packed(frames, dropped > 0, dropped)
