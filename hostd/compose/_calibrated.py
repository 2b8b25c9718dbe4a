"""The ``calibrated`` policy: rank by each provider's fitted chance that its frame is used.

A calibration (fitted by ``hostd calibrate`` from recorded feedback) holds, per
provider, a monotone map from that provider's own score to the probability
that a frame it served and the prompt showed was used by the answer, and one
pooled map from a frame's rank in its provider's list (1 = best) for a provider
with too little feedback of its own. A map is a list of knots, interpolated
linearly between them and clipped outside: non-decreasing in the score,
non-increasing in the rank. The maps are the host's documented policy (F10):
no raw score ever meets another provider's score, only the probabilities the
maps give, each read off its own provider's scale; scaling one provider's
scores by a constant scales its knots alike and leaves every probability as
it was. A candidate several providers vouched for takes the larger chance;
ties go to the better rank in its own list, then the canonical FrameId.

Without a calibration, or with one that holds no map, the policy is
``round_robin``, and its audit (``strategy_params``) says so and why; with
one, the audit names its file and version.
"""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar

from ._candidates import CandidateSet, FramePair
from ._fusion import provider_lists
from ._round_robin import RoundRobinByRank

__all__ = ["Calibrated", "Calibration", "MonotoneMap"]

Frames = CandidateSet | Iterable[FramePair]


@dataclass(slots=True, frozen=True)
class MonotoneMap:
    """Knots ``(x, p)`` with ``x`` ascending and ``p`` non-decreasing; linear between."""

    x: tuple[float, ...]
    p: tuple[float, ...]

    def __post_init__(self) -> None:
        if not self.x or len(self.x) != len(self.p):
            raise ValueError("a monotone map needs as many probabilities as knots, at least one")
        if any(b <= a for a, b in zip(self.x, self.x[1:], strict=False)):
            raise ValueError("a monotone map's knots must be strictly ascending")
        if any(q < p for p, q in zip(self.p, self.p[1:], strict=False)):
            raise ValueError("a monotone map's probabilities must not decrease")
        if any(not 0.0 <= p <= 1.0 for p in self.p):
            raise ValueError("a monotone map's probabilities must lie in [0, 1]")

    def __call__(self, value: float) -> float:
        if value <= self.x[0]:
            return self.p[0]
        if value >= self.x[-1]:
            return self.p[-1]
        j = bisect_right(self.x, value)
        x0, x1, p0, p1 = self.x[j - 1], self.x[j], self.p[j - 1], self.p[j]
        return p0 + (p1 - p0) * (value - x0) / (x1 - x0)

    def to_wire(self) -> dict[str, Any]:
        return {"x": list(self.x), "p": list(self.p)}

    @classmethod
    def from_wire(cls, raw: Mapping[str, Any]) -> MonotoneMap:
        return cls(tuple(float(v) for v in raw["x"]), tuple(float(v) for v in raw["p"]))


@dataclass(slots=True, frozen=True)
class Calibration:
    """Per-provider score maps and a pooled rank map, under a file and a version."""

    version: str
    providers: Mapping[str, MonotoneMap] = field(default_factory=dict)
    #: Over ``-rank`` (so it is non-decreasing too): for providers without a map.
    pooled: MonotoneMap | None = None
    file: str | None = None

    @property
    def empty(self) -> bool:
        return not self.providers and self.pooled is None

    def chance(self, provider_id: str, score: float, rank: int) -> float:
        own = self.providers.get(provider_id)
        if own is not None:
            return own(score)
        return self.pooled(-float(rank)) if self.pooled is not None else 0.0


@dataclass(slots=True, frozen=True)
class Calibrated:
    """Rank by calibrated chance of use; ``round_robin`` when there is nothing to read.

    ``reason`` says why an unbound policy falls back (no file, no feedback).
    """

    calibration: Calibration | None = None
    reason: str = "no calibration loaded"
    name: ClassVar[str] = "calibrated"

    def order(self, frames: Frames) -> list[int]:
        c = CandidateSet.of(frames)
        cal = self.calibration
        if cal is None or cal.empty:
            return RoundRobinByRank().order(c)
        chance: dict[int, float] = {}
        best_rank: dict[int, int] = {}
        for pid, entries in provider_lists(c).items():
            for rank, (i, score) in enumerate(entries, start=1):
                chance[i] = max(chance.get(i, 0.0), cal.chance(pid, score, rank))
                best_rank[i] = min(best_rank.get(i, rank), rank)
        return sorted(range(len(c)), key=lambda i: (-chance[i], best_rank[i], c.key(i)))

    def to_wire(self) -> Any:
        cal = self.calibration
        if cal is None or cal.empty:
            body: dict[str, Any] = {"fallback": "round_robin", "reason": self.reason}
            if cal is not None:
                body |= {"file": cal.file, "version": cal.version}
            return {"calibrated": body}
        return {
            "calibrated": {
                "file": cal.file,
                "version": cal.version,
                "providers": sorted(cal.providers),
                "pooled": cal.pooled is not None,
            }
        }
