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
from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from itertools import zip_longest
from typing import Any, ClassVar, Protocol, cast, runtime_checkable

from ._candidates import CandidateSet, FramePair, rank_desc

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


@runtime_checkable
class Strategy(Protocol):
    """A named cross-provider ranking policy."""

    @property
    def name(self) -> str: ...

    def order(self, frames: Frames) -> list[int]: ...


def provider_lists(frames: Frames) -> dict[str, list[tuple[int, float]]]:
    """Each provider's own ranked list, providers in id order.

    A provider's list holds every candidate it vouched for (after dedup, a
    frame may be vouched for by several) with that provider's own best score
    for the evidence, best first, canonical FrameId on ties. Rank and score in
    one list never meet another provider's scores (F10).
    """
    c = CandidateSet.of(frames)
    support = c.support
    entries: defaultdict[str, list[tuple[int, float]]] = defaultdict(list)
    for i, (p, s) in enumerate(zip(c.provider_ids, c.scores, strict=True)):
        sup = support.get(i)
        if sup is None:
            entries[p].append((i, s))
        else:
            for q, t in sup:
                entries[q].append((i, t))
    return {p: _ranked(c, entries[p]) for p in sorted(entries)}


def _ranked(c: CandidateSet, entries: list[tuple[int, float]]) -> list[tuple[int, float]]:
    """``(candidate, score)`` entries by score descending, canonical FrameId on ties."""
    idx = [i for i, _ in entries]
    order = rank_desc(range(len(entries)), [s for _, s in entries], lambda j: c.key(idx[j]))
    return [entries[j] for j in order]


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
        pids = c.provider_ids
        taken: Counter[str] = Counter()
        first: list[int] = []
        rest: list[int] = []
        for i in c.by_score():
            p = pids[i]
            if taken[p] < k:
                taken[p] += 1
                first.append(i)
            else:
                rest.append(i)
        return first + rest

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

    def fused_scores(self, frames: Frames) -> list[float]:
        """The fused value of every candidate (what ``order`` sorts on).

        Providers are visited in id order, so the float sums are the same
        whatever order the frames arrived in.
        """
        c = CandidateSet.of(frames)
        fused = [0.0] * len(c)
        k = self.k
        for p, entries in provider_lists(c).items():
            w = self.weight(p)
            for rank, (i, _) in enumerate(entries, start=1):
                fused[i] += w / (k + rank)
        return fused

    def order(self, frames: Frames) -> list[int]:
        c = CandidateSet.of(frames)
        return rank_desc(range(len(c)), self.fused_scores(c), c.key, c.key_column)

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
