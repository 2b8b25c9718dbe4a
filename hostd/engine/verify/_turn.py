"""One turn's verify round trip as values: the plan, each provider's reply, the result.

``VerifyPlan`` says which held frames each provider is asked about (V1, D3);
``ask_one`` sends one ``context/verify`` and ends it at its provider's deadline
(the fan-out's: the same one as the provider's query), turning any failure into
a ``VerifyReply`` value (the fan-out runs it in its task group, beside the legs);
``StageResult`` is what the stage hands composition.
"""

from __future__ import annotations

import os
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import anyio

from hostd.protocol import ContextFrame, FrameId, FrameIdentity, FrameVerdict, LineIndex

from ._rules import VerifyPlanEntry

__all__ = [
    "Roots",
    "SendVerify",
    "StageResult",
    "VerifyPlan",
    "VerifyReply",
    "ask_one",
]

#: ``await send_verify(provider_id, identities)`` → that provider's verdicts; raises on failure.
SendVerify = Callable[[str, list[FrameIdentity]], Awaitable[Sequence[FrameVerdict]]]

Roots = Sequence[str | os.PathLike[str]]


@dataclass(slots=True, frozen=True)
class VerifyPlan:
    """What one turn will revalidate: held frames grouped per provider."""

    session: str | None
    entries: Mapping[str, VerifyPlanEntry] = field(default_factory=dict)
    held: int = 0

    @property
    def asks(self) -> dict[str, VerifyPlanEntry]:
        """Providers that get a ``context/verify`` this turn."""
        return {pid: e for pid, e in self.entries.items() if e.ask}

    @property
    def empty(self) -> bool:
        return not self.asks


@dataclass(slots=True, frozen=True)
class VerifyReply:
    """One provider's answer to ``context/verify``: verdicts, or why there are none."""

    provider_id: str
    verdicts: tuple[FrameVerdict, ...] | None
    error: str | None = None
    latency_ms: float = 0.0
    #: The bound the call ran under (its provider's deadline, from the fan-out's start).
    limit_ms: float | None = None


async def ask_one(
    provider_id: str,
    entry: VerifyPlanEntry,
    send_verify: SendVerify,
    *,
    deadline: float,
    limit_ms: float | None = None,
) -> VerifyReply:
    """One ``context/verify``, ended at ``deadline`` (anyio time); a failure is a value."""
    started = time.perf_counter()
    error: str | None = None
    verdicts: tuple[FrameVerdict, ...] | None = None
    with anyio.CancelScope(deadline=deadline) as scope:
        try:
            got = await send_verify(provider_id, entry.identities())
            verdicts = tuple(
                v if isinstance(v, FrameVerdict) else FrameVerdict.model_validate(v) for v in got
            )
        except Exception as exc:  # a leg's failure is a value, never a sibling's
            error = f"{type(exc).__name__}: {exc}"
    if scope.cancelled_caught:
        error = "timeout"
    latency = round((time.perf_counter() - started) * 1000, 3)
    return VerifyReply(provider_id, verdicts, error, latency, limit_ms)


@dataclass(slots=True)
class StageResult:
    """What composition receives from this stage (see ``docs/interfaces.md``)."""

    #: ``(provider_id, frame)`` ordered by provider id then FrameId, reused ones included.
    accepted: list[tuple[str, ContextFrame]]
    #: ``(FrameId, reason, detail)`` for every frame this stage dropped.
    excluded: list[tuple[FrameId, str, dict[str, Any]]]
    #: The state of every accepted frame (read-only: states may be shared).
    verification: dict[FrameId, Mapping[str, Any]]
    #: FrameIds served from the session cache.
    reused: list[FrameId]
    #: Reuse and verification figures of this pass (compose result and log).
    figures: dict[str, Any]
    #: Per provider, what this pass counted against it (digest_mismatch, rubber_stamp, …).
    health: dict[str, dict[str, int]]
    #: The session this turn belongs to (None: nothing is held or evicted).
    session: str | None = None
    #: Reason (``stale``, ``gone``, ``rubber_stamp``) → the held FrameIds to drop.
    evict: dict[str, list[FrameId]] = field(default_factory=dict)
    #: This pass's counters (what ``VerifyStage.figures`` sums over passes).
    counts: dict[str, int] = field(default_factory=dict)
    #: ``file`` URI -> the bytes accepted frames were matched against, for every
    #: source two or more of them quote (span merging's union of lines comes from here).
    sources: dict[str, LineIndex] = field(default_factory=dict)
