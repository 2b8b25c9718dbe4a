"""Cross-provider ranking policies: each one orders candidates, none drops any.

Scores are provider-local (F10): no policy here applies a cross-provider score
threshold, and ``ReciprocalRankFusion`` never compares raw scores across
providers at all. A policy has a ``name`` and ``order(frames) -> list[int]``, a
permutation of the candidate indices, best first. ``rank_with`` checks what a
(possibly third-party) policy returned and repairs it, so the packer always
walks every candidate exactly once. Every order ends in the canonical FrameId
key, so it is a pure function of the candidate set.
"""

from __future__ import annotations

import math
from collections import defaultdict, deque
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from itertools import compress, filterfalse, islice, repeat, zip_longest
from operator import add, and_, eq, ge, itemgetter, le, not_, truediv
from typing import Any, ClassVar, Protocol, cast, runtime_checkable

from ._candidates import CandidateSet, FramePair, SortKey, rank_desc

__all__ = [
    "PerProviderQuota",
    "ReciprocalRankFusion",
    "RoundRobinByRank",
    "ScoreDescending",
    "Strategy",
    "is_ranking_permutation",
    "rank_with",
    "strategy_from_wire",
]

Frames = CandidateSet | Iterable[FramePair]
_FIRST = itemgetter(0)
_SECOND = itemgetter(1)


@runtime_checkable
class Strategy(Protocol):
    """A named cross-provider ranking policy."""

    @property
    def name(self) -> str: ...

    def order(self, frames: Frames) -> list[int]: ...


@dataclass(slots=True, frozen=True)
class ScoreDescending:
    """Score descending across providers, canonical FrameId on ties.

    The simplest policy and the one that starves a provider whose scores run on
    a lower scale (a lexical index next to an embedding one); kept because it
    is what most hosts do, so the audit can show it.
    """

    name: ClassVar[str] = "score"

    def order(self, frames: Frames) -> list[int]:
        return CandidateSet.of(frames).by_score()

    def to_wire(self) -> Any:
        return "score"


@dataclass(slots=True, frozen=True)
class RoundRobinByRank:
    """Each provider's best frame, then each one's second, and so on.

    Within a provider the order is its own score (F10); within a round the
    providers go in provider-id order, so no score crosses a provider boundary.
    """

    name: ClassVar[str] = "round_robin"

    def order(self, frames: Frames) -> list[int]:
        c = CandidateSet.of(frames)
        lists = list(c.by_provider().values())
        return [i for rnd in zip_longest(*lists) for i in rnd if i is not None]

    def to_wire(self) -> Any:
        return "round_robin"


@dataclass(slots=True, frozen=True)
class PerProviderQuota:
    """Every provider's top ``k`` first (by score among them), then the rest by score.

    ``k`` of 0 is read as 1: a quota that guarantees nothing is no quota.
    """

    k: int = 1
    name: ClassVar[str] = "quota"

    def __post_init__(self) -> None:
        if isinstance(self.k, bool) or not isinstance(self.k, int):
            raise ValueError(f"quota k must be an integer, got {self.k!r}")
        if self.k < 0:
            raise ValueError(f"quota k must not be negative, got {self.k}")

    @property
    def effective_k(self) -> int:
        return max(self.k, 1)

    def order(self, frames: Frames) -> list[int]:
        c = CandidateSet.of(frames)
        k = self.effective_k
        # One ranking by score; each provider's top k (its own order is the
        # global one restricted to it) move to the front, both parts keeping
        # the global order. The walk for the top k stops once every provider
        # has its k (or the ranking ends).
        ranked = c.by_score()
        waiting = dict.fromkeys(c.provider_ids, k)
        pids = c.provider_ids
        first: list[int] = []
        walked = len(ranked)
        for pos, i in enumerate(ranked):
            p = pids[i]
            left = waiting.get(p)
            if left is None:
                continue
            first.append(i)
            if left == 1:
                del waiting[p]
                if not waiting:
                    walked = pos + 1
                    break
            else:
                waiting[p] = left - 1
        # Everything moved to the front lies within the walked prefix, so only
        # that prefix is rewritten (in place); the rest keeps the score order.
        chosen = set(first)
        ranked[:walked] = first + list(filterfalse(chosen.__contains__, islice(ranked, walked)))
        return ranked

    def to_wire(self) -> Any:
        return {"quota": self.k}


