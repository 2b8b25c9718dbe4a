"""Running a question set: one fan-out per question and budget, composed under each policy.

Each question is asked once per budget through ``context/query`` (the same
fan-out, shares and overfetch ``context/compose`` uses) and the accepted frames
are composed in-process under every named policy, so the policies are compared
on one and the same candidate set. Each provider is also asked alone (the
whole budget is its share) and composed with the default policy: the figure a
policy has to beat. A question is recalled when the prompt quotes one of its
gold passages: an included frame, or one dedup or a span merge folded into it,
has a ``file`` provenance ending in the gold ``file`` and the gold ``phrase`` in
its content (whitespace and case folded).
Each composition gets what the daemon's own would: the fan-out's verification
states and the source bytes span merging reads (``_sources``), so a span merge
the daemon makes is made here too, and an ``Asked`` that names a tokenizer (recorded
traffic composed with ``[host] tokenizer``) has every row composed in its tokens, as
the daemon counted that budget. Beside the policies, ``(offered)`` (gold
anywhere in the candidate set) and, asked for, ``(trim-oracle)``: every
candidate cut to its gold lines (``_gold``), composed at the budget.

Both kinds of question set, a JSONL file and recorded traffic (``_traffic``),
become ``Asked`` values (a question's candidate sets at one budget, with its
test of a hit) and are scored by one function, ``score_asked``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from hostd.compose import (
    ComposedPrompt,
    PrecomputedOrder,
    Strategy,
    compose_for_prompt,
    strategy_from_wire,
)
from hostd.protocol import ContextFrame, FrameId

from ._gold import holds_gold, trim_to_gold
from ._held import ABSORBED  # what dedup and span merges fold (D2): one set for all
from ._questions import Gold, Question
from ._sources import rebuilt_sources, verification_of

__all__ = [
    "DEFAULT_POLICIES",
    "OFFERED",
    "TRIM_ORACLE",
    "Asked",
    "Outcome",
    "Policy",
    "Session",
    "Verified",
    "alone",
    "holds_gold",
    "run_eval",
    "score_asked",
]

Pairs = Sequence[tuple[str, ContextFrame]]

#: Every registered strategy in its CLI spelling: what ``hostd eval`` compares by default.
DEFAULT_POLICIES: tuple[str, ...] = (
    "score",
    "round_robin",
    "quota:1",
    "rrf",
    "margin",
    "mmr",
    "calibrated",
)
#: The label of the row that counts gold found anywhere in the candidate set (an upper bound).
OFFERED = "(offered)"
#: The label of the row that composes every candidate cut to its gold lines (a ceiling).
TRIM_ORACLE = "(trim-oracle)"


def alone(provider_id: str) -> str:
    """The label of the row for one provider asked on its own."""
    return f"{provider_id} alone"


class Session(Protocol):
    """A running daemon or an in-process one: ``await call(method, params)``."""

    async def call(self, method: str, params: dict[str, Any] | None = None) -> Any: ...


@dataclass(slots=True, frozen=True)
class Policy:
    """A ranking policy under its label (the user's spelling) and its wire value."""

    label: str
    strategy: Any


@dataclass(slots=True, frozen=True)
class Outcome:
    """Whether one question's gold reached the prompt under one policy and budget."""

    question: str
    style: str
    budget: int
    policy: str
    hit: bool
    tokens: int
    #: A provider of this row's fan-out did not answer ``ok`` (timeout, crash, …).
    degraded: bool = False
    #: Frames in the prompt (for ``(offered)``: candidates in the set).
    frames: int = 0
    #: A bare ``rerank`` row composed without the reranker's verdict: why (the verdict's
    #: reason, ``timeout``, ``error`` …; ``no_verdict`` when none was asked); ``None``
    #: when the reranker ranked it (a partial verdict too: it led) or for another policy.
    fallback: str | None = None

    def to_wire(self) -> dict[str, Any]:
        return {
            "question": self.question,
            "style": self.style,
            "budget": self.budget,
            "policy": self.policy,
            "hit": self.hit,
            "tokens": self.tokens,
            "frames": self.frames,
            "degraded": self.degraded,
        }


@dataclass(slots=True, frozen=True)
class Verified:
    """What the verify stage established for one candidate set, as composition reads it:
    each frame's state and the source bytes span merging reads (None: merging off)."""

    verification: Mapping[FrameId, Mapping[str, Any]] | None = None
    sources: Mapping[str, bytes] | None = None
    #: ``[host] merge_max_ratio``: how large a merged block may grow (None: compose's default).
    merge_max_ratio: float | None = None


def compose_verified(
    candidates: Sequence[tuple[str, ContextFrame]],
    budget: int,
    verified: Verified,
    **options: Any,
) -> ComposedPrompt:
    """``compose_for_prompt`` of ``candidates`` with what ``verified`` established (the
    states, the source bytes span merging reads, its cap when one was given)."""
    if verified.merge_max_ratio is not None:
        options["merge_max_ratio"] = verified.merge_max_ratio
    return compose_for_prompt(
        candidates,
        budget,
        verification=verified.verification,
        sources=verified.sources,
        **options,
    )


@dataclass(slots=True, frozen=True)
class Asked:
    """One question's candidate sets at one budget: everything its rows are scored on."""

    question: str
    style: str
    budget: int
    candidates: Pairs
    degraded: bool
    #: Each provider alone: (provider, its candidate set, degraded).
    alone: Sequence[tuple[str, Pairs, bool]]
    #: Whether a frame (by provider and frame) is gold for this question.
    hit: Callable[[FrameId, ContextFrame], bool]
    caps: dict[str, float] | None = None
    #: The budget the outcomes report (0: each question's own, as recorded).
    reported_budget: int | None = None
    #: The reranker's verdict on ``candidates`` (``context/query`` with ``rerank``).
    verdict: Any = None
    #: The verify stage's findings on ``candidates``, and on each provider alone's set.
    verified: Verified = Verified()
    alone_verified: Mapping[str, Verified] = field(default_factory=dict)
    #: A frame cut to its gold lines (None: no gold line): adds the ``(trim-oracle)`` row.
    trim: Callable[[ContextFrame], ContextFrame | None] | None = None
    #: The model's tokenizer (``str -> int``) the budget counts, as ``[host] tokenizer``
    #: made a recorded composition count it (None: canonical tokens, B3): every row is
    #: composed, and ``(offered)``'s candidates totalled, in its tokens.
    tokenizer: Callable[[str], int] | None = None


def score_asked(asked: Asked, policies: Sequence[Policy]) -> list[Outcome]:
    """``asked`` under every policy, each provider alone (default policy), ``(offered)``
    and, when ``asked.trim`` is set, ``(trim-oracle)``."""
    default = Policy("score", None)
    out = [
        _recall(asked, asked.candidates, p, p.label, asked.degraded, asked.verified, asked.verdict)
        for p in policies
    ]
    out += [
        _recall(asked, c, default, alone(pid), d, asked.alone_verified.get(pid, Verified()))
        for pid, c, d in asked.alone
    ]
    budget = asked.budget if asked.reported_budget is None else asked.reported_budget
    offered = any(asked.hit(FrameId.of(pid, f), f) for pid, f in asked.candidates)
    count = asked.tokenizer
    if count is None:
        tokens = sum(f.token_cost for _, f in asked.candidates)
    else:  # the same unit as the rows' prompts: the candidates' content in its tokens
        tokens = sum(count(f.content or "") for _, f in asked.candidates)
    out.append(
        Outcome(
            asked.question,
            asked.style,
            budget,
            OFFERED,
            offered,
            tokens,
            asked.degraded,
            len(asked.candidates),
        )
    )
    if asked.trim is not None:
        out.append(_trim_oracle(asked, asked.trim, default))
    return out


def _trim_oracle(
    asked: Asked, trim: Callable[[ContextFrame], ContextFrame | None], policy: Policy
) -> Outcome:
    """Every candidate cut to its gold lines (one holding none drops out), composed by
    the default policy without span merging (a cut frame is no longer its range's
    bytes): what a perfect line judge could put in the prompt, and at what cost."""
    cut = [(pid, t) for pid, f in asked.candidates if (t := trim(f)) is not None]
    return _recall(asked, cut, policy, TRIM_ORACLE, asked.degraded, Verified())


def _candidates(result: dict[str, Any]) -> list[tuple[str, ContextFrame]]:
    frames: dict[str, list[dict[str, Any]]] = result.get("frames") or {}
    return [(pid, ContextFrame.model_validate(f)) for pid in sorted(frames) for f in frames[pid]]


def _degraded(result: dict[str, Any]) -> bool:
    return any(r.get("status") != "ok" for r in result.get("providers") or ())


def _asks_rerank(policy: Policy) -> bool:
    """Whether ``policy`` is the bare ``rerank`` (the reranker's verdict is to be asked)."""
    strategy = policy.strategy
    if strategy is not None and not isinstance(strategy, Strategy):
        strategy = strategy_from_wire(strategy)
    return isinstance(strategy, PrecomputedOrder) and not strategy.judged


def _recall(
    asked: Asked,
    candidates: Pairs,
    policy: Policy,
    label: str,
    degraded: bool,
    verified: Verified,
    verdict: Any = None,
) -> Outcome:
    # Caps bind a mixed candidate set; a provider alone has the whole budget.
    caps = asked.caps if candidates is asked.candidates else None
    strategy = policy.strategy
    fallback = None
    if _asks_rerank(policy):
        reason: str | None = "no_verdict"  # the bare policy, unjudged: round_robin
        if verdict is not None:
            # The daemon's reranker judged this very candidate set (``context/query``); a
            # verdict it could not give (a fallback other than a partial one) degrades
            # the row.
            strategy = strategy_from_wire(verdict)
            reason = getattr(strategy, "reason", None)
            degraded = degraded or reason not in (None, "partial")
        fallback = None if reason in (None, "partial") else reason
    composed = compose_verified(
        candidates,
        asked.budget,
        verified,
        strategy=strategy,
        caps=caps,
        tokenizer=asked.tokenizer,
    )
    hit = any(asked.hit(fid, frame) for fid, frame in _shown(composed, candidates))
    budget = asked.budget if asked.reported_budget is None else asked.reported_budget
    return Outcome(
        asked.question,
        asked.style,
        budget,
        label,
        hit,
        composed.tokens_used,
        degraded,
        len(composed.citations),
        fallback,
    )


def _shown(composed: ComposedPrompt, candidates: Pairs) -> list[tuple[FrameId, ContextFrame]]:
    """Every frame whose lines the prompt quotes: each cited frame as the prompt quotes
    it (a merged or coalesced block: the union's lines; a block a merge cap closed:
    only its own), and each one dedup, a span merge or coalescing folded into a cited
    one whose content that block holds (a merged block holds its members' lines)."""
    by_id = {FrameId.of(pid, f): f for pid, f in candidates}
    quoted = {c.frame: f for c, (_, f) in zip(composed.citations, composed.shown, strict=True)}
    out = [(fid, quoted[fid]) for fid in sorted(quoted)]
    for e in composed.audit.excluded():
        kept = e.detail.get("kept") if e.reason in ABSORBED else None
        if isinstance(kept, dict):
            kept = FrameId.from_wire(kept)
        if kept in quoted and e.frame in by_id:
            member = by_id[e.frame]
            if (member.content or "") in (quoted[kept].content or ""):
                out.append((e.frame, member))
    return out


def _verified(result: dict[str, Any], candidates: Pairs, max_ratio: float | None) -> Verified:
    verification = verification_of(result)
    return Verified(verification, rebuilt_sources(result, candidates, verification), max_ratio)


async def _query(
    session: Session,
    question: Question,
    budget: int,
    providers: Sequence[str] | None,
    rerank: bool = False,
) -> dict[str, Any]:
    params: dict[str, Any] = {"goal": question.question, "budget": budget}
    if providers is not None:
        params["providers"] = list(providers)
    if rerank:
        params["rerank"] = True
    result: dict[str, Any] = await session.call("context/query", params)
    return result


async def run_eval(
    session: Session,
    questions: Sequence[Question],
    budgets: Sequence[int],
    policies: Sequence[Policy],
    *,
    providers: Sequence[str] | None = None,
    pool_budget: int | None = None,
    trim_oracle: bool = False,
    merge_max_ratio: float | None = None,
) -> list[Outcome]:
    """Every question under every budget and policy, plus each provider alone.

    ``providers`` restricts the fan-out to a subset (default: every configured
    provider). ``pool_budget``: the fan-out is asked for that many tokens and each
    composition packs its budget, so the effect of a larger pool is measurable.
    ``rerank`` policies compose by the reranker's verdict on the same candidate set.
    ``trim_oracle`` adds the ``(trim-oracle)`` row; ``merge_max_ratio`` is the
    daemon's ``[host]`` setting, so span merges grow as its own do. Outcomes come
    in question, budget, row order.
    """
    rerank = any(_asks_rerank(p) for p in policies)
    outcomes: list[Outcome] = []
    for question in questions:
        gold = question.gold

        def hit(_: FrameId, frame: ContextFrame, gold: Sequence[Gold] = gold) -> bool:
            return holds_gold(frame, gold)

        def trim(frame: ContextFrame, gold: Sequence[Gold] = gold) -> ContextFrame | None:
            return trim_to_gold(frame, gold)

        for budget in budgets:
            pool = pool_budget or budget
            result = await _query(session, question, pool, providers, rerank)
            singles = []
            alone_verified = {}
            for pid in sorted(r["provider_id"] for r in result.get("providers") or ()):
                single = await _query(session, question, pool, [pid])
                frames = _candidates(single)
                singles.append((pid, frames, _degraded(single)))
                alone_verified[pid] = _verified(single, frames, merge_max_ratio)
            candidates = _candidates(result)
            asked = Asked(
                question.id,
                question.style,
                budget,
                candidates,
                _degraded(result),
                singles,
                hit,
                verdict=result.get("rerank"),
                verified=_verified(result, candidates, merge_max_ratio),
                alone_verified=alone_verified,
                trim=trim if trim_oracle else None,
            )
            outcomes.extend(score_asked(asked, policies))
    return outcomes
