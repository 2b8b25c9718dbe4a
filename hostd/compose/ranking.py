"""Cross-provider ranking policies: each one orders candidates, none drops any.

Scores are provider-local (F10): no policy here applies a cross-provider score
threshold; the fusions (``_fusion``) read each provider's list on its own. A
policy has a ``name`` and ``order(frames) -> list[int]``, a permutation of the
candidate indices, best first. ``rank_with`` checks what a (possibly
third-party) policy returned and repairs it, so the packer always walks every
candidate exactly once. Every order ends in the canonical FrameId key, so it is
a pure function of the candidate set. ``strategy_from_wire`` is the one parser
of a policy's spellings, for the CLI, the client and the wire alike.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar, Protocol, cast, runtime_checkable

import orjson

from hostd.errors import did_you_mean

from ._calibrated import Calibrated
from ._candidates import CandidateSet, FramePair
from ._fusion import MarginFusion, ReciprocalRankFusion, provider_lists
from ._mmr import DEFAULT_LAMBDA, MaximalMarginalRelevance
from ._rerank import PrecomputedOrder
from ._round_robin import RoundRobinByRank

__all__ = [
    "DEFAULT_STRATEGY",
    "Calibrated",
    "MarginFusion",
    "MaximalMarginalRelevance",
    "PerProviderQuota",
    "PrecomputedOrder",
    "ReciprocalRankFusion",
    "RoundRobinByRank",
    "ScoreDescending",
    "Strategy",
    "is_ranking_permutation",
    "rank_with",
    "strategy_from_wire",
    "strategy_text",
]

Frames = CandidateSet | Iterable[FramePair]


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
class PerProviderQuota:
    """Every provider's top ``k`` first (by score among them), then the rest by score.

    A provider's top ``k`` are read from every candidate it vouched for
    (``provider_lists``, F10), so a hit it shares with another provider counts
    for both. ``k`` of 0 is read as 1: a quota that guarantees nothing is no quota.
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
        top = {i for entries in provider_lists(c).values() for i, _ in entries[:k]}
        by_score = c.by_score()
        return [i for i in by_score if i in top] + [i for i in by_score if i not in top]

    def to_wire(self) -> Any:
        return {"quota": self.k}


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


#: What a composition is ranked by when the request names no strategy (docs/eval.md
#: gives the figures behind the choice).
DEFAULT_STRATEGY: Strategy = ScoreDescending()

_FUSIONS: dict[str, type[ReciprocalRankFusion] | type[MarginFusion]] = {
    "rrf": ReciprocalRankFusion,
    "margin": MarginFusion,
}
_SPELLINGS = (
    '"score", "round_robin", "quota:K", "rrf", "rrf:k=60,PROVIDER=W", "margin", '
    '"margin:k=60,PROVIDER=W", "mmr", "mmr:lambda=0.7", "calibrated", "rerank", or an '
    'object {"quota": K}, {"rrf": {"k": 60, "weights": {PROVIDER: W}}}, '
    '{"margin": {"k": 60, "weights": {...}}}, {"mmr": {"lambda": 0.7}}'
)
#: The policies' names, for a misspelt one's closest (``RRF``, ``round-robin``).
_NAMES = ("score", "round_robin", "quota", "rrf", "margin", "mmr", "calibrated", "rerank")
_INTEGER = re.compile(r"[+-]?[0-9]+")
# A provider id the text form can carry as a weight's name (anything else: the object form).
_TEXT_ID = re.compile(r"[A-Za-z0-9_.-]+")


def strategy_from_wire(value: object) -> Strategy:
    """The policy a ``strategy`` value names, in any spelling; ``ValueError`` if none.

    One parser for the CLI (``--strategy``, ``--policy``), the client and the
    wire (``context/compose``): the text forms ``score``, ``round_robin``,
    ``quota:K``, ``rrf``, ``rrf:k=60,files=2``, ``margin``, ``margin:k=60,files=2``
    (``k=`` the constant, every other ``name=number`` a provider's weight),
    ``mmr``, ``mmr:lambda=0.7`` and the object forms ``{"quota": K}``,
    ``{"rrf": {"k"?, "weights"?}}``, ``{"margin": {"k"?, "weights"?}}``,
    ``{"mmr": {"lambda"?, "similarity"?}}``. Errors name the strategy and the
    expected spellings.
    """
    if isinstance(value, str):
        return _from_text(value)
    if isinstance(value, Mapping):
        if len(value) != 1:
            raise ValueError(
                f"a strategy object has exactly one member, got {sorted(map(str, value))}; "
                f"expected {_SPELLINGS}"
            )
        ((name, body),) = value.items()
        if name == "calibrated":
            # The audit's form (file, version, fallback) reads back as the policy; the
            # calibration itself is bound by whoever holds the state directory.
            return Calibrated()
        if name == "rerank":  # a verdict, e.g. from an audit (PrecomputedOrder.to_wire)
            return PrecomputedOrder.from_wire(body)
        if name == "quota":
            if isinstance(body, bool) or not isinstance(body, int):
                raise ValueError(f"strategy quota k must be an integer, got {body!r}")
            return PerProviderQuota(body)
        if name == "mmr":
            return _mmr_from_object(body)
        if name in _FUSIONS:
            if body is None:
                body = {}
            if not isinstance(body, Mapping):
                raise ValueError(f"strategy {name} takes an object {{k?, weights?}}, got {body!r}")
            unknown = sorted(set(map(str, body)) - {"k", "weights"})
            if unknown:
                raise ValueError(f"strategy {name} has unknown member(s) {unknown}")
            return _FUSIONS[name](k=body.get("k", 60), weights=body.get("weights"))
        raise ValueError(_unknown(name, name))
    raise ValueError(f"strategy must be a string or an object, got {type(value).__name__}")


