"""The candidate pool: frames as columns, read from the models once.

Ranking and packing touch every candidate, so they read plain Python columns
(provider ids, frame ids, digests, scores) pulled out of the pydantic models
in one C-level pass, instead of going back to the models or minting a
``FrameId`` per comparison. Canonical keys (the ``FrameId`` tuple) are built on
demand: only ties, the audit and the rendered frames need them. Every order
produced here ends in the canonical key, so it is a pure function of the input
*set* (never of arrival or dict order).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from functools import partial
from operator import attrgetter, itemgetter
from typing import Any, TypeAlias, overload

from hostd.protocol import ContextFrame, FrameId

__all__ = ["CandidateSet", "FramePair", "SortKey", "frame_sort_key", "rank_desc"]

#: A ``FrameId`` as a plain tuple: ``(provider_id, frame_id, has_digest, digest or "")``.
SortKey: TypeAlias = tuple[str, str, bool, str]
FramePair: TypeAlias = tuple[str, ContextFrame]

# Read straight from the model's ``__dict__`` (where pydantic v2 keeps field
# values): attribute access on a model goes through its ``__getattr__`` hook and
# costs several times more, which matters at 100k frames.
_FIELD_GETTERS = tuple(map(itemgetter, ("id", "content_digest", "score", "content", "provenance")))
_DICT = attrgetter("__dict__")
_NEG_INF = float("-inf")
_FIRST = itemgetter(0)
_SECOND = itemgetter(1)


def read_columns(
    frames: Sequence[ContextFrame],
) -> tuple[
    tuple[str, ...],
    tuple[str | None, ...],
    tuple[float, ...],
    tuple[str | None, ...],
    tuple[Any, ...],
]:
    """``(ids, digests, scores, contents, provenances)`` of ``frames``.

    Read from each model's ``__dict__``, where pydantic v2 keeps field values
    (also for ``model_construct``), in one C-level pass per field: attribute
    access would go through the model's ``__getattr__`` hook for every read.
    """
    if not frames:
        return (), (), (), (), ()
    # A pass per field: no row tuple per frame to build, track and take apart.
    dicts = list(map(_DICT, frames))
    ids, digests, scores, contents, provenances = (tuple(map(g, dicts)) for g in _FIELD_GETTERS)
    return ids, digests, scores, contents, provenances


def pick_from(indices: Sequence[int]) -> Callable[[Sequence[Any]], tuple[Any, ...]]:
    """A function taking ``seq`` to ``tuple(seq[i] for i in indices)``, in C."""
    if len(indices) == 0:
        return lambda seq: ()
    if len(indices) == 1:
        only = indices[0]
        return lambda seq: (seq[only],)
    getter = itemgetter(*indices)
    return lambda seq: getter(seq)  # a tuple for 2+ indices


def frame_sort_key(provider_id: str, frame: ContextFrame) -> SortKey:
    """The canonical key of ``FrameId.of(provider_id, frame)`` without building one."""
    digest = frame.content_digest
    return (provider_id, frame.id, digest is not None, digest or "")


def frame_id_of_key(key: SortKey) -> FrameId:
    """The ``FrameId`` whose sort key is ``key``: a FrameId *is* that tuple, so it is
    made from it in C (``FrameId.__new__`` would take it apart and build it again)."""
    return _FRAME_ID(key)


_FRAME_ID = partial(tuple.__new__, FrameId)


def key_to_wire(key: SortKey) -> dict[str, Any]:
    """``FrameId.to_wire()`` straight from the key (no FrameId built)."""
    if key[2]:
        return {"provider_id": key[0], "frame_id": key[1], "content_digest": key[3]}
    return {"provider_id": key[0], "frame_id": key[1]}


def rankable_scores(scores: Sequence[float]) -> tuple[float, ...]:
    """Scores with NaN (unordered, F1-invalid) read as -inf, so sorts stay total."""
    return tuple([_NEG_INF if s != s else s for s in scores])


@dataclass(slots=True, frozen=True, repr=False)
class CandidateSet(Sequence[FramePair]):
    """Frames offered to a ranking policy, as aligned columns.

    Iterating (or indexing) yields ``(provider_id, frame)`` pairs, so a
    ``CandidateSet`` is also a plain frame list. ``scores`` are the frames'
    scores with NaN read as -inf. ``support`` records, for a frame that survived
    cross-provider dedup, every provider that vouched for it with that
    provider's best score for the evidence; a frame without an entry was
    vouched for by its own provider only.
    """

    provider_ids: tuple[str, ...]
    frames: tuple[ContextFrame, ...]
    ids: tuple[str, ...]
    digests: tuple[str | None, ...]
    scores: tuple[float, ...]
    support: Mapping[int, tuple[tuple[str, float], ...]] = field(default_factory=dict)
    #: ``canonical()``, once asked (every copy sorts its own).
    _canonical: list[int] | None = field(default=None, init=False, compare=False)
    #: ``key_column()``, once asked: dedup ranks its groups by the keys and the audit
    #: orders the duplicates by them, one column for both.
    _keys: list[SortKey] | None = field(default=None, init=False, compare=False)

    @classmethod
    def of(cls, frames: CandidateSet | Iterable[FramePair]) -> CandidateSet:
        """The pool for ``frames``; a ``CandidateSet`` is returned as it is."""
        if isinstance(frames, CandidateSet):
            return frames
        return cls.with_columns(frames)[0]

    @classmethod
    def with_columns(
        cls, frames: Iterable[FramePair]
    ) -> tuple[CandidateSet, tuple[str | None, ...], tuple[Any, ...]]:
        """The pool plus its ``contents`` and ``provenances`` columns (same pass)."""
        pairs = frames if isinstance(frames, list | tuple) else list(frames)
        if not pairs:
            return cls((), (), (), (), ()), (), ()
        pids = tuple(map(_FIRST, pairs))
        fs = tuple(map(_SECOND, pairs))
        if set(map(type, pids)) != {str}:
            raise TypeError("frames must be (provider_id: str, ContextFrame) pairs")
        ids, digests, scores, contents, provenances = read_columns(fs)
        return cls(pids, fs, ids, digests, rankable_scores(scores)), contents, provenances

    def subset(self, indices: Sequence[int]) -> CandidateSet:
        """The candidates at ``indices`` (in that order); ``support`` is not carried."""
        pick = pick_from(indices)
        return CandidateSet(
            pick(self.provider_ids),
            pick(self.frames),
            pick(self.ids),
            pick(self.digests),
            pick(self.scores),
        )

    def __len__(self) -> int:
        return len(self.frames)

    def __repr__(self) -> str:
        return (
            f"CandidateSet({len(self.frames)} frames, providers={sorted(set(self.provider_ids))})"
        )

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

    def key(self, index: int) -> SortKey:
        """The canonical FrameId key of candidate ``index``."""
        d = self.digests[index]
        return (self.provider_ids[index], self.ids[index], d is not None, d or "")

    @property
    def keys(self) -> list[SortKey]:
        return self.key_column()

    def key_column(self) -> list[SortKey]:
        """Every candidate's canonical key, index aligned (zipped from the columns in
        C, not built one call at a time), built once: read it, do not change it."""
        keys = self._keys
        if keys is None:
            digests = self.digests
            has = [d is not None for d in digests]
            keys = list(
                zip(self.provider_ids, self.ids, has, [d or "" for d in digests], strict=True)
            )
            object.__setattr__(self, "_keys", keys)
        return keys

    def canonical(self) -> list[int]:
        """Every index in canonical FrameId order, sorted once and then reused.

        Every order the policies produce breaks ties by this one: a stable sort
        of ``canonical()`` by a value keeps equal values in canonical order, so no
        run of ties needs sorting again (``rank_desc``).
        """
        order = self._canonical
        if order is None:
            # Sorted field by field, the least significant first: each pass is stable,
            # so the result is the key order, and no key tuple is built. The digest
            # (None first) decides only between equal (provider, id) pairs, so its pass
            # is skipped when every frame id is distinct.
            ids = self.ids
            indices: Iterable[int] = range(len(ids))
            if len(set(ids)) != len(ids):
                rest = ["" if d is None else "\x01" + d for d in self.digests]
                indices = sorted(indices, key=rest.__getitem__)
            order = sorted(sorted(indices, key=ids.__getitem__), key=self.provider_ids.__getitem__)
            object.__setattr__(self, "_canonical", order)
        return order

    def frame_id(self, index: int) -> FrameId:
        return FrameId(self.provider_ids[index], self.ids[index], self.digests[index])

    def vouched_by(self, index: int) -> tuple[str, ...]:
        """Every provider that vouched for the frame, in provider-id order."""
        sup = self.support.get(index)
        if sup is None:
            return (self.provider_ids[index],)
        return tuple(p for p, _ in sup)

    def by_score(self) -> list[int]:
        """All candidates by score descending, canonical FrameId on ties."""
        return rank_desc(self.canonical(), self.scores)


def rank_desc(canonical: Iterable[int], values: Sequence[float]) -> list[int]:
    """Indices given in canonical FrameId order (``CandidateSet.canonical()`` or a
    subsequence of it), by ``values`` descending, equal values in that order.

    One sort on the float alone (CPython compares all-float keys on a fast path);
    the sort is stable, also in reverse, so ties keep their canonical order and
    no tie-break key is built. ``values`` hold no NaN (see ``rankable_scores``).
    """
    return sorted(canonical, key=values.__getitem__, reverse=True)
