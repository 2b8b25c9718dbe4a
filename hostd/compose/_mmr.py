"""Maximal marginal relevance: diversity on demand, over ranks, never raw scores (F10).

``MaximalMarginalRelevance`` (``mmr[:lambda=0.7]``) orders candidates greedily:
each step takes the candidate with the largest ``λ·rel − (1 − λ)·sim``, where
``rel`` is its reciprocal rank in the provider list that ranks it best
(``provider_lists``: each provider's own order, so no score crosses a provider
boundary) and ``sim`` its largest similarity to a candidate already taken. The
similarity is read from the content alone, with no model: the Jaccard index of
the two texts' word 3-shingles (``shingles``), so near-duplicates (the same
passage chunked twice, a file and its copy) push each other down while distinct
evidence from a second provider moves up.

The greedy walk is quadratic, so it runs over the first ``DEPTH`` candidates by
relevance only (far more than a prompt holds); the rest follow in relevance
order. Ties go to the canonical FrameId, so the order is a pure function of the
candidate set.
"""

from __future__ import annotations

import functools
import math
import re
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from itertools import chain, count, repeat
from typing import Any, ClassVar

from ._candidates import CandidateSet, FramePair, rank_desc
from ._fusion import provider_lists

__all__ = ["DEFAULT_LAMBDA", "DEPTH", "SIMILARITIES", "MaximalMarginalRelevance", "shingles"]

Frames = CandidateSet | Iterable[FramePair]

#: λ when the spelling names none: relevance weighs 0.7, redundancy 0.3.
DEFAULT_LAMBDA = 0.7
#: How many candidates (by relevance) the greedy walk reorders; the rest keep their order.
DEPTH = 128
#: The similarities an ``mmr`` policy may name (the audit records the one used).
SIMILARITIES = ("shingles",)
#: Words per shingle.
_SHINGLE = 3
# Words: runs of letters and digits, except that every CJK, kana or hangul character is
# a word of its own (those scripts put no spaces between words).
_CJK = "\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af\uf900-\ufaff"
_WORD = rf"[^\W{_CJK}]+|[{_CJK}]"


@functools.cache
def _word_re() -> re.Pattern[str]:
    # Compiled by the first ``mmr`` composition, not at import: its character classes
    # cost more than any other pattern a daemon's start compiles, for a policy asked by name.
    return re.compile(_WORD)


def shingles(text: str | None) -> frozenset[str]:
    """The word 3-shingles of ``text`` (case folded); a text of fewer words is one
    shingle of all of them, an empty one has none."""
    if not text:
        return frozenset()
    words = _word_re().findall(text.casefold())
    if len(words) <= _SHINGLE:
        return frozenset(["\x00".join(words)]) if words else frozenset()
    return frozenset(map("\x00".join, zip(*(words[k:] for k in range(_SHINGLE)), strict=False)))


def _check_lambda(value: object) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ValueError(f"mmr lambda must be a number in [0, 1], got {value!r}")
    if not (math.isfinite(value) and 0.0 <= value <= 1.0):
        raise ValueError(f"mmr lambda must be a number in [0, 1], got {value!r}")
    return float(value)


@dataclass(slots=True, frozen=True)
class MaximalMarginalRelevance:
    """``λ·rel − (1 − λ)·max sim`` greedily, ``rel`` the best within-provider
    reciprocal rank, ``sim`` the Jaccard index of word 3-shingles.

    λ = 1 is the relevance order alone (each provider's rank 1, then the rank 2s…,
    like ``round_robin``); λ = 0 takes the least redundant candidate every time.
    """

    lam: float = DEFAULT_LAMBDA
    similarity: str = "shingles"
    name: ClassVar[str] = "mmr"

    def __post_init__(self) -> None:
        object.__setattr__(self, "lam", _check_lambda(self.lam))
        if self.similarity not in SIMILARITIES:
            raise ValueError(
                f"mmr similarity must be one of {', '.join(SIMILARITIES)}, got {self.similarity!r}"
            )

    def relevance(self, frames: Frames) -> list[float]:
        """Each candidate's reciprocal rank in the provider list that ranks it best."""
        c = CandidateSet.of(frames)
        rel = [0.0] * len(c)
        for entries in provider_lists(c).values():
            for rank, (i, _) in enumerate(entries, start=1):
                rel[i] = max(rel[i], 1.0 / rank)
        return rel

    def order(self, frames: Frames) -> list[int]:
        c = CandidateSet.of(frames)
        rel = self.relevance(c)
        by_rel = rank_desc(c.canonical(), rel)
        pool, rest = by_rel[:DEPTH], by_rel[DEPTH:]
        return [pool[k] for k in self._greedy(c, pool, rel)] + rest

    def _greedy(self, c: CandidateSet, pool: Sequence[int], rel: Sequence[float]) -> list[int]:
        """Positions in ``pool`` in the order MMR takes them (ties: the earlier position).

        Each candidate's shingles become one bit set (an int, a bit per shingle two
        or more candidates of the pool share; the others never meet in an
        intersection), so an intersection's size is ``(a & b).bit_count()``, a few
        machine words at a time. Each candidate's current MMR value is kept and
        changed only when its largest similarity grows, so a step's argmax reads a list.
        """
        lam = self.lam
        sets = [shingles(c.frames[i].content) for i in pool]
        # Only a shingle two candidates share can be in an intersection: one bit each.
        common = [s for s, n in Counter(chain.from_iterable(sets)).items() if n > 1]
        bit = dict(zip(common, map((1).__lshift__, count()), strict=False)).get
        masks = [sum(map(bit, s, repeat(0))) for s in sets]
        sizes = list(map(len, sets))
        gain = [lam * rel[i] for i in pool]
        worst = [0.0] * len(pool)  # each one's largest similarity to a taken candidate
        value = [g - (1.0 - lam) * w for g, w in zip(gain, worst, strict=True)]
        left = list(range(len(pool)))  # ascending: max() keeps the first of equal values
        out: list[int] = []
        while left:
            best = max(left, key=value.__getitem__)
            out.append(best)
            left.remove(best)
            if lam == 1.0 or not sizes[best]:
                continue
            chosen, size = masks[best], sizes[best]
            # Jaccard of ``best`` with each one left; the ANDs and bit counts run in C.
            shared = map(int.bit_count, map(chosen.__and__, map(masks.__getitem__, left)))
            for k, n in zip(left, shared, strict=False):
                if n:
                    sim = n / (size + sizes[k] - n)
                    if sim > worst[k]:
                        worst[k] = sim
                        value[k] = gain[k] - (1.0 - lam) * sim
        return out

    def to_wire(self) -> Any:
        return {"mmr": {"lambda": self.lam, "similarity": self.similarity}}