@dataclass(slots=True, frozen=True)
class ReciprocalRankFusion:
    """Rank-space fusion: each provider adds ``weight / (k + rank)`` for a frame.

    ``rank`` is 1-based within that provider's own list (its own scores, F10);
    evidence a provider served more than once counts once, at its best rank; a
    frame vouched for by several providers (after dedup) sums their
    contributions. Weights are real: an unnamed provider weighs 1.0, and a
    weight of 0 sends that provider's frames to the end of the order (it never
    drops them; packing decides what fits).
    """

    k: float = 60
    weights: Mapping[str, float] | None = field(default=None)
    name: ClassVar[str] = "rrf"

    def __post_init__(self) -> None:
        if isinstance(self.k, bool) or not isinstance(self.k, int | float):
            raise ValueError(f"rrf k must be a number, got {self.k!r}")
        if not math.isfinite(self.k) or self.k < 0:
            raise ValueError(f"rrf k must be finite and >= 0, got {self.k!r}")
        if self.weights is not None:
            if not isinstance(self.weights, Mapping):
                raise ValueError("rrf weights must be a mapping of provider id to number")
            clean: dict[str, float] = {}
            for provider, w in self.weights.items():
                if not isinstance(provider, str):
                    raise ValueError(f"rrf weight key must be a provider id, got {provider!r}")
                if isinstance(w, bool) or not isinstance(w, int | float):
                    raise ValueError(f"rrf weight of {provider!r} must be a number, got {w!r}")
                if not math.isfinite(w) or w < 0:
                    raise ValueError(f"rrf weight of {provider!r} must be finite and >= 0")
                clean[provider] = float(w)
            object.__setattr__(self, "weights", clean)

    def weight(self, provider_id: str) -> float:
        if self.weights is None:
            return 1.0
        return self.weights.get(provider_id, 1.0)

    def _lists(self, c: CandidateSet) -> list[tuple[str, list[int], list[float], list[int]]]:
        """Per provider, in id order: its ranked list (candidate indices, best
        first), each entry's contribution ``weight / (k + rank)``, and the
        0-based ranks of the entries vouched for by several providers."""
        n = len(c)
        scores = c.scores
        support = c.support
        # Frames vouched for by several providers (after dedup) sit in each of
        # those providers' lists, valued by that provider's own best score.
        vouched: defaultdict[str, list[tuple[int, float]]] = defaultdict(list)
        for i, sup in support.items():
            for p, s in sup:
                vouched[p].append((i, s))
        groups = c.split_by_provider(range(n))
        ranked: list[tuple[str, list[int], list[int]]] = []
        for p in sorted(groups.keys() | vouched.keys()):
            more = vouched.get(p)
            if not more:
                ranked.append((p, rank_desc(groups[p], scores, c.key, c.key_column), []))
                continue
            own = list(filterfalse(support.__contains__, groups.get(p, ())))
            idx = own + list(map(_FIRST, more))
            vals = list(map(scores.__getitem__, own)) + list(map(_SECOND, more))

            def key_at(j: int, idx: list[int] = idx) -> SortKey:
                return c.key(idx[j])

            local = rank_desc(range(len(idx)), vals, key_at)
            # Entries past ``own`` in ``idx`` are the vouched ones.
            shared_ranks = list(compress(range(len(local)), map(le, repeat(len(own)), local)))
            ranked.append((p, list(map(idx.__getitem__, local)), shared_ranks))
        # One table of ``w / (k + rank)`` per distinct weight, as long as the
        # longest list it serves: every provider's contributions are a prefix
        # of it (the same float each provider would compute).
        k = self.k
        longest: dict[float, int] = {}
        for p, lst, _ in ranked:
            w = self.weight(p)
            longest[w] = max(longest.get(w, 0), len(lst))
        tables = {
            w: list(map(truediv, repeat(w, m), map(add, repeat(k, m), range(1, m + 1))))
            for w, m in longest.items()
        }
        out: list[tuple[str, list[int], list[float], list[int]]] = []
        for p, lst, shared_ranks in ranked:
            table = tables[self.weight(p)]
            out.append(
                (p, lst, table if len(table) == len(lst) else table[: len(lst)], shared_ranks)
            )
        return out

    def _shared_sums(
        self, c: CandidateSet, lists: list[tuple[str, list[int], list[float], list[int]]]
    ) -> dict[int, float]:
        # Providers are visited in id order, so the float sums are the same
        # whatever order the frames arrived in.
        shared: dict[int, float] = dict.fromkeys(c.support, 0.0)
        for _, lst, contrib, ranks in lists:
            for r in ranks:
                shared[lst[r]] += contrib[r]
        return shared

    def fused_scores(self, frames: Frames) -> list[float]:
        """The fused value of every candidate (what ``order`` sorts on)."""
        c = CandidateSet.of(frames)
        lists = self._lists(c)
        fused = [0.0] * len(c)
        # A frame in one list only gets 0.0 + w / (k + rank), i.e. exactly its
        # one contribution, written in a C-level pass; frames in several lists
        # are summed in provider order.
        for _, lst, contrib, _ in lists:
            deque(map(fused.__setitem__, lst, contrib), maxlen=0)
        for i, total in self._shared_sums(c, lists).items():
            fused[i] = total
        return fused

    def order(self, frames: Frames) -> list[int]:
        c = CandidateSet.of(frames)
        lists = self._lists(c)
        support = c.support
        pids = c.provider_ids
        # Every candidate once with its fused value: each provider's frames in
        # one list only (in its own rank order, so the values come as descending
        # runs a merge sort takes in linear passes), then the shared ones.
        owners = {pids[i] for i in support}
        seq: list[int] = []
        seq_vals: list[float] = []
        for p, lst, contrib, ranks in lists:
            if ranks:
                # the vouched entries sit at ``ranks``; the rest are this provider's own
                keep = bytearray(b"\x01") * len(lst)
                for r in ranks:
                    keep[r] = 0
                seq.extend(compress(lst, keep))
                seq_vals.extend(compress(contrib, keep))
                continue
            if p in owners:
                in_shared = list(map(support.__contains__, lst))
                if True in in_shared:
                    own_mask = list(map(not_, in_shared))
                    seq.extend(compress(lst, own_mask))
                    seq_vals.extend(compress(contrib, own_mask))
                    continue
            seq.extend(lst)
            seq_vals.extend(contrib)
        singles = len(seq)
        shared = self._shared_sums(c, lists)
        seq.extend(shared.keys())
        seq_vals.extend(shared.values())
        n = len(seq)
        perm = sorted(range(n), key=seq_vals.__getitem__, reverse=True)
        order = list(map(seq.__getitem__, perm))
        # Equal values end in canonical FrameId order (provider id first). The
        # sort is stable and ``seq`` lists the providers in id order, so a run
        # of equal values is already in key order unless two of its members
        # come from one provider or it holds a shared frame (listed last).
        # Providers of one weight take prefixes of one table of contributions,
        # so the longest of them speaks for all.
        longest: dict[float, list[float]] = {}
        for p, _, contrib, _ in lists:
            w = self.weight(p)
            if len(contrib) > len(longest.get(w, ())):
                longest[w] = contrib
        if all(len(set(t)) == len(t) for t in longest.values()):
            # Within a provider no two values are equal: only the runs around
            # shared frames can be out of key order.
            suspects: Iterable[int] = (
                j
                for j in compress(range(n), map(le, repeat(singles), perm))
                if (j > 0 and seq_vals[perm[j - 1]] == seq_vals[perm[j]])
                or (j + 1 < n and seq_vals[perm[j + 1]] == seq_vals[perm[j]])
            )
        else:
            vals = list(map(seq_vals.__getitem__, perm))
            by = list(map(pids.__getitem__, order))
            suspects = compress(
                range(n - 1),
                map(and_, map(eq, vals, islice(vals, 1, None)), map(ge, by, islice(by, 1, None))),
            )
        end = -1
        for j in suspects:
            if j <= end:
                continue
            v = seq_vals[perm[j]]
            start = j
            while start > 0 and seq_vals[perm[start - 1]] == v:
                start -= 1
            end = j
            while end + 1 < n and seq_vals[perm[end + 1]] == v:
                end += 1
            # index order first: equal keys (no dedup ran) keep their index order
            order[start : end + 1] = sorted(sorted(order[start : end + 1]), key=c.key)
        return order

    def to_wire(self) -> Any:
        body: dict[str, Any] = {"k": self.k}
        if self.weights is not None:
            body["weights"] = dict(sorted(self.weights.items()))
        return {"rrf": body}


