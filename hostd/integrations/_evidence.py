"""What the forward adapters read from a composition: its evidence, and whether it was whole.

``context/compose`` with ``include_content: true`` lists the included frames in
prompt order as ``evidence``, each with the provider's own ``content`` (not the
fenced text of the prompt). ``read_composition`` is the one place that reads the
wire's result for the adapters, so moving to typed results changes this module
only; the framework halves read ``Composition`` and ``Evidence``.

The metadata a framework document carries (``evidence_metadata``) is the same for
LangChain and LlamaIndex. The composition's score fields are labelled for what
they are: ``rank`` is the composition's order under its named strategy and
``provider_score`` the provider's own, comparable only within that provider (F10).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

__all__ = ["Composition", "Evidence", "compose_params", "evidence_metadata", "read_composition"]


@dataclass(slots=True, frozen=True)
class Evidence:
    """One included frame, as the composition showed it."""

    label: str
    provider_id: str
    frame_id: str
    content: str
    content_digest: str | None
    uri: str | None
    range: str | None
    kind: str | None
    title: str | None
    rank: int | None
    provider_score: float | None
    verification: Any


@dataclass(slots=True, frozen=True)
class Composition:
    """A composition as the adapters use it: its evidence in prompt order, its request id,
    and ``degraded`` with its ``degraded_reasons`` (``None`` and empty from a daemon that
    does not report them)."""

    request_id: str
    evidence: tuple[Evidence, ...]
    degraded: bool | None
    degraded_reasons: tuple[Mapping[str, Any], ...]
    prompt: str
    providers: tuple[Mapping[str, Any], ...]


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


def _int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _float(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value)


def _str(value: Any) -> str | None:
    return value if isinstance(value, str) else None


def read_composition(result: Mapping[str, Any]) -> Composition:
    """A ``context/compose`` result (asked with ``include_content``) as a ``Composition``.

    Raises ``ValueError`` when the result has no ``evidence`` list: the daemon did not
    honour ``include_content``, so the adapters have nothing faithful to return.
    """
    items = result.get("evidence")
    if not isinstance(items, list):
        raise ValueError(
            "the daemon's compose result has no evidence list (include_content); "
            "the adapters need a hostd that returns each frame's own content"
        )
    evidence = tuple(
        Evidence(
            label=str(item.get("label", "")),
            provider_id=str(item.get("provider_id", "")),
            frame_id=str(item.get("frame_id", "")),
            content=_str(item.get("content")) or "",
            content_digest=_str(item.get("content_digest")),
            uri=_str(item.get("uri")),
            range=_str(item.get("range")),
            kind=_str(item.get("kind")),
            title=_str(item.get("title")),
            rank=_int(item.get("rank")),
            provider_score=_float(item.get("score")),
            verification=item.get("verification"),
        )
        for item in items
        if isinstance(item, Mapping)
    )
    degraded = result.get("degraded")
    reasons: Sequence[Any] = result.get("degraded_reasons") or ()
    providers: Sequence[Any] = result.get("providers") or ()
    return Composition(
        request_id=str(result.get("request_id", "")),
        evidence=evidence,
        degraded=degraded if isinstance(degraded, bool) else None,
        degraded_reasons=tuple(dict(r) for r in reasons if isinstance(r, Mapping)),
        prompt=str(result.get("prompt", "")),
        providers=tuple(dict(p) for p in providers if isinstance(p, Mapping)),
    )


def evidence_metadata(item: Evidence, composition: Composition) -> dict[str, Any]:
    """The metadata of one adapter document: where the evidence came from, how it was
    checked, which request it belongs to, and whether that composition was whole."""
    return {
        "citation_label": item.label,
        "provider_id": item.provider_id,
        "frame_id": item.frame_id,
        "uri": item.uri,
        "range": item.range,
        "verification": item.verification,
        "request_id": composition.request_id,
        "content_digest": item.content_digest,
        "kind": item.kind,
        "title": item.title,
        # F10: the composition's order and the provider's own score, never a relevance
        # comparable across providers.
        "rank": item.rank,
        "provider_score": item.provider_score,
        "degraded": composition.degraded,
        "degraded_reasons": [dict(r) for r in composition.degraded_reasons],
    }