def _unknown(given: str, name: str) -> str:
    """``unknown strategy 'RRF' (did you mean rrf?); expected …``: ``given`` as it was
    spelt, the closest policy to its ``name`` (all names are lower case, so the
    closest is looked for as if ``name`` were too)."""
    close = did_you_mean(name.lower(), _NAMES)
    guess = f" (did you mean {close}?)" if close else ""
    return f"unknown strategy {given!r}{guess}; expected {_SPELLINGS}"


def _from_text(text: str) -> Strategy:
    name, sep, params = text.partition(":")
    if name in ("score", "round_robin", "calibrated"):
        if sep:
            raise ValueError(f"strategy {name!r} takes no parameters, got {text!r}")
        if name == "calibrated":
            return Calibrated()
        return ScoreDescending() if name == "score" else RoundRobinByRank()
    if name == "rerank":  # the daemon's reranker judges it (docs/eval.md)
        if sep:
            raise ValueError(f"strategy 'rerank' takes no parameters, got {text!r}")
        return PrecomputedOrder()
    if name == "quota":
        if not _INTEGER.fullmatch(params):
            raise ValueError(f"strategy quota needs an integer k, as in 'quota:2'; got {text!r}")
        return PerProviderQuota(int(params))
    if name == "mmr":
        return _mmr_from_text(text, params if sep else None)
    if name in _FUSIONS:
        k: float = 60
        weights: dict[str, float] = {}
        seen: set[str] = set()
        for part in params.split(",") if sep else ():
            key, eq, number = part.partition("=")
            if not eq or not key or key in seen:
                raise ValueError(
                    f"strategy {name}: expected k=NUMBER or PROVIDER=WEIGHT, each once, "
                    f"separated by commas; got {part!r} in {text!r}"
                )
            seen.add(key)
            try:
                v = int(number) if _INTEGER.fullmatch(number) else float(number)
            except ValueError:
                msg = f"strategy {name}: {key} must be a number, got {number!r}"
                raise ValueError(msg) from None
            if key == "k":
                k = v
            else:
                weights[key] = v
        return _FUSIONS[name](k=k, weights=weights or None)
    raise ValueError(_unknown(text, name))


def strategy_text(strategy: Strategy) -> str:
    """The text spelling of a built-in policy (``quota:2``, ``rrf:k=10,files=2``…).

    A fusion whose weights name a provider the text form cannot carry (one
    called ``k``, or with ``,``, ``=`` or ``:`` in its id) is spelled as its
    JSON object instead, which ``--strategy`` also takes.
    """
    if isinstance(strategy, PerProviderQuota):
        return f"quota:{strategy.k}"
    if isinstance(strategy, MaximalMarginalRelevance):
        # similarity has one value today, so the text form leaves it out
        return "mmr" if strategy.lam == DEFAULT_LAMBDA else f"mmr:lambda={_number(strategy.lam)}"
    if isinstance(strategy, ReciprocalRankFusion | MarginFusion):
        weights = dict(sorted((strategy.weights or {}).items()))
        if any(p == "k" or not _TEXT_ID.fullmatch(p) for p in weights):
            return orjson.dumps(strategy.to_wire(), option=orjson.OPT_SORT_KEYS).decode()
        parts = ([] if strategy.k == 60 else [f"k={_number(strategy.k)}"]) + [
            f"{p}={_number(w)}" for p, w in weights.items()
        ]
        return strategy.name + (":" + ",".join(parts) if parts else "")
    return strategy.name


def _number(v: float) -> str:
    """``2`` for 2.0, the shortest round-tripping digits otherwise."""
    return str(int(v)) if float(v).is_integer() and abs(v) < 2**53 else repr(float(v))


def _mmr_from_object(body: object) -> MaximalMarginalRelevance:
    if body is None:
        body = {}
    if not isinstance(body, Mapping):
        raise ValueError(f"strategy mmr takes an object {{lambda?, similarity?}}, got {body!r}")
    unknown = sorted(set(map(str, body)) - {"lambda", "similarity"})
    if unknown:
        raise ValueError(f"strategy mmr has unknown member(s) {unknown}")
    return MaximalMarginalRelevance(
        body.get("lambda", DEFAULT_LAMBDA), body.get("similarity", "shingles")
    )


def _mmr_from_text(text: str, params: str | None) -> MaximalMarginalRelevance:
    if params is None:
        return MaximalMarginalRelevance()
    key, eq, number = params.partition("=")
    if key != "lambda" or not eq:
        raise ValueError(f"strategy mmr: expected mmr or mmr:lambda=NUMBER; got {text!r}")
    try:
        value = float(number)
    except ValueError:
        raise ValueError(f"strategy mmr: lambda must be a number, got {number!r}") from None
    return MaximalMarginalRelevance(value)
