"""``admit_request``: a composition's own parameters read and checked in one call, before
any provider is asked.

A ``context/compose`` request names a strategy (any spelling ``strategy_from_wire``
reads), a placement, caps and floors. Each is read here, in this order, and the first
that is wrong is the request's error: the strategy (``InvalidParam`` naming
``strategy``), the provider ids the caps and the strategy's weights name against the
configured ones (``UnknownProvider``, its message naming the configured ids; ``"*"``
names the rest), the placement
(``InvalidParam``), then the floors, priced once (``check_floors``:
``FloorsExceedBudget`` when they alone overflow the budget). What comes back is what
the fan-out and ``compose_for_prompt`` take: the strategy, the placement, the
admitted floors (``contested``: what they leave for the providers) and, given the
query's fields, the ``ContextQuery`` the providers are asked, for ``contested`` tokens.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from hostd._param_words import given, refusal
from hostd.errors import InvalidParam, UnknownProvider, unknown_provider
from hostd.protocol import ContextQuery

from ._floors import AdmittedFloors, FloorInput, check_floors
from ._meter import Meter, TokenCounter
from ._placement import PLACEMENTS
from .ranking import Strategy, strategy_from_wire

__all__ = ["AdmittedRequest", "admit_request"]


@dataclass(slots=True, frozen=True)
class AdmittedRequest:
    """A composition's parameters as read: the policy (``None``: the default), the
    placement, the floors admitted against the budget and the providers' query (``None``
    when no fields were given for it)."""

    strategy: Strategy | None
    placement: str
    floors: AdmittedFloors
    query: ContextQuery | None = None


def admit_request(
    budget: int,
    *,
    strategy: object = None,
    placement: str | None = None,
    caps: Mapping[str, float] | None = None,
    floors: Iterable[FloorInput] = (),
    providers: Collection[str] = (),
    tokenizer: TokenCounter | Meter | None = None,
    query: Mapping[str, Any] | None = None,
) -> AdmittedRequest:
    """The request's strategy, placement and floors, read and checked in that order (see
    the module's docstring): ``providers`` are the configured ids the caps and the
    strategy's weights may name; ``tokenizer`` counts the floors as ``check_floors``
    does (pass the same to ``compose_for_prompt``); ``query``: the ``ContextQuery``'s
    fields but ``max_tokens``, which is what the floors leave. Pure: a tokenizer's
    caller may run it in a worker thread."""
    try:
        policy = strategy_from_wire(strategy) if strategy is not None else None
    except (ValueError, TypeError) as exc:
        raise InvalidParam(f"invalid params: strategy: {exc}", field="strategy") from None
    if caps:  # none named (most requests): nothing to check
        _check_named("caps", caps, providers)
    if policy is not None and (weights := getattr(policy, "weights", None)):
        _check_named("strategy", weights, providers)
    placement = placement or "edges"
    if placement not in PLACEMENTS:
        said = refusal("placement", f"got {given(placement)}", f"one of {', '.join(PLACEMENTS)}")
        raise InvalidParam(said, field="placement")
    admitted = check_floors(floors, budget, tokenizer=tokenizer)
    # The providers' query, built here where its max_tokens is worked out: the pipeline
    # hands it to the engine as it is.
    asked = None if query is None else ContextQuery(**query, max_tokens=admitted.contested)
    return AdmittedRequest(policy, placement, admitted, asked)


def _check_named(field: str, shares: Mapping[str, Any], providers: Collection[str]) -> None:
    """Provider ids a policy names (caps, rrf weights) are configured ones ("*": the rest)."""
    for pid in sorted(shares):
        if pid != "*" and pid not in providers:
            message = f"invalid params: {field}: {unknown_provider(pid, providers)}"
            raise UnknownProvider(message, provider=pid, field=field)
