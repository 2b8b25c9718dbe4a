"""What the forward adapters read from a composition: its evidence, and whether it was whole.

``context/compose`` with ``include_content: true`` lists the included frames in
prompt order as ``evidence``, each with the provider's own ``content`` (not the
fenced text of the prompt); the typed client (``hostd.client.ComposeResult``) has
validated it on receipt, so the adapters read its attributes.

A framework retriever returns its documents best first (LangChain's
``EnsembleRetriever`` fuses by list position, ``nodes[:3]`` is taken as the top
three), so the adapters list the evidence by the composition's ``rank``, whatever
the placement put where in the prompt; ``prompt_position`` keeps the prompt's order.
The metadata a framework document carries (``evidence_metadata``) is the same for
LangChain and LlamaIndex. The composition's score fields are labelled for what
they are: ``rank`` is the composition's order under its named strategy and
``provider_score`` the provider's own, comparable only within that provider (F10).
``provider_id`` is the provider of the frame dedup kept (D2); ``vouched_by`` (the
client's ``Evidence.vouched_by``, read off the frame's included audit entry) names
every provider that served the same evidence, so a provider whose copy was a
duplicate is not lost from view.

A composition short of what was asked (degraded, or empty though providers had
something: ``shortfall``) is said once per call, by the adapter's ``on_degraded``:
a ``logging`` warning, a ``DegradedComposition``, or nothing. Its words are hostd's
own (reasons, provider ids, codes, a degraded reason's message),
never a provider's text.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any, Literal, cast, get_args

from hostd._hints import RESTARTING, budget_advice, restarting_advice, warming_advice
from hostd.client import ComposeResult, Evidence
from hostd.errors import HostdError
from hostd.protocol import CgpErrorCode

__all__ = [
    "ON_DEGRADED",
    "DegradedComposition",
    "OnDegraded",
    "best_first",
    "compose_params",
    "evidence_metadata",
    "on_degraded_value",
    "report_shortfall",
    "shortfall",
]

#: What an adapter does with a composition short of what was asked (``on_degraded``).
OnDegraded = Literal["warn", "raise", "ignore"]
ON_DEGRADED: tuple[str, ...] = get_args(OnDegraded)
#: The degraded reasons of a crash loop's leg (detail ``restarting``): ``provider_failed``,
#: and the ``provider_warming`` a daemon of an older version gave it.
_LOOPING = ("provider_failed", "provider_warming")


class DegradedComposition(HostdError):
    """A composition short of what was asked, raised by a retriever made with
    ``on_degraded="raise"``: its message says why (hostd's words), ``result`` is the
    whole composition (the retriever's ``last_composition`` too)."""

    code = CgpErrorCode.UNAVAILABLE
    reason = "degraded"

    def __init__(self, message: str, result: ComposeResult) -> None:
        super().__init__(message)
        self.result = result


def on_degraded_value(value: object) -> OnDegraded:
    """``value`` as an ``on_degraded`` setting, else a ``ValueError`` naming the choices."""
    if isinstance(value, str) and value in ON_DEGRADED:
        return cast(OnDegraded, value)
    raise ValueError(f"on_degraded must be one of {', '.join(ON_DEGRADED)}, got {value!r}")


def compose_params(
    budget: int | None, strategy: str | Mapping[str, Any] | None, extra: Mapping[str, Any]
) -> dict[str, Any]:
    """The ``context/compose`` params of an adapter's call: ``include_content`` always
    (the adapters return the evidence itself), the rest only when set."""
    params: dict[str, Any] = {k: v for k, v in extra.items() if v is not None}
    params["include_content"] = True
    if budget is not None:
        params["budget"] = budget
    if strategy is not None:
        params["strategy"] = strategy
    return params


def best_first(result: ComposeResult) -> list[tuple[int, Evidence]]:
    """The evidence by the composition's rank, best first, each with its place in the
    prompt (0 first); evidence without a rank (a daemon that does not report it) after
    the ranked, in prompt order."""
    placed = list(enumerate(result.evidence))
    placed.sort(key=lambda p: (p[1].rank is None, p[1].rank or 0, p[0]))
    return placed


def evidence_metadata(item: Evidence, position: int, result: ComposeResult) -> dict[str, Any]:
    """The metadata of one adapter document: where the evidence came from (and which
    providers vouched for it: ``item.vouched_by``), how it was checked, where it
    stands, which request it belongs to, and whether that composition was whole."""
    verification = item.verification.to_wire() if item.verification is not None else None
    # Always the frame's own provider at least, in provider-id order as the audit has it.
    by = sorted({item.provider_id, *item.vouched_by})
    return {
        "citation_label": item.label,
        "provider_id": item.provider_id,
        "vouched_by": by,
        "frame_id": item.frame_id,
        "uri": item.uri,
        "range": item.range,
        "verification": verification,
        "request_id": result.request_id,
        "content_digest": item.content_digest,
        "kind": item.kind,
        "title": item.title,
        # F10: the composition's order and the provider's own score, never a relevance
        # comparable across providers.
        "rank": item.rank,
        "prompt_position": position,
        "provider_score": item.score,
        "degraded": result.degraded,
        "degraded_reasons": _reasons(result),
    }


def _reasons(result: ComposeResult) -> list[dict[str, Any]]:
    """``degraded_reasons`` as the wire has them, each with its ``message`` where the
    daemon gave one (a ``rerank_fallback``'s account of what failed)."""
    return [reason.to_wire() for reason in result.degraded_reasons]


def shortfall(result: ComposeResult) -> str | None:
    """Why ``result`` is short of what was asked, in one line; ``None`` when it is whole,
    or empty only because nothing matched (every provider asked answered and had no
    frame for the query). Only hostd's words: reasons, provider ids and codes, the
    audit's counts and budget figures, a fallback's account; never a provider's text
    (a warming provider's progress, a failed one's error)."""
    why: list[str] = []
    grouped: dict[str, list[str]] = {}
    for reason in _reasons(result):
        named, said = reason.get("provider"), reason.get("message") or reason.get("detail")
        items = grouped.setdefault(reason["reason"], [])
        if named or said:
            items.append(": ".join(str(part) for part in (named, said) if part))
    if grouped:
        why.append(
            "degraded: "
            + "; ".join(f"{r} ({', '.join(i)})" if i else r for r, i in grouped.items())
        )
        # A crash loop's (``provider_failed``, detail ``restarting``; an older daemon's
        # ``provider_warming``) is not warming up: advice of its own, which quotes no last
        # failure (a provider's stderr may be in it: never in this line).
        looping = {
            r.provider: None
            for r in result.degraded_reasons
            if r.provider and r.detail == RESTARTING and r.reason in _LOOPING
        }
        ids = [
            r.provider
            for r in result.degraded_reasons
            if r.reason == "provider_warming" and r.provider and r.provider not in looping
        ]
        for advice in (
            warming_advice(ids, where="adapter"),
            restarting_advice(looping, where="adapter"),
        ):
            if advice is not None:
                why.append(advice)
    if not result.evidence:
        why += _empty(result)
    if not why:
        return None
    return (
        f"hostd composition {result.request_id} gave {len(result.evidence)} document(s): "
        + "; ".join(why)
        + " (the retriever's last_composition has the whole report)"
    )


def _empty(result: ComposeResult) -> list[str]:
    """Why an empty composition is empty when it is not "nothing matched": frames came
    and none was included (the audit's reasons; the least budget that would hold one),
    a provider had nothing that fit or no frame of the kinds asked (its ``note``,
    hostd's words), or no provider was asked."""
    if not result.providers:
        return ["no provider was asked"]
    out: list[str] = []
    entries = result.audit.entries
    if entries:
        counts: dict[str, int] = {}
        for entry in entries:
            key = entry.reason or entry.disposition
            counts[key] = counts.get(key, 0) + 1
        how = ", ".join(f"{r} {n}" for r, n in sorted(counts.items(), key=lambda i: -i[1]))
        out.append(f"{len(entries)} frame(s) offered, none included ({how})")
    out += [f"{p.provider_id}: {p.note}" for p in result.providers if p.note]
    advice = budget_advice(result.to_wire())
    if advice is not None:
        out.append(f"{advice}: raise budget")
    return out


def report_shortfall(result: ComposeResult, on_degraded: OnDegraded, log: logging.Logger) -> None:
    """Say once that ``result`` is short of what was asked, as ``on_degraded`` asks: a
    warning on ``log`` (``warn``), a ``DegradedComposition`` (``raise``), or nothing."""
    if on_degraded == "ignore":
        return
    message = shortfall(result)
    if message is None:
        return
    if on_degraded == "raise":
        raise DegradedComposition(message, result)
    log.warning("%s", message)
