"""Cross-provider dedup: one frame per piece of evidence, whoever served it (D2).

Frame ids are provider-scoped, so the same file region returned by two
providers arrives under two identities. Two frames are the same evidence when
they share a ``content_digest``, or a ``file`` provenance with equal ``uri``
and ``range``, or their whole identity, or (frames of two providers, one of them
with ``file`` provenance and one without) their text up to line endings and blank space
(``_same_text``); the relation is closed transitively (union-find over hash
maps, so linear in the input, never a pairwise scan).
In each group the highest score survives (ties to the canonically smaller
FrameId) and carries the de-duplicated union of the group's provenance.
"""

from __future__ import annotations

from bisect import bisect_left
from collections import deque
from collections.abc import Hashable, Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from itertools import accumulate, chain, compress, repeat
from operator import attrgetter, eq, itemgetter, ne
from typing import Any

from hostd.protocol import ContextFrame, FrameId, Provenance

from ._candidates import CandidateSet, FramePair, SortKey, frame_id_of_key, pick_from
from ._same_text import text_links

__all__ = ["DedupDrop", "Deduped", "dedup_cross_provider", "no_place"]


@dataclass(slots=True, frozen=True)
class DedupDrop:
    """A frame collapsed into the survivor ``kept`` that quotes the same evidence."""

    dropped: FrameId
    kept: FrameId


@dataclass(slots=True, frozen=True)
class Deduped:
    """``kept``: one candidate per piece of evidence, in canonical order (iterates as
    ``(provider_id, frame)`` pairs; ``kept.vouched_by(i)`` names every provider
    behind candidate ``i``). ``dropped``: every collapsed frame, canonical order."""

    kept: CandidateSet
    dropped: list[DedupDrop]


@dataclass(slots=True, frozen=True)
class _DedupResult:
    """Internal, index based: ``origin[j]`` is the input index of kept candidate ``j``;
    ``drops`` pairs input indices ``(dropped, kept)``."""

    kept: CandidateSet
    origin: Sequence[int]
    drops: list[tuple[int, int]]
    #: Whether the same-text rules have pairs to compare (``_same_text``).
    mixed: bool = False
    #: When ``mixed``: each kept candidate, whether it has no ``file`` provenance.
    placeless: Sequence[bool] | None = None


def _prov_key(p: Provenance) -> tuple[str | None, ...]:
    """A provenance entry's fields, read from the model's ``__dict__`` (pydantic v2)."""
    return _PROV_FROM_DICT(p.__dict__)  # type: ignore[no-any-return]  # a 6-tuple of fields


def _group_members(n_links: list[tuple[int, int]]) -> dict[int, list[int]]:
    """Connected components of the linked indices, keyed by their smallest index."""
    parent: dict[int, int] = {}

    def find(x: int) -> int:
        root = x
        while (up := parent.get(root, root)) != root:
            root = up
        while x != root:
            up = parent.get(x, x)
            parent[x] = root
            x = up
        return root

    for a, b in n_links:
        ra, rb = find(a), find(b)
        if ra != rb:
            if ra < rb:
                parent[rb] = ra
            else:
                parent[ra] = rb
    groups: dict[int, list[int]] = {}
    for x in list(parent):
        groups.setdefault(find(x), []).append(x)
    for root, members in groups.items():
        if root not in members:
            members.append(root)
    return groups


def _groups(
    same: list[tuple[int, int]], regions: list[tuple[int, int]], n: int
) -> dict[int, list[int]]:
    """The groups of ``same`` (``_repeats`` pairs: each repeat with its key's first
    position) joined with the ``regions`` links, as ``_group_members`` finds them.

    ``same`` alone needs no union-find: every repeat points at its key's first
    position, which is its group's root. When each region link joins two frames
    already in one such group (the same evidence served twice quotes the same region
    under the same digest), those are the groups; else the union-find decides.
    """
    if not same:
        return _group_members(regions)
    repeats, firsts = zip(*same, strict=True)
    if regions:
        root = list(range(n))
        for k, f in same:
            root[k] = f
        if any(root[a] != root[b] for a, b in regions):
            return _group_members(same + regions)
    # Each group opens with its first position, then its repeats in order (C loops).
    groups = {f: [f] for f in firsts}
    deque(map(list.append, map(groups.__getitem__, firsts), repeats), maxlen=0)
    return groups


_PROVENANCE = attrgetter("provenance")
_PROV_FROM_DICT = itemgetter("type", "uri", "range", "digest", "method", "by")
_TYPE = itemgetter("type")
_REGION_FROM_DICT = itemgetter("type", "uri", "range")
_DICT = attrgetter("__dict__")


def _repeats(keys: Sequence[Hashable]) -> list[tuple[int, int]]:
    """``(k, f)`` for every position ``k`` whose key first appeared at ``f < k``.

    One C-level pass: ``dict.setdefault`` stores each key's first position and
    hands it back for every later occurrence, so each key is hashed and looked
    up once; a second pass compares the positions.
    """
    n = len(keys)
    first: dict[Hashable, int] = {}
    firsts = list(map(first.setdefault, keys, range(n)))
    if len(first) == n:
        return []
    return [(k, firsts[k]) for k in compress(range(n), map(ne, firsts, range(n)))]


