"""``Engine``: what the server asks of the fan-out engine, as a typed interface.

``Host`` is the implementation; the server's methods call it through this
interface and nothing else (no forwarder in between, no ``Any`` on either side),
so a method's types run straight from its params to the ``FanOut`` it composes.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable
from typing import Any, Protocol

from hostd.protocol import (
    ContextQuery,
    ForgetRequest,
    ForgetResult,
    RememberRequest,
    RememberResult,
)

from ._gate import ConsentGate
from ._host import LegDone, ProgressDone
from ._report import FanOut

__all__ = ["Engine"]


class Engine(Protocol):
    """The engine as the client API sees it (``hostd.engine.Host``)."""

    @property
    def consent(self) -> ConsentGate | None:
        """The consent gate (a ``ConsentStore`` when the host keeps a ledger)."""
        ...

    async def query_all(
        self,
        query: ContextQuery,
        global_budget: int,
        *,
        providers: Iterable[str] | None = None,
        session: str | None = None,
        timeout_ms: float | None = None,
        on_leg_done: LegDone | None = None,
        overfetch: float = 1.0,
        on_progress: ProgressDone | None = None,
        ready_wait_ms: float | None = None,
        on_fan_out: Callable[[list[str]], None] | None = None,
    ) -> FanOut:
        """One fan-out: plan, run, judge (see ``Host.query_all``)."""
        ...

    async def remember(
        self,
        request: RememberRequest,
        *,
        provider: str | None = None,
        timeout_ms: float | None = None,
        configured: Collection[str] | None = None,
    ) -> tuple[str, RememberResult]:
        """``memory/remember`` to one provider: its id and its committed reply."""
        ...

    async def forget(
        self,
        request: ForgetRequest,
        *,
        provider: str | None = None,
        timeout_ms: float | None = None,
        configured: Collection[str] | None = None,
    ) -> tuple[str, ForgetResult]:
        """``memory/forget`` to one provider: its id and its committed reply."""
        ...

    def providers_list(self) -> list[dict[str, Any]]:
        """``providers/list`` rows."""
        ...

    async def restart_provider(self, provider_id: str) -> dict[str, Any]:
        """``providers/restart``: the provider's row after its restart."""
        ...

    async def warm_all(self, on_progress: ProgressDone | None = None) -> dict[str, str]:
        """``providers/warm``: every provider started and waited for, its readiness."""
        ...

    def session_stats(self) -> dict[str, Any]:
        """Reuse-cache and verification figures for ``host/status``."""
        ...