def is_ranking_permutation(order: Sequence[object], n: int) -> bool:
    """Whether ``order`` names each of ``0..n-1`` exactly once (and nothing else)."""
    if len(order) != n:
        return False
    if n == 0:
        return True
    # All C-level passes: exact ints only (no bools, no 1.0), no repeats, in range.
    if set(map(type, order)) != {int}:
        return False
    distinct = set(cast("Sequence[int]", order))
    return len(distinct) == n and min(distinct) == 0 and max(distinct) == n - 1


def rank_with(strategy: Strategy, frames: Frames) -> list[int]:
    """``strategy``'s order, repaired into a permutation of the candidates.

    Out-of-range, non-integer and repeated indices are skipped; candidates the
    policy left out are appended in canonical FrameId order. A policy therefore
    cannot make a frame vanish from the audit.
    """
    c = CandidateSet.of(frames)
    n = len(c)
    order = list(strategy.order(c))
    if type(strategy) in _BUILT_IN:
        # Ours return permutations by construction (and the property tests hold
        # them to it); the check below is for policies from elsewhere.
        return order
    if is_ranking_permutation(order, n):
        return order
    seen = bytearray(n)
    out: list[int] = []
    for i in order:
        if type(i) is int and 0 <= i < n and not seen[i]:
            seen[i] = 1
            out.append(i)
    missing = [i for i in range(n) if not seen[i]]
    missing.sort(key=c.key)
    out.extend(missing)
    return out