def _region_links(dicts: list[Any], owners: Sequence[int]) -> list[tuple[int, int]]:
    """Links between owners of equal ``file`` regions (same ``uri`` and ``range``).

    Keyed by the exact ``(type, uri, range)`` triple of every provenance entry,
    read from its model's ``__dict__`` (``dicts``); ``_repeats`` pairs each repeat
    with the region's first entry.
    """
    regions = list(map(_REGION_FROM_DICT, dicts))
    return [
        (owners[k], owners[f])
        for k, f in _repeats(regions)
        if regions[k][0] == "file" and regions[k][1] is not None and owners[k] != owners[f]
    ]


def _merged_provenance(
    ranked: Sequence[int],
    best: int,
    provs: Sequence[Sequence[Provenance]],
    pkeys: Mapping[int, Sequence[tuple[str | None, ...]]],
) -> list[Provenance] | None:
    """The de-duplicated union of the group's provenance, best first, or None when
    it equals the survivor's own (nothing added from another member, no repeat).
    ``pkeys[i]``: the ``_prov_key`` of each of ``provs[i]``."""
    merged: list[Provenance] = []
    seen: set[tuple[str | None, ...]] = set()
    changed = False  # anything added from another member, or a repeat dropped
    for i in ranked:
        for pv, k in zip(provs[i], pkeys[i], strict=True):
            if k in seen:
                changed = changed or i == best
            else:
                seen.add(k)
                merged.append(pv)
                changed = changed or i != best
    return merged if changed else None


def _merged_single(
    ranked: Sequence[int],
    provs: Sequence[Sequence[Provenance]],
    pkeys: Mapping[int, Sequence[tuple[str | None, ...]]],
) -> list[Provenance] | None:
    """``_merged_provenance`` of a group whose members each carry one entry: the
    first member (the survivor) cannot repeat itself, so the union differs from its
    own exactly when another member's entry is new; the union is each distinct
    entry's first holder's, in rank order (found in C, one dict pass)."""
    first: dict[tuple[str | None, ...], int] = {}
    deque(map(first.setdefault, [pkeys[i][0] for i in ranked], ranked), maxlen=0)
    if len(first) == 1:
        return None
    return [provs[i][0] for i in first.values()]


def no_place(provenance: Iterable[Provenance]) -> bool:
    """Whether a frame with this provenance has no ``file`` entry (no place to re-read)."""
    return all(p.type != "file" for p in provenance)


def _placeless(
    pool: CandidateSet, dicts: list[Any], owners: Sequence[int], single: bool
) -> list[bool] | None:
    """Each frame: whether it has no ``file`` provenance; None when the same-text rules
    have no pair to compare (one provider; every frame a place, or none), which one
    pass over the entries' types tells for the common pool."""
    n = len(pool)
    types = list(map(_TYPE, dicts))
    if single and types.count("file") == n:  # every frame a place: the common pool
        return None
    if len(set(pool.provider_ids)) < 2:
        return None
    placed = bytearray(n)
    for k in compress(range(len(types)), map(eq, types, repeat("file"))):
        placed[owners[k]] = 1
    if placed.count(1) in (0, n):  # no place, or no frame without one: no pair
        return None
    return [not p for p in placed]


