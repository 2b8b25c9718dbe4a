"""Preparing a strategy that needs state or I/O: one small protocol, one preparer each.

Most ranking policies are pure values composition runs as they are. Two are not:
``calibrated`` reads its maps from the state directory, and ``rerank`` asks the
reranker process for its verdict over the fan-out's frames. Each is prepared
by a ``Preparer``, chosen by the strategy's type: given the request, the fan-out
and the services it was built with, it returns the bound pure strategy and what
it fell back on (``Prepared``), so the pipeline has no branch per policy. A new
stateful strategy is one more preparer in ``preparers``.
A preparer never fails a composition: a missing file, a slow or broken reranker
give the policy's documented fallback, said in the audit and in ``degraded``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

import anyio.to_thread

from hostd.compose import Calibrated, PrecomputedOrder, Strategy
from hostd.config import Config, RerankerSettings
from hostd.engine import FanOut, RerankService, rerank_order
from hostd.protocol import ContextFrame
from hostd.quality import calibration_path

from ._degraded import Degraded
from ._request import QueryRequest

__all__ = [
    "CalibratedPreparer",
    "Prepared",
    "Preparer",
    "RerankPreparer",
    "preparers",
]


@dataclass(frozen=True, slots=True)
class Prepared:
    """A strategy ready for composition (pure), and what preparing it fell back on."""

    strategy: Strategy | None
    degraded: tuple[Degraded, ...] = ()


class Preparer(Protocol):
    """Binds one stateful strategy type to what it needs, after the fan-out."""

    @property
    def overfetch(self) -> float | None:
        """The over-fetch this strategy wants when the request sets none (``None``: the
        host's)."""
        ...

    async def prepare(self, strategy: Any, request: QueryRequest, fan: FanOut) -> Prepared:
        """``strategy`` (of this preparer's type) bound and ready, never an error."""
        ...


class CalibratedPreparer:
    """``calibrated``: its maps from ``hostd calibrate``'s file (read in a worker thread)."""

    overfetch: float | None = None

    def __init__(self, path: Path) -> None:
        self.path = path

    async def prepare(self, strategy: Any, request: QueryRequest, fan: FanOut) -> Prepared:
        from hostd.quality import bind_calibration  # by the first calibrated request

        bound = await anyio.to_thread.run_sync(bind_calibration, strategy, self.path)
        assert isinstance(bound, Calibrated)  # bind_calibration keeps the policy's type
        cal = bound.calibration
        if cal is None or cal.empty:
            return Prepared(bound, (Degraded("calibration_missing", detail=bound.reason),))
        return Prepared(bound)


#: A verdict reason that still is the reranker's verdict: it named only some candidates.
_PARTIAL = "partial"


class RerankPreparer:
    """``rerank``: the reranker's order of the fan-out's frames (``hostd.engine.RerankService``:
    the process reranker or a rerank server).

    ``hostd.engine.rerank_order`` asks it: ``hostd.compose.rerank_request`` picks what
    the reranker is shown and reads its answer. The result is always a
    ``PrecomputedOrder`` (a verdict, or the fallback and why): a reranker that is
    missing, slow, broken or lying never fails a composition. A verdict the client
    brought itself (the object form) is used as is.
    """

    def __init__(self, reranker: RerankService | None, settings: RerankerSettings) -> None:
        self.reranker = reranker
        self.settings = settings

    @property
    def overfetch(self) -> float | None:
        """``[reranker] overfetch``: a larger pool for the reranker to order."""
        value = self.settings.overfetch
        return None if value is None else float(value)

    async def judge(
        self,
        query: str,
        frames: Sequence[tuple[str, ContextFrame]],
        requested: PrecomputedOrder | None = None,
    ) -> PrecomputedOrder:
        """``requested`` (default: the bare ``rerank``) judged over ``frames``."""
        if requested is not None and requested.judged:
            return requested
        # One call into the engine: the request built, the reranker asked and its answer
        # read there (``hostd.compose.rerank_request`` on either side of the I/O).
        timeout_s = self.settings.timeout_ms / 1000
        return await rerank_order(
            self.reranker, query, frames, self.settings.max_candidates, timeout_s
        )

    async def prepare(self, strategy: Any, request: QueryRequest, fan: FanOut) -> Prepared:
        order = await self.judge(request.query_text or request.goal, fan.accepted, strategy)
        if order.reason is None or order.reason == _PARTIAL:
            return Prepared(order)
        # The audit's account (its reason and detail: hostd's words, never a server's
        # reply), for a person reading the degraded reason.
        said = f"{order.reason}: {order.detail}" if order.detail else None
        return Prepared(order, (Degraded("rerank_fallback", detail=order.reason, message=said),))


def preparers(config: Config, rerank: RerankPreparer) -> Mapping[type, Preparer]:
    """The preparer of each stateful strategy type, over this daemon's services."""
    return {
        Calibrated: CalibratedPreparer(calibration_path(config.state_path)),
        PrecomputedOrder: rerank,
    }