_BUILT_IN: frozenset[type] = frozenset(
    {ScoreDescending, RoundRobinByRank, PerProviderQuota, ReciprocalRankFusion}
)

_WIRE_FORMS = (
    '"score", "round_robin", "rrf", {"quota": k} or {"rrf": {"k": 60, "weights": {provider: w}}}'
)


def strategy_from_wire(value: object) -> Strategy:
    """The policy a client API ``strategy`` value names; ``ValueError`` if it names none."""
    if isinstance(value, str):
        if value == "score":
            return ScoreDescending()
        if value == "round_robin":
            return RoundRobinByRank()
        if value == "rrf":
            return ReciprocalRankFusion()
        raise ValueError(f"unknown strategy {value!r}; expected {_WIRE_FORMS}")
    if isinstance(value, Mapping):
        if len(value) != 1:
            raise ValueError(
                f"a strategy object has exactly one member, got {sorted(map(str, value))}; "
                f"expected {_WIRE_FORMS}"
            )
        ((name, body),) = value.items()
        if name == "quota":
            if isinstance(body, bool) or not isinstance(body, int):
                raise ValueError(f"strategy quota k must be an integer, got {body!r}")
            return PerProviderQuota(body)
        if name == "rrf":
            if body is None:
                body = {}
            if not isinstance(body, Mapping):
                raise ValueError(f"strategy rrf takes an object {{k?, weights?}}, got {body!r}")
            unknown = sorted(set(map(str, body)) - {"k", "weights"})
            if unknown:
                raise ValueError(f"strategy rrf has unknown member(s) {unknown}")
            return ReciprocalRankFusion(k=body.get("k", 60), weights=body.get("weights"))
        raise ValueError(f"unknown strategy {name!r}; expected {_WIRE_FORMS}")
    raise ValueError(f"strategy must be a string or an object, got {type(value).__name__}")
