"""What the forward adapters read from a composition: its evidence, and whether it was whole.

``context/compose`` with ``include_content: true`` lists the included frames in
prompt order as ``evidence``, each with the provider's own ``content`` (not the
fenced text of the prompt); the typed client (``hostd.client.ComposeResult``) has
validated it on receipt, so the adapters read its attributes.

The metadata a framework document carries (``evidence_metadata``) is the same for
LangChain and LlamaIndex. The composition's score fields are labelled for what
they are: ``rank`` is the composition's order under its named strategy and
``provider_score`` the provider's own, comparable only within that provider (F10).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from hostd.client import ComposeResult, Evidence

__all__ = ["compose_params", "evidence_metadata"]


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


def evidence_metadata(item: Evidence, result: ComposeResult) -> dict[str, Any]:
    """The metadata of one adapter document: where the evidence came from, how it was
    checked, which request it belongs to, and whether that composition was whole."""
    verification = item.verification.to_wire() if item.verification is not None else None
    return {
        "citation_label": item.label,
        "provider_id": item.provider_id,
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
        "provider_score": item.score,
        "degraded": result.degraded,
        "degraded_reasons": [r.to_wire() for r in result.degraded_reasons],
    }