def dedup_pool(
    pool: CandidateSet,
    provenances: Sequence[Sequence[Provenance]] | None = None,
    contents: Sequence[str | None] | None = None,
) -> _DedupResult:
    """Group ``pool`` by evidence; survivors keep input order (callers rank them).

    ``provenances`` and ``contents`` are the pool's columns, if the caller already
    has them.
    """
    frames = pool.frames
    n = len(frames)
    digests: Sequence[Any] = pool.digests
    provs = provenances if provenances is not None else list(map(_PROVENANCE, frames))
    keys: list[SortKey] | None = None
    # Same evidence (D2): an equal content digest, else an equal identity ...
    if None in digests:
        # a 4-tuple identity never equals a digest string
        keys = pool.key_column()
        digests = [keys[i] if d is None else d for i, d in enumerate(digests)]
    same = _repeats(digests)
    # ... or the same file region (uri and range).
    flat = list(chain.from_iterable(provs))
    # Most frames carry one provenance entry: then entry k is frame k's.
    single = len(flat) == n and list(map(len, provs)).count(1) == n
    owners: Sequence[int] = (
        range(n) if single else list(chain.from_iterable(map(repeat, range(n), map(len, provs))))
    )
    dicts = list(map(_DICT, flat))
    regions = _region_links(dicts, owners)
    # ... or the same text, one provider's with a place and another's without.
    placeless = _placeless(pool, dicts, owners, single)
    if placeless is not None:
        if contents is None:
            contents = [f.content for f in frames]
        regions += text_links(contents, pool.provider_ids, placeless)
    mixed = placeless is not None
    if not (same or regions):
        return _DedupResult(pool, range(n), [], mixed, placeless)

    # Only the groups' members are read further: most frames are in none, and their
    # keys and provenance fields are never built (nor their models' memory touched).
    # Every group member's key is read (to rank it), and the audit orders the dropped
    # frames by theirs: the pool's key column, zipped in C once, serves both.
    key_of = (keys if keys is not None else pool.key_column()).__getitem__
    if single:

        def pkeys_of(i: int) -> Sequence[tuple[str | None, ...]]:
            return (_PROV_FROM_DICT(dicts[i]),)

    else:
        ends = list(accumulate(map(len, provs)))

        def pkeys_of(i: int) -> Sequence[tuple[str | None, ...]]:
            return list(map(_PROV_FROM_DICT, dicts[ends[i] - len(provs[i]) : ends[i]]))

    scores = pool.scores
    pids = pool.provider_ids
    keep_mask = bytearray(b"\x01") * n
    drops: list[tuple[int, int]] = []
    replaced: dict[int, ContextFrame] = {}
    support: dict[int, tuple[tuple[str, float], ...]] = {}
    for members in _groups(same, regions, n).values():
        # Every member's entries' fields, read once: the merged provenance compares them.
        pkeys = {i: pkeys_of(i) for i in members}
        if len(members) == 2:  # most groups: one frame served twice, ranked by hand
            a, b = members
            sa, sb, ka, kb = scores[a], scores[b], key_of(a), key_of(b)
            ranked = [a, b] if sa > sb or (sa == sb and ka <= kb) else [b, a]
            tied = sa == sb and ka == kb
        else:
            # Score descending, then the canonical key: two stable sorts, no key tuple.
            keys_of = {i: key_of(i) for i in members}
            ranked = sorted(members, key=keys_of.__getitem__)
            ranked.sort(key=scores.__getitem__, reverse=True)
            # A tie needs one identity twice in the group: most groups have none.
            tied = len(set(keys_of.values())) < len(ranked) and any(
                scores[a] == scores[b] and keys_of[a] == keys_of[b]
                for a, b in zip(ranked, ranked[1:], strict=False)
            )
        if tied:
            # The same identity offered more than once with different bodies, at
            # any rank: settle each tie by the frame's own serialisation so the
            # survivor and the merged provenance's order stay set-pure.
            ranked.sort(key=lambda i: (-scores[i], key_of(i), frames[i].model_dump_json()))
        best = ranked[0]
        merged = (
            _merged_single(ranked, provs, pkeys)
            if single
            else _merged_provenance(ranked, best, provs, pkeys)
        )
        if merged is not None:
            replaced[best] = frames[best].model_copy(update={"provenance": merged})
        # Each provider's best score: the members best first, so its first one (the
        # last written when the ranking is walked backwards).
        back = ranked[::-1]
        best_by_provider = dict(
            zip(map(pids.__getitem__, back), map(scores.__getitem__, back), strict=True)
        )
        if len(best_by_provider) > 1:
            support[best] = tuple(sorted(best_by_provider.items()))
        lost = ranked[1:]
        deque(map(keep_mask.__setitem__, lost, repeat(0)), maxlen=0)
        drops.extend(zip(lost, repeat(best)))

    origin = list(compress(range(n), keep_mask))
    # The kept set built once, its columns picked and its frames and support in place
    # (not a subset then two copies of it, each a frozen dataclass set field by field).
    pick = pick_from(origin)
    kept_frames = tuple([replaced.get(i, frames[i]) for i in origin]) if replaced else pick(frames)
    position = {i: bisect_left(origin, i) for i in support}  # origin is sorted
    kept = CandidateSet(
        pick(pool.provider_ids),
        kept_frames,
        pick(pool.ids),
        pick(pool.digests),
        pick(pool.scores),
        {position[i]: sup for i, sup in support.items()},
    )
    kept_placeless = None
    if placeless is not None:  # the packer's ``Quotes`` reads it: picked, not read again
        kept_placeless = [placeless[i] for i in origin]
        for j, i in enumerate(origin):
            if i in replaced:  # it carries its group's provenance now
                kept_placeless[j] = no_place(replaced[i].provenance)
    return _DedupResult(kept, origin, drops, mixed, kept_placeless)


def dedup_cross_provider(frames: Iterable[FramePair]) -> Deduped:
    """Collapse the same evidence served more than once into one surviving frame.

    A pure function of the input *set*: ``kept`` and ``dropped`` come back in
    canonical FrameId order whatever the arrival order.
    """
    pool = CandidateSet.of(frames)
    res = dedup_pool(pool)
    kept = res.kept
    order = sorted(range(len(kept)), key=kept.key)
    remap = {old: new for new, old in enumerate(order)}
    canonical = replace(
        kept.subset(order), support={remap[i]: sup for i, sup in kept.support.items()}
    )
    key = pool.key
    dropped = [
        DedupDrop(frame_id_of_key(key(d)), frame_id_of_key(key(k)))
        for d, k in sorted(res.drops, key=lambda dk: (key(dk[0]), key(dk[1])))
    ]
    return Deduped(canonical, dropped)
