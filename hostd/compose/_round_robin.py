"""The round-robin policy: each provider's best frame, then each one's second, and so on.

Its own module because two policies fall back to it (``_rerank`` for whatever a
verdict does not name, ``_calibrated`` when there is nothing to read): they import
it from here, downward, as ``ranking`` does, which registers it by name.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from itertools import zip_longest
from typing import Any, ClassVar

from ._candidates import CandidateSet, FramePair
from ._fusion import provider_lists

__all__ = ["RoundRobinByRank"]


@dataclass(slots=True, frozen=True)
class RoundRobinByRank:
    """Each provider's best frame, then each one's second, and so on.

    A provider's list is every candidate it vouched for, by its own score
    (``provider_lists``, F10): evidence two providers served is, after dedup,
    one candidate that stands in both lists at each one's own rank, so the
    provider whose copy lost the dedup tie keeps its rank-1 hit. Round ``r``
    emits each provider's rank-``r`` candidate, providers in id order; a
    candidate already emitted is not emitted again (a shared hit spends both
    providers' turn in its round). No score crosses a provider boundary.
    """

    name: ClassVar[str] = "round_robin"

    def order(self, frames: CandidateSet | Iterable[FramePair]) -> list[int]:
        lists = [[i for i, _ in entries] for entries in provider_lists(frames).values()]
        seen: set[int] = set()
        out: list[int] = []
        for rnd in zip_longest(*lists):
            for i in rnd:
                if i is not None and i not in seen:
                    seen.add(i)
                    out.append(i)
        return out

    def to_wire(self) -> Any:
        return "round_robin"
