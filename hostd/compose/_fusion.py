"""Fusion policies: each provider's own ranked list turned into one cross-provider order.

Both policies here read a provider's frames only as that provider ranked and
scored them (F10): ``ReciprocalRankFusion`` uses ranks alone,
``MarginFusion`` adds each provider's scores *normalised within its own list*
(mean ± 3σ of that list), so how far a frame stands out from its provider's
other frames counts, while no raw score is ever compared with another
provider's. A frame vouched for by several providers (after dedup) sums their
contributions; the order is the fused value descending, canonical FrameId on
ties, so it is a pure function of the candidate set.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from operator import itemgetter
from typing import Any, ClassVar

from ._candidates import CandidateSet, FramePair, rank_desc

__all__ = ["MarginFusion", "ReciprocalRankFusion", "margin_values", "provider_lists"]

Frames = CandidateSet | Iterable[FramePair]
_SCORE = itemgetter(1)


def provider_lists(frames: Frames) -> dict[str, list[tuple[int, float]]]:
    """Each provider's own ranked list, providers in id order.

    A provider's list holds every candidate it vouched for (after dedup, a
    frame may be vouched for by several) with that provider's own best score
    for the evidence, best first, canonical FrameId on ties. Rank and score in
    one list never meet another provider's scores (F10).
    """
    c = CandidateSet.of(frames)
    support, pids, scores = c.support, c.provider_ids, c.scores
    entries: defaultdict[str, list[tuple[int, float]]] = defaultdict(list)
    # Listed in canonical order, so the stable sort below leaves ties in that order.
    for i in c.canonical():
        sup = support.get(i)
        if sup is None:
            entries[pids[i]].append((i, scores[i]))
        else:
            for q, t in sup:
                entries[q].append((i, t))
    return {p: sorted(entries[p], key=_SCORE, reverse=True) for p in sorted(entries)}


def _check_weights(policy: str, weights: object) -> dict[str, float] | None:
    if weights is None:
        return None
    if not isinstance(weights, Mapping):
        raise ValueError(f"{policy} weights must be a mapping of provider id to number")
    clean: dict[str, float] = {}
    for provider, w in weights.items():
        if not isinstance(provider, str):
            raise ValueError(f"{policy} weight key must be a provider id, got {provider!r}")
        if isinstance(w, bool) or not isinstance(w, int | float):
            raise ValueError(f"{policy} weight of {provider!r} must be a number, got {w!r}")
        if not math.isfinite(w) or w < 0:
            raise ValueError(f"{policy} weight of {provider!r} must be finite and >= 0")
        clean[provider] = float(w)
    return clean


def _check_k(policy: str, k: object) -> None:
    if isinstance(k, bool) or not isinstance(k, int | float):
        raise ValueError(f"{policy} k must be a number, got {k!r}")
    if not math.isfinite(k) or k < 0:
        raise ValueError(f"{policy} k must be finite and >= 0, got {k!r}")


@dataclass(slots=True, frozen=True)
class _Fusion:
    """What both fusions share: ``k``, real per-provider weights, the fused sort."""

    k: float = 60
    weights: Mapping[str, float] | None = field(default=None)
    name: ClassVar[str] = "fusion"

    def __post_init__(self) -> None:
        _check_k(self.name, self.k)
        object.__setattr__(self, "weights", _check_weights(self.name, self.weights))

    def weight(self, provider_id: str) -> float:
        if self.weights is None:
            return 1.0
        return self.weights.get(provider_id, 1.0)

    def contributions(self, entries: Sequence[tuple[int, float]], w: float) -> list[float]:
        """A provider of weight ``w``: its contribution for each entry of its ranked list."""
        raise NotImplementedError

    def fused_scores(self, frames: Frames) -> list[float]:
        """The fused value of every candidate (what ``order`` sorts on).

        Providers are visited in id order, so the float sums are the same
        whatever order the frames arrived in.
        """
        c = CandidateSet.of(frames)
        fused = [0.0] * len(c)
        for p, entries in provider_lists(c).items():
            for (i, _), v in zip(entries, self.contributions(entries, self.weight(p)), strict=True):
                fused[i] += v
        return fused

    def order(self, frames: Frames) -> list[int]:
        c = CandidateSet.of(frames)
        return rank_desc(c.canonical(), self.fused_scores(c))

    def to_wire(self) -> Any:
        body: dict[str, Any] = {"k": self.k}
        if self.weights is not None:
            body["weights"] = dict(sorted(self.weights.items()))
        return {self.name: body}


@dataclass(slots=True, frozen=True)
class ReciprocalRankFusion(_Fusion):
    """Rank-space fusion: each provider adds ``weight / (k + rank)`` for a frame.

    ``rank`` is 1-based within that provider's own list (its own scores, F10);
    evidence a provider served more than once counts once, at its best rank; a
    frame vouched for by several providers (after dedup) sums their
    contributions. Weights are real: an unnamed provider weighs 1.0, and a
    weight of 0 sends that provider's frames to the end of the order (it never
    drops them; packing decides what fits). Blind to margin: a provider with
    nothing relevant gets the same rank-1 value as one with a clear answer.
    """

    name: ClassVar[str] = "rrf"

    def contributions(self, entries: Sequence[tuple[int, float]], w: float) -> list[float]:
        k = self.k
        return [w / (k + rank) for rank in range(1, len(entries) + 1)]


def margin_values(scores: Sequence[float]) -> list[float]:
    """Each score's place in its own list's distribution, in [0, 1].

    ``(s − (μ − 3σ)) / 6σ`` clipped to [0, 1], with μ and σ the mean and
    population standard deviation of this list alone (distribution-based score
    fusion, as Qdrant's DBSF and the spirit of Weaviate's relativeScoreFusion).
    Scores are first read within F1's [0, 1] (NaN already reads as -inf), so
    the arithmetic stays finite. A list whose scores are all equal (one frame,
    or no margin at all) gives every entry 0.5.
    """
    xs = [min(max(s, 0.0), 1.0) for s in scores]
    n = len(xs)
    if not xs or max(xs) == min(xs):
        return [0.5] * n
    mean = math.fsum(xs) / n
    deviations = [x - mean for x in xs]
    widest = max(map(abs, deviations))
    # In units of the widest deviation, so that tiny spreads do not underflow to σ = 0.
    units = [d / widest for d in deviations]
    sd = math.sqrt(math.fsum(u * u for u in units) / n)
    return [min(max((u + 3 * sd) / (6 * sd), 0.0), 1.0) for u in units]


@dataclass(slots=True, frozen=True)
class MarginFusion(_Fusion):
    """Margin-aware fusion: each provider adds ``weight · (margin + rank) / 2`` for a frame.

    ``margin`` is the frame's score normalised within its provider's own list
    (``margin_values``: how far it stands above or below that provider's other
    frames); ``rank`` evidence is ``(k + 1) / (k + rank)``, 1 at rank 1, as in
    RRF. Both terms lie in [0, 1], and neither ever meets another provider's
    raw score (F10). Unlike RRF, a provider whose best frame stands far above
    the rest of its list outranks one whose list has no margin (a lexical
    index matching only common words of a paraphrase), and a provider with one
    strong outlier over a flat rest is not starved by one that scores
    everything on a higher scale. Weights as in RRF (0 sends a provider's
    frames last, never drops them).
    """

    name: ClassVar[str] = "margin"

    def contributions(self, entries: Sequence[tuple[int, float]], w: float) -> list[float]:
        k = self.k
        margins = margin_values([s for _, s in entries])
        return [w * (m + (k + 1) / (k + rank)) / 2 for rank, m in enumerate(margins, start=1)]
