"""The candidate pool: frames as columns, with their canonical keys precomputed.

Ranking and packing touch every candidate, so they read plain Python columns
(provider ids, scores, canonical sort keys) built once per composition instead
of going back to the pydantic models or minting a ``FrameId`` per comparison.
Every order produced here ends in the canonical FrameId key, so it is a pure
function of the input *set* (never of arrival or dict order).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeAlias, overload

from hostd.protocol import ContextFrame, FrameId

__all__ = ["CandidateSet", "FramePair", "SortKey", "frame_sort_key"]

#: ``FrameId.sort_key``: ``(provider_id, frame_id, has_digest, digest or "")``.
SortKey: TypeAlias = tuple[str, str, bool, str]
FramePair: TypeAlias = tuple[str, ContextFrame]


def frame_sort_key(provider_id: str, frame: ContextFrame) -> SortKey:
    """The canonical key of ``FrameId.of(provider_id, frame)`` without building one."""
    digest = frame.content_digest
    return (provider_id, frame.id, digest is not None, digest or "")


def frame_id_of_key(key: SortKey) -> FrameId:
    return FrameId(key[0], key[1], key[3] if key[2] else None)


def key_to_wire(key: SortKey) -> dict[str, Any]:
    """``FrameId.to_wire()`` straight from the key (no FrameId built)."""
    if key[2]:
        return {"provider_id": key[0], "frame_id": key[1], "content_digest": key[3]}
    return {"provider_id": key[0], "frame_id": key[1]}


def _rankable(score: float) -> float:
    # NaN is unordered and would make any sort depend on arrival order; a frame
    # that carries one (F1 violation) ranks as low as possible instead.
    return -math.inf if score != score else float(score)


@dataclass(slots=True, frozen=True)
class CandidateSet(Sequence[FramePair]):
    """Frames offered to a ranking policy, as aligned columns.

    Iterating (or indexing) yields ``(provider_id, frame)`` pairs, so a
    ``CandidateSet`` is also a plain frame list. ``support`` records, for a
    frame that survived cross-provider dedup, every provider that vouched for it
    with that provider's best score for the evidence; a frame without an entry
    was vouched for by its own provider only.
    """

    provider_ids: tuple[str, ...]
    frames: tuple[ContextFrame, ...]
    keys: tuple[SortKey, ...]
    scores: tuple[float, ...]
    support: Mapping[int, tuple[tuple[str, float], ...]] = field(default_factory=dict)

    @classmethod
    def of(cls, frames: CandidateSet | Iterable[FramePair]) -> CandidateSet:
        """The pool for ``frames``; a ``CandidateSet`` is returned as it is."""
        if isinstance(frames, CandidateSet):
            return frames
        pairs = frames if isinstance(frames, list | tuple) else list(frames)
        pids = tuple([p for p, _ in pairs])
        fs = tuple([f for _, f in pairs])
        for p in pids:
            if not isinstance(p, str):
                raise TypeError(f"provider id must be a str, got {type(p).__name__}")
        keys = tuple([(p, f.id, (d := f.content_digest) is not None, d or "") for p, f in pairs])
        scores = [f.score for f in fs]
        if any(s != s for s in scores):
            scores = [_rankable(s) for s in scores]
        return cls(pids, fs, keys, tuple(scores))

    def __len__(self) -> int:
        return len(self.frames)

    @overload
    def __getitem__(self, index: int) -> FramePair: ...
    @overload
    def __getitem__(self, index: slice) -> Sequence[FramePair]: ...
    def __getitem__(self, index: int | slice) -> FramePair | Sequence[FramePair]:
        if isinstance(index, slice):
            return list(zip(self.provider_ids[index], self.frames[index], strict=True))
        return (self.provider_ids[index], self.frames[index])

    def __iter__(self) -> Iterator[FramePair]:
        return zip(self.provider_ids, self.frames, strict=True)

    def frame_id(self, index: int) -> FrameId:
        return frame_id_of_key(self.keys[index])

    def supporters(self, index: int) -> tuple[tuple[str, float], ...]:
        """``(provider_id, best score)`` for each provider vouching for ``index``."""
        sup = self.support.get(index)
        if sup is None:
            return ((self.provider_ids[index], self.scores[index]),)
        return sup

    def vouched_by(self, index: int) -> tuple[str, ...]:
        """Every provider that vouched for the frame, in provider-id order."""
        return tuple(p for p, _ in self.supporters(index))

    def by_provider(self) -> dict[str, list[int]]:
        """Each provider's own frames ranked by its own score (F10), canonical ties."""
        groups: dict[str, list[int]] = {}
        for i, p in enumerate(self.provider_ids):
            lst = groups.get(p)
            if lst is None:
                groups[p] = [i]
            else:
                lst.append(i)
        return {p: rank_desc(groups[p], self.scores, self.keys) for p in sorted(groups)}


def rank_desc(
    indices: Iterable[int], values: Sequence[float], keys: Sequence[SortKey]
) -> list[int]:
    """``indices`` by ``values`` descending, equal values in canonical key order.

    Sorts on the float alone (CPython compares all-float keys without the
    generic object protocol) and then re-sorts only the runs of equal values by
    their canonical key, which is much cheaper than a tuple key per element when
    ties are rare and still exact when they are not.
    """
    order = sorted(indices, key=values.__getitem__, reverse=True)
    n = len(order)
    if n < 2:
        return order
    vals = [values[i] for i in order]
    if len(set(vals)) == n:
        return order
    out: list[int] = []
    i = 0
    while i < n:
        v = vals[i]
        j = i + 1
        while j < n and vals[j] == v:
            j += 1
        if j - i == 1:
            out.append(order[i])
        else:
            out.extend(sorted(order[i:j], key=keys.__getitem__))
        i = j
    return out
