"""Running a question set: one fan-out per question and budget, composed under each policy.

Each question is asked once per budget through ``context/query`` (the same
fan-out, shares and overfetch ``context/compose`` uses) and the accepted frames
are composed in-process under every named policy, so the policies are compared
on one and the same candidate set. Each provider is also asked alone (the
whole budget is its share) and composed with the default policy: the figure a
policy has to beat. A question is recalled when an included frame holds one of
its gold passages: a ``file`` provenance ending in the gold ``file`` and the
gold ``phrase`` in the frame's content (whitespace and case folded).

Both kinds of question set, a JSONL file and recorded traffic (``_shadow``),
become ``Asked`` values (a question's candidate sets at one budget, with its
test of a hit) and are scored by one function, ``score_asked``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import PurePosixPath
from typing import Any, Protocol
from urllib.parse import unquote, urlsplit

from hostd.compose import PrecomputedOrder, Strategy, compose_for_prompt, strategy_from_wire
from hostd.protocol import ContextFrame, FrameId

from ._questions import Gold, Question

__all__ = [
    "DEFAULT_POLICIES",
    "OFFERED",
    "Asked",
    "Outcome",
    "Policy",
    "Session",
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

    def to_wire(self) -> dict[str, Any]:
        return {
            "question": self.question,
            "style": self.style,
            "budget": self.budget,
            "policy": self.policy,
            "hit": self.hit,
            "tokens": self.tokens,
            "degraded": self.degraded,
        }


def _fold(text: str) -> str:
    return " ".join(text.split()).casefold()


def _paths(frame: ContextFrame) -> set[str]:
    uris = [p.uri for p in frame.provenance if p.type == "file" and p.uri]
    if frame.uri:
        uris.append(frame.uri)
    return {unquote(urlsplit(u).path) if "://" in u else u for u in uris}


def _same_file(path: str, gold: str) -> bool:
    want = PurePosixPath(gold).parts
    have = PurePosixPath(path).parts
    return len(have) >= len(want) and have[-len(want) :] == want


def holds_gold(frame: ContextFrame, gold: Iterable[Gold]) -> bool:
    """Whether ``frame`` quotes one of the gold passages (file and phrase)."""
    content = _fold(frame.content or "")
    paths = _paths(frame)
    return any(
        _fold(g.phrase) in content and any(_same_file(p, g.file) for p in paths) for g in gold
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


def score_asked(asked: Asked, policies: Sequence[Policy]) -> list[Outcome]:
    """``asked`` under every policy, each provider alone (default policy) and ``(offered)``."""
    default = Policy("score", None)
    out = [
        _recall(asked, asked.candidates, p, p.label, asked.degraded, asked.verdict)
        for p in policies
    ]
    out += [_recall(asked, c, default, alone(pid), d) for pid, c, d in asked.alone]
    budget = asked.budget if asked.reported_budget is None else asked.reported_budget
    offered = any(asked.hit(FrameId.of(pid, f), f) for pid, f in asked.candidates)
    tokens = sum(f.token_cost for _, f in asked.candidates)
    out.append(
        Outcome(asked.question, asked.style, budget, OFFERED, offered, tokens, asked.degraded)
    )
    return out


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
    verdict: Any = None,
) -> Outcome:
    # Caps bind a mixed candidate set; a provider alone has the whole budget.
    caps = asked.caps if candidates is asked.candidates else None
    strategy = policy.strategy
    if verdict is not None and _asks_rerank(policy):
        # The daemon's reranker judged this very candidate set (``context/query``); a
        # verdict it could not give (a fallback other than a partial one) degrades the row.
        strategy = strategy_from_wire(verdict)
        reason = getattr(strategy, "reason", None)
        degraded = degraded or reason not in (None, "partial")
    composed = compose_for_prompt(candidates, asked.budget, strategy=strategy, caps=caps)
    by_id = {FrameId.of(pid, f): f for pid, f in candidates}
    hit = any(asked.hit(c.frame, by_id[c.frame]) for c in composed.citations)
    budget = asked.budget if asked.reported_budget is None else asked.reported_budget
    return Outcome(asked.question, asked.style, budget, label, hit, composed.tokens_used, degraded)


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
) -> list[Outcome]:
    """Every question under every budget and policy, plus each provider alone.

    ``providers`` restricts the fan-out to a subset (default: every configured
    provider). ``pool_budget``: the fan-out is asked for that many tokens and each
    composition packs its budget, so the effect of a larger pool is measurable.
    ``rerank`` policies compose by the reranker's verdict on the same candidate set.
    Outcomes come in question, budget, row order.
    """
    rerank = any(_asks_rerank(p) for p in policies)
    outcomes: list[Outcome] = []
    for question in questions:
        gold = question.gold

        def hit(_: FrameId, frame: ContextFrame, gold: Sequence[Gold] = gold) -> bool:
            return holds_gold(frame, gold)

        for budget in budgets:
            pool = pool_budget or budget
            result = await _query(session, question, pool, providers, rerank)
            singles = []
            for pid in sorted(r["provider_id"] for r in result.get("providers") or ()):
                single = await _query(session, question, pool, [pid])
                singles.append((pid, _candidates(single), _degraded(single)))
            asked = Asked(
                question.id,
                question.style,
                budget,
                _candidates(result),
                _degraded(result),
                singles,
                hit,
                verdict=result.get("rerank"),
            )
            outcomes.extend(score_asked(asked, policies))
    return outcomes
