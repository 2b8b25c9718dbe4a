"""Planning a fan-out: what each provider is asked, by when, and whether at all.

``plan_fan_out`` is plain sync code over values (httpcore's style: decide, then
do the I/O the decision names). Per provider it fixes the budget share
(``budget_split`` before any query is built), the tokens asked (share times
``overfetch``, capped at the budget; B1 is judged on that figure), one deadline
for the leg's query and its ``context/verify`` (the spec's timeout, capped by the
request's), and the action: ``skip`` (no budget), ``no_consent`` (C1, C2, C6:
nothing is sent), ``send`` (a live connection: written at once) or ``start``
(the provider must be started first; consent is judged after its handshake by
the same ``gate``). It touches no process and no clock of its own.

The budget is split over the providers expected to answer: a provider that cannot
answer this request (no consent, a crash loop whose restart no request waits for, one
down) or that is not ready (warming, starting) keeps its share out of that split
(``LegPlan.apart`` says why), so the others are asked for what it would have had. It
is still asked for its nominal share, the one it has when every provider is split
(an ask is an upper bound, and one still starting may be ready within its wait); the
composition packs to the budget whatever the asks add up to.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum
from fractions import Fraction
from typing import Any

from hostd.errors import BadRequest
from hostd.protocol import (
    Capabilities,
    ContextQuery,
    ProviderInfo,
    check_representation_preferences,
)

from ._gate import ConsentGate, missing_consent
from ._spec import ProviderSpec
from .verify import VerifyPlan

__all__ = [
    "Expect",
    "FanOutPlan",
    "LegAction",
    "LegPlan",
    "ProviderView",
    "asked_at",
    "asked_tokens",
    "gate",
    "leg_limit_ms",
    "least_budget",
    "plan_fan_out",
    "query_wire",
    "trim_representations",
]


class LegAction(StrEnum):
    SKIP = "skip"  # a budget share of 0: nothing to ask
    NO_CONSENT = "no_consent"  # a required scope has no receipt: nothing is sent
    START = "start"  # not running: start it, gate it, then send
    SEND = "send"  # live and consented: the request is written at once


class Expect(StrEnum):
    """Whether a provider is expected to answer a request, by its state as it is planned:
    only ``answers`` takes part in the budget split (the others' value is their leg's
    ``apart``)."""

    ANSWERS = "answers"  # ready: the default, for a view that says nothing more
    WARMING = "warming"  # handshaken, its index still building or loading
    STARTING = "starting"  # its start (or restart) under way or due: its leg waits for it
    RESTARTING = "restarting"  # a crash loop: its restart runs behind, waited for by none
    FAILED = "failed"  # its warm-up failed: it refuses every query
    DOWN = "down"  # its leg fails at once: parked, a start not waited for, removed


@dataclass(slots=True, frozen=True)
class ProviderView:
    """What the plan knows of one provider: its spec and, when its connection is
    live, the handshake's info and capabilities; ``expect``: whether it is expected to
    answer (the pool's view of its state)."""

    spec: ProviderSpec
    info: ProviderInfo | None = None
    capabilities: Capabilities | None = None
    expect: Expect = Expect.ANSWERS


@dataclass(slots=True, frozen=True)
class LegPlan:
    """One provider's part of a fan-out."""

    provider_id: str
    action: LegAction
    share: int
    asked: int
    #: The leg's bound, and its deadline (anyio time): the query and the verify both end by it.
    limit_ms: float
    deadline: float
    #: The query to send (``max_tokens`` = ``asked``; trimmed to advertised representations).
    query: ContextQuery
    #: Its wire form, when known at planning time (``send`` legs).
    wire: Mapping[str, Any] | None = None
    missing_scopes: tuple[str, ...] = ()
    #: The request named no ``timeout_ms``, or named ``ready_wait_ms``: a provider that
    #: is not ready yet is waited for up to its start deadline (or the plan's
    #: ``ready_wait_ms``, when sooner), and the leg's own bound counts from then.
    wait_ready: bool = False
    #: Consent was decided here (the provider was live); else once after its start.
    judged: bool = False
    #: Why its share was kept out of the split the providers expected to answer shared
    #: (``no_consent`` or an ``Expect`` value other than ``answers``), else None: its
    #: ``share`` is then its nominal one, the split over every provider of the fan-out.
    apart: str | None = None


@dataclass(slots=True, frozen=True)
class FanOutPlan:
    """A whole fan-out, decided before anything is written."""

    query: ContextQuery
    global_budget: int
    overfetch: float
    #: Ordered by provider id.
    legs: tuple[LegPlan, ...]
    #: The fan-out's start (anyio time); every deadline counts from it.
    started: float
    verify: VerifyPlan | None = None
    #: The request's bound on waiting for providers that are not ready (starting or
    #: warming up), counted from ``started``; None: each one's start deadline alone.
    ready_wait_ms: float | None = None

    def leg(self, provider_id: str) -> LegPlan | None:
        return next((leg for leg in self.legs if leg.provider_id == provider_id), None)


def leg_limit_ms(spec: ProviderSpec, timeout_ms: float | None) -> float:
    """A leg's bound: the request's ``timeout_ms`` when it names one, else its spec's.

    The request's is the client's own deadline for this answer, longer or shorter: a
    client that allows 30 s for a provider whose config says 10 s waits 30 s (as the
    client API documents it), not the shorter of the two."""
    return spec.timeout_ms if timeout_ms is None else timeout_ms


def asked_tokens(share: int, global_budget: int, overfetch: float) -> int:
    """What a provider is asked for: its share times ``overfetch``, never over the whole
    budget. ``overfetch > 1`` lets honest providers together offer more than the budget,
    so the composer's ranking policy decides what gets in (B1 is judged on this figure)."""
    if share <= 0:
        return 0
    if float(overfetch).is_integer() and share < _EXACT:  # 1.0, 2.0 …: nothing to round up
        return min(global_budget, share * int(overfetch))
    return min(global_budget, math.ceil(share * overfetch))


#: Below this a float holds every integer exactly, so ``share * int(overfetch)`` is
#: ``ceil(share * overfetch)`` for an integral ``overfetch`` (up to 1000, ``config``).
_EXACT = 2**43


def asked_at(
    provider_id: str,
    weights: Mapping[str, float],
    budget: int,
    *,
    overfetch: float,
    held: int = 0,
) -> int:
    """What ``provider_id`` is asked for at ``budget``, as ``plan_fan_out`` asks it:
    its ``budget_split`` share (``weights``: every provider of the fan-out, by id) of what
    the providers contest (``held``: the tokens they do not share, the floors'), times
    ``overfetch`` (``asked_tokens``)."""
    ids = sorted(weights)
    contested = max(0, budget - held)
    share = _split(contested, tuple(weights[p] for p in ids))[ids.index(provider_id)]
    return asked_tokens(share, contested, overfetch)


def least_budget(
    provider_id: str,
    weights: Mapping[str, float],
    need: int,
    *,
    overfetch: float,
    at_least: int = 0,
    held: int = 0,
) -> int:
    """The smallest budget, ``at_least`` or more, at which ``provider_id`` is asked for
    ``need`` tokens or more (``asked_at``). What a refusal's budget hint names, so the
    budget it names does not ask that provider for less than the frame it names.

    A share grows with the budget but for a token of rounding (the largest-remainder
    split can give one provider a token less at a larger budget): the budget found by
    bisection asks for ``need``, the one below it does not. Raises ``ValueError`` when
    the provider's weight is 0 (it is never asked)."""
    weight = weights[provider_id]
    if not weight > 0:
        raise ValueError(f"provider {provider_id!r} has weight 0: it is never asked")

    def enough(budget: int) -> bool:
        return asked_at(provider_id, weights, budget, overfetch=overfetch, held=held) >= need

    # A provider is asked for at most what it contests (``asked_tokens``): no lower budget.
    low = max(at_least, held + need, 0)
    if need <= 0 or enough(low):
        return low
    # Its share is at least the floor of its exact quota, and it is asked for at least its
    # share: a budget whose quota alone is ``need`` is enough.
    quota = Fraction(need) * sum(map(Fraction, weights.values())) / Fraction(weight)
    high = max(low + 1, held + math.ceil(quota))
    while high - low > 1:  # ``low`` is not enough, ``high`` is
        mid = (low + high) // 2
        low, high = (low, mid) if enough(mid) else (mid, high)
    return high


def gate(
    query: ContextQuery,
    provider_id: str,
    info: ProviderInfo,
    capabilities: Capabilities,
    consent: ConsentGate | None,
) -> tuple[ContextQuery, tuple[str, ...]]:
    """The consent gate (C1, C2, C6) and P5, before any payload is written: the query
    trimmed to the representations the provider advertised, and the scopes still
    missing consent (any: nothing may be sent)."""
    missing = missing_consent(consent, provider_id, info)
    if missing:
        return query, tuple(missing)
    return trim_representations(query, capabilities), ()


def trim_representations(query: ContextQuery, capabilities: Capabilities) -> ContextQuery:
    """P5: the query's representation preferences cut to what the provider advertised."""
    # No preferences (the common query): nothing P5 could find, nothing to trim.
    if query.representation_preferences and check_representation_preferences(query, capabilities):
        advertised = {"full", *capabilities.representations}
        kept = [r for r in query.representation_preferences or () if r in advertised]
        query = query.model_copy(update={"representation_preferences": kept})
    return query


def plan_fan_out(
    query: ContextQuery,
    global_budget: int,
    providers: Sequence[ProviderView],
    consent: ConsentGate | None,
    *,
    now: float,
    overfetch: float = 1.0,
    timeout_ms: float | None = None,
    verify: VerifyPlan | None = None,
    ready_wait_ms: float | None = None,
) -> FanOutPlan:
    """Decide every leg of one fan-out (see the module docstring). ``providers`` in any
    order; the plan lists them by id. ``timeout_ms`` bounds each leg (and, unless
    ``ready_wait_ms`` is named, its provider's start too); ``ready_wait_ms`` bounds the
    wait for a provider that is not ready, apart from its query's bound. Raises
    ``BadRequest`` for an ``overfetch`` below 1 or a budget that cannot be split."""
    overfetch = _check_overfetch(overfetch)
    views = sorted(providers, key=lambda v: v.spec.id)
    # Consent of each live provider, decided once here (C1, C2, C6): its leg reads it.
    missing = [_missing(view, consent) for view in views]
    apart = _apart(views, missing)
    shares = _shares(global_budget, views, apart)
    template = query_wire(query)
    # A named ready_wait_ms is the readiness wait's own bound, so a timeout_ms beside it
    # bounds the query alone; a timeout_ms alone bounds the start too, as it always did.
    wait = timeout_ms is None or ready_wait_ms is not None
    legs = [
        _leg(
            view,
            share,
            query,
            template,
            lacks,
            global_budget,
            overfetch,
            timeout_ms,
            now,
            wait,
            why,
        )
        for view, share, lacks, why in zip(views, shares, missing, apart, strict=True)
    ]
    return FanOutPlan(query, global_budget, overfetch, tuple(legs), now, verify, ready_wait_ms)


def _missing(view: ProviderView, consent: ConsentGate | None) -> tuple[str, ...] | None:
    """The scopes a live provider lacks consent for (empty: none), or None when it is not
    live (judged once after its handshake)."""
    if view.info is None or view.capabilities is None:
        return None
    return tuple(missing_consent(consent, view.spec.id, view.info))


def _apart(
    views: Sequence[ProviderView], missing: Sequence[tuple[str, ...] | None]
) -> tuple[str | None, ...]:
    """Why each provider's share is kept out of the split (None: it takes part): it is not
    expected to answer. None for every one when no provider with a weight is expected
    to: there is no one to give its share to, and the split is the nominal one. A
    provider of weight 0 takes part: its share is 0 in any split, nothing to keep out."""
    why: list[str | None] = []
    counted = False
    for view, lacks in zip(views, missing, strict=True):
        if not view.spec.weight > 0:
            why.append(None)
        elif lacks:
            why.append("no_consent")
        elif view.expect is Expect.ANSWERS:
            why.append(None)
            counted = True
        else:
            why.append(str(view.expect))
    return tuple(why) if counted else (None,) * len(why)


def _shares(
    global_budget: int, views: Sequence[ProviderView], apart: Sequence[str | None]
) -> tuple[int, ...]:
    """Each provider's share: the split over those expected to answer (weights kept,
    largest remainder), and for each one kept apart its nominal share, the split over
    every provider (its ask if it answers after all)."""
    if not views:
        return ()
    weights = tuple(v.spec.weight for v in views)
    nominal = _split(global_budget, weights)
    if not any(apart):  # every provider expected (the common request): one split
        return nominal
    # Weight 0 in the split: its quota is 0, and no leftover token reaches it.
    split = _split(
        global_budget, tuple(0.0 if w else x for x, w in zip(weights, apart, strict=True))
    )
    return tuple(n if w else s for n, s, w in zip(nominal, split, apart, strict=True))


def _leg(
    view: ProviderView,
    share: int,
    query: ContextQuery,
    template: Mapping[str, Any],
    missing: tuple[str, ...] | None,
    global_budget: int,
    overfetch: float,
    timeout_ms: float | None,
    now: float,
    wait_ready: bool,
    apart: str | None,
) -> LegPlan:
    """One provider's leg (``template``: the query's wire form, shared by every leg;
    ``missing``: its consent as ``_missing`` decided it)."""
    spec = view.spec
    asked = asked_tokens(share, global_budget, overfetch)
    limit = leg_limit_ms(spec, timeout_ms)
    deadline = now + limit / 1000
    # Asked for the whole budget (an overfetch that covers it, one provider): the
    # request's own query already says so, no copy to make.
    leg_query = (
        query if asked == query.max_tokens else query.model_copy(update={"max_tokens": asked})
    )
    # A live provider's consent was decided once, by ``_missing`` (its verify reads it
    # too); any other's is judged after its handshake, by ``gate`` (its leg's or its
    # verify's).
    if missing is None or view.capabilities is None or asked <= 0 or missing:
        judged = missing is not None and view.capabilities is not None
        if asked <= 0:
            action = LegAction.SKIP
        else:
            action = LegAction.NO_CONSENT if judged else LegAction.START
        return LegPlan(
            spec.id,
            action,
            share,
            asked,
            limit,
            deadline,
            leg_query,
            missing_scopes=missing or (),
            wait_ready=wait_ready,
            judged=judged,
            apart=apart,
        )
    # ``gate``'s second step (its consent decided above): P5.
    gated = trim_representations(leg_query, view.capabilities)
    # The template's wire form with this leg's max_tokens, unless P5 trimmed the query.
    untrimmed = gated.representation_preferences == query.representation_preferences
    wire = {**template, "max_tokens": asked} if untrimmed else query_wire(gated)
    return LegPlan(
        spec.id,
        LegAction.SEND,
        share,
        asked,
        limit,
        deadline,
        gated,
        wire,
        (),
        wait_ready,
        True,
        apart,
    )


def query_wire(query: ContextQuery) -> dict[str, Any]:
    """``query.to_wire()``, built from its fields (the common query: no embedding, whose
    floats the JSON mode would have to convert): the members in the model's order, the
    ``None`` ones left out, the lists copied, as ``model_dump`` makes them."""
    if query.embedding is not None or type(query) is not ContextQuery:
        return query.to_wire()
    wire: dict[str, Any] = {"goal": query.goal}
    if query.query_text is not None:
        wire["query_text"] = query.query_text
    wire["kinds"] = list(query.kinds)
    wire["anchors"] = list(query.anchors)
    wire["max_frames"] = query.max_frames
    wire["max_tokens"] = query.max_tokens
    if query.as_of is not None:
        wire["as_of"] = query.as_of
    if query.representation_preferences is not None:
        wire["representation_preferences"] = list(query.representation_preferences)
    return wire


def _check_overfetch(overfetch: float) -> float:
    # Finite and at least 1 (NaN fails every comparison).
    if not (isinstance(overfetch, int | float) and 1 <= overfetch < math.inf):
        raise BadRequest(
            f"overfetch must be a finite number >= 1, got {overfetch!r}", field="overfetch"
        )
    return float(overfetch)


def _split(global_budget: int, weights: tuple[float, ...]) -> tuple[int, ...]:
    try:
        return _split_cached(global_budget, weights)
    except ValueError as exc:  # a negative budget, all weights zero, …
        raise BadRequest(f"cannot split the budget: {exc}", field="budget") from exc


@functools.lru_cache(maxsize=512)
def _split_cached(global_budget: int, weights: tuple[float, ...]) -> tuple[int, ...]:
    """``budget_split`` is exact (rational arithmetic) and pure: the same budget over the
    same weights, as every turn of an agent asks, is split once."""
    from hostd.compose import budget_split  # the plan's one import from compose

    return tuple(budget_split(global_budget, len(weights), list(weights)))
