"""Placement: where the selected frames sit in the prompt, applied after packing.

Placement never changes *what* is included, only the order it is rendered in.
``edges`` puts the best frames at the top and bottom of the block, where a long
context is read most reliably (Liu et al., "Lost in the Middle", TACL 2024),
``ranked`` keeps the policy's order, ``grouped`` keeps each provider's frames
together, ``canonical`` uses FrameId order (byte-stable under re-scoring).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import Any, Literal, TypeAlias, TypeVar

from ._candidates import CandidateSet, FramePair
from .ranking import ScoreDescending, Strategy, rank_with

__all__ = ["PLACEMENTS", "Placement", "fold_to_edges", "order_by", "order_by_value", "place"]

T = TypeVar("T")

Placement: TypeAlias = Literal["edges", "ranked", "grouped", "canonical"]
PLACEMENTS: tuple[str, ...] = ("edges", "ranked", "grouped", "canonical")
_EXPECTED = ", ".join(PLACEMENTS)


def check_placement(placement: object) -> str:
    if placement not in PLACEMENTS:
        raise ValueError(f"unknown placement {placement!r}; expected one of {_EXPECTED}")
    return str(placement)


def fold_to_edges(ranked: Sequence[T]) -> list[T]:
    """Best at the top, second at the bottom, third just inside the top, and so on."""
    items = list(ranked)
    return items[0::2] + items[1::2][::-1]


def place_indices(
    placement: str,
    ranked: list[int],
    provider_ids: Sequence[str],
    key_of: Callable[[int], Any],
) -> list[int]:
    """Apply ``placement`` to candidate indices given best first."""
    if placement == "edges":
        return fold_to_edges(ranked)
    if placement == "ranked":
        return list(ranked)
    if placement == "canonical":
        return sorted(ranked, key=key_of)
    if placement == "grouped":
        # Providers in the order of their best frame; each keeps its rank order.
        groups: dict[str, list[int]] = {}
        for i in ranked:
            groups.setdefault(provider_ids[i], []).append(i)
        return [i for members in groups.values() for i in members]
    raise ValueError(f"unknown placement {placement!r}; expected one of {_EXPECTED}")


def place(placement: str, ranked: Iterable[FramePair]) -> list[FramePair]:
    """Apply a named placement to ``(provider_id, frame)`` pairs given best first."""
    c = CandidateSet.of(list(ranked))
    order = place_indices(check_placement(placement), list(range(len(c))), c.provider_ids, c.key)
    return [c[i] for i in order]


def order_by(
    strategy: Strategy, frames: Iterable[FramePair], *, placement: str = "edges"
) -> list[FramePair]:
    """Rank ``frames`` with ``strategy``, then place them (``edges`` by default)."""
    c = CandidateSet.of(frames)
    ranked = rank_with(strategy, c)
    return [c[i] for i in place_indices(check_placement(placement), ranked, c.provider_ids, c.key)]


def order_by_value(frames: Iterable[FramePair]) -> list[FramePair]:
    """Score descending (canonical ties), folded to the edges."""
    return order_by(ScoreDescending(), frames)
