"""The rerank stage: between the fan-out and composition, for ``strategy = "rerank"``.

Glue, and nothing else: ``hostd.compose.rerank_request`` picks what the reranker
is shown and reads its answer, ``hostd.engine.Reranker`` asks the process. The
result is always a ``PrecomputedOrder`` (a verdict, or the fallback and why):
a reranker that is missing, slow, broken or lying never fails a composition.
A verdict the client brought itself (the object form) is used as it is.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from hostd.compose import PrecomputedOrder, rerank_request
from hostd.config import RerankerSettings
from hostd.protocol import ContextFrame

__all__ = ["asks_rerank", "make_reranker", "rerank_stage"]


def asks_rerank(strategy: object) -> bool:
    """Whether a ``strategy`` param names ``rerank`` (either spelling)."""
    return strategy == "rerank" or (isinstance(strategy, dict) and "rerank" in strategy)


def make_reranker(settings: RerankerSettings, pool_settings: Any) -> Any:
    """The engine's ``Reranker`` for ``[reranker]`` (``None`` when no command is set)."""
    if settings.command is None:
        return None
    from hostd.engine import RERANKER_ID, ProviderSpec, Reranker

    spec = ProviderSpec(
        id=RERANKER_ID,
        command=list(settings.command),
        timeout_ms=settings.timeout_ms,
        env=dict(settings.env),
        cwd=str(settings.cwd) if settings.cwd is not None else None,
    )
    return Reranker(spec, pool_settings)


async def rerank_stage(
    reranker: Any,
    settings: RerankerSettings,
    query: str,
    frames: Sequence[tuple[str, ContextFrame]],
    requested: PrecomputedOrder | None = None,
) -> PrecomputedOrder:
    """``requested`` (default: the bare ``rerank``) judged by ``reranker`` over
    ``frames``, the fan-out's accepted ones."""
    if requested is not None and requested.judged:
        return requested
    request = rerank_request(frames, settings.max_candidates)
    if reranker is None:
        return request.fallback("not_configured", "no [reranker] command in the config")
    if not request.candidates:
        return request.verdict((), None)
    outcome = await reranker.rerank(query, list(request.candidates), settings.timeout_ms / 1000)
    if outcome.reason is not None:
        return request.fallback(outcome.reason, outcome.detail)
    return request.verdict(outcome.order, outcome.model)
