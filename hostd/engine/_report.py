"""The fan-out's results as values: one ``LegReport`` per provider and the ``FanOut``.

Failures are values here: a leg that timed out, crashed, erred, was
quarantined or refused for lack of consent is a report, never an exception.
``FanOut.usage_report()`` is UR1: the summed canonical cost of the served
frames, walkable back to each FrameId.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from hostd._hints import RESTARTING
from hostd.protocol import (
    ContextFrame,
    ContextQuery,
    FrameId,
    LineIndex,
    Representation,
    Violation,
    canonical_token_cost,
)

__all__ = ["Excluded", "FanOut", "LegReport", "LegStatus", "honest_cost"]

#: ``(FrameId, reason, detail)``: one frame a stage dropped, for the composer's audit.
Excluded = tuple[FrameId, str, dict[str, Any]]


class LegStatus(StrEnum):
    OK = "ok"
    TIMEOUT = "timeout"
    CRASHED = "crashed"
    ERROR = "error"
    QUARANTINED = "quarantined"
    NO_CONSENT = "no_consent"
    SKIPPED = "skipped"
    #: A remote provider refused the credential (HTTP 401/403).
    UNAUTHORIZED = "unauthorized"
    #: Started (or starting) but not ready yet: an index to build. Never a fault: it
    #: counts toward no restart, backoff or hang (``_health``). A provider in a crash
    #: loop is not warming: its leg is ``CRASHED``, code ``restarting`` (``looping``).
    WARMING = "warming"


def honest_cost(frame: ContextFrame) -> int:
    """The canonical cost (B3, P4): recomputed from content, never the declared figure."""
    if frame.effective_representation == Representation.REFERENCE:
        return 0
    return canonical_token_cost(frame.content)


@dataclass(slots=True, frozen=True)
class LegReport:
    """What happened on one provider's leg of a fan-out."""

    provider_id: str
    status: LegStatus
    frames_offered: int = 0
    frames_accepted: int = 0
    latency_ms: float = 0.0
    error_code: str | None = None
    error_message: str | None = None
    #: A ``warming`` leg's provider's last phase (``error.phase`` on the wire).
    phase: str | None = None
    #: A failed leg's provider's last stderr lines (bounded, one line, scrubbed), when
    #: it wrote any before it failed (``error.stderr_tail`` on the wire).
    stderr_tail: str | None = None
    violations: tuple[Violation, ...] = ()
    #: The tokens this provider was asked to stay within (B1): its share times the
    #: fan-out's ``overfetch``, capped at the global budget.
    max_tokens: int | None = None
    #: Its ``budget_split`` share of the global budget (before over-fetch): of the split
    #: over the providers expected to answer, or with ``share_apart`` its nominal one.
    share: int | None = None
    #: Honest (recomputed) cost of the accepted frames.
    tokens_accepted: int = 0
    #: C6: scopes without a consent receipt (status ``no_consent``).
    missing_scopes: tuple[str, ...] = ()
    #: Why an ``ok`` leg gave nothing, when it can be told (``nothing_fit``), or what it
    #: lost (``partial``): hostd's own words and figures, never the provider's.
    note: str | None = None
    #: It answered no frame and said it left some out: none it had fit ``max_tokens``.
    nothing_fit: bool = False
    #: An ``ok`` leg that lost part of its answer (an MCP tool that failed or ran out of
    #: time), how, as codes (``timeout``, ``isError``…); its ``note`` says which.
    partial: tuple[str, ...] = ()
    #: An ``ok`` leg answered while its provider still builds its index: ``(done,
    #: total)`` of that build, the share of its index the answer searched.
    building: tuple[int, int] | None = None
    #: ``False``: a failure told at once, its query never sent to its provider: a crash
    #: loop's leg (``looping``), a parked provider's (its attempts spent, its credential
    #: refused, its certificate untrusted, its command unable to run), one down whose next
    #: start or check is not waited for, one a reload removed. Counted as a leg, never as
    #: a failure of the provider's own (``record_leg``'s ``ran``). A leg not asked for
    #: what is no failure (``no_consent``, ``skipped``, ``warming``) says so by its status.
    sent: bool = True
    #: Why its share was kept out of the split the providers expected to answer shared
    #: (``warming``, ``starting``, ``no_consent``, ``restarting``, ``failed``, ``down``:
    #: ``LegPlan.apart``): ``share`` is then its nominal one, the split over every
    #: provider asked, and the others were asked for what it would have had.
    share_apart: str | None = None

    @property
    def looping(self) -> bool:
        """A crash loop's leg: ``crashed``, code ``restarting``, answered at once while its
        provider's restart runs behind the request (``_run``); never sent to it."""
        return self.status is LegStatus.CRASHED and self.error_code == RESTARTING

    def to_wire(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "provider_id": self.provider_id,
            # A StrEnum's str() is its value, a plain str, read without the enum
            # module's ``value`` descriptor (a Python-level call per leg).
            "status": str(self.status),
            "frames_offered": self.frames_offered,
            "frames_accepted": self.frames_accepted,
            "latency_ms": round(self.latency_ms, 3),
            "tokens_accepted": self.tokens_accepted,
            "violations": [v.to_wire() for v in self.violations],
        }
        if self.max_tokens is not None:
            out["max_tokens"] = self.max_tokens
        if self.share is not None:
            out["share"] = self.share
        if self.share_apart is not None:
            out["share_apart"] = self.share_apart
        if self.error_code is not None:
            out["error"] = {"code": self.error_code, "message": self.error_message or ""}
            if self.phase is not None:
                out["error"]["phase"] = self.phase
            if self.stderr_tail is not None:
                out["error"]["stderr_tail"] = self.stderr_tail
        if self.missing_scopes:
            out["missing_scopes"] = list(self.missing_scopes)
        if self.note is not None:
            out["note"] = self.note
        return out


@dataclass(slots=True)
class FanOut:
    """The result of ``Host.query_all``: accepted frames, one report per provider, and
    every frame dropped on the way with its reason."""

    query: ContextQuery
    global_budget: int
    #: ``(provider_id, frame)`` ordered by provider id then FrameId (never by arrival).
    accepted: list[tuple[str, ContextFrame]] = field(default_factory=list)
    reports: dict[str, LegReport] = field(default_factory=dict)
    excluded: list[Excluded] = field(default_factory=list)
    #: Read-only state per accepted frame (copy what you keep: entries may be shared).
    verification: dict[FrameId, Mapping[str, Any]] = field(default_factory=dict)
    #: Each provider's token share (``budget_split``; ``LegReport.share``).
    shares: dict[str, int] = field(default_factory=dict)
    #: The over-fetch factor and what each provider was asked for (``max_tokens``).
    overfetch: float = 1.0
    asked: dict[str, int] = field(default_factory=dict)
    #: Figures the verify/reuse stage adds (reused frames, evictions, …).
    figures: dict[str, Any] = field(default_factory=dict)
    #: ``file`` URI -> the bytes the verify stage matched accepted frames against, for
    #: each source two or more of them quote (``compose_for_prompt(sources=...)``).
    sources: dict[str, LineIndex] = field(default_factory=dict)
    #: Provider id -> ``(done, total)`` of the index it still builds, for each provider
    #: that answered from part of it: composing caps it to the share it has built.
    coverage: dict[str, tuple[int, int]] = field(default_factory=dict)
    #: ``compose_part()`` as ``judge`` built it, once: what a composition's reply takes
    #: from the fan-out (read as a field, so the pipeline asks the engine nothing more).
    part: dict[str, Any] = field(default_factory=dict)

    def usage_report(self, served: Iterable[FrameId] | None = None) -> dict[str, Any]:
        """UR1: ``budget_consumed`` is the summed canonical ``token_cost`` of the served
        frames (default: every accepted frame), each listed by its FrameId."""
        wanted = None if served is None else set(served)
        frames: list[dict[str, Any]] = []
        append = frames.append
        per_provider: dict[str, int] = {}
        # ``accepted`` runs provider by provider: each run's cost is summed apart and
        # added once (the same figures, without a dict update per frame).
        last: str | None = None
        run = 0
        for pid, frame in self.accepted:
            digest = frame.content_digest
            if wanted is not None and FrameId(pid, frame.id, digest) not in wanted:
                continue
            if pid != last:
                if last is not None:
                    per_provider[last] = per_provider.get(last, 0) + run
                last, run = pid, 0
            # The leg audit accepted it only when its declared cost is the honest one
            # (B3, P4): read it, do not recount its content.
            cost = frame.token_cost
            run += cost
            # FrameId.to_wire, without building the FrameId on the default path.
            append(
                {
                    "frame": {"provider_id": pid, "frame_id": frame.id}
                    if digest is None
                    else {"provider_id": pid, "frame_id": frame.id, "content_digest": digest},
                    "token_cost": cost,
                }
            )
        if last is not None:
            per_provider[last] = per_provider.get(last, 0) + run
        total = sum(per_provider.values())
        return {
            "budget_consumed": total,
            "global_budget": self.global_budget,
            "frames": frames,
            "providers": per_provider,
        }

    def compose_part(self) -> dict[str, Any]:
        """The fan-out's part of a ``context/compose`` result, in the reply's order: the
        legs' ``providers`` (sorted by id), ``usage`` (UR1, every accepted frame) and,
        when the verify stage added any, its ``verification`` figures (the same dict).
        One call builds it, so the report stage asks the fan-out once."""
        reports = self.reports
        part: dict[str, Any] = {
            "providers": [reports[pid].to_wire() for pid in sorted(reports)],
            "usage": self.usage_report(),
        }
        if self.figures:
            # Reuse and verification figures of the verify stage (sessions, V1–V4).
            part["verification"] = self.figures
        return part

    def to_wire(self) -> dict[str, Any]:
        """The ``context/query`` result shape: frames per provider and each report."""
        frames: dict[str, list[dict[str, Any]]] = {pid: [] for pid in self.reports}
        for pid, frame in self.accepted:
            frames.setdefault(pid, []).append(frame.to_wire())
        return {
            "frames": frames,
            "providers": [r.to_wire() for r in self.reports.values()],
            "excluded": [
                {"frame": fid.to_wire(), "reason": reason, "detail": detail}
                for fid, reason, detail in self.excluded
            ],
            # One entry per accepted frame, in FrameId order: what the verification
            # stage established (or ``unverified`` when it is off), as compose reports it.
            "verification": [
                {"frame": fid.to_wire(), "verification": dict(state)}
                for fid, state in sorted(self.verification.items())
            ],
            "usage": self.usage_report(),
            "overfetch": self.overfetch,
            # The sources span merging reads, by their line counts only: the lines that
            # matter are those the accepted frames quote (their content, source_verified),
            # so a client recomposing this set rebuilds what merging reads without the
            # daemon sending a byte of the file no provider offered.
            "sources": {uri: self.sources[uri].count for uri in sorted(self.sources)},
        }


def report_map(reports: Iterable[LegReport]) -> dict[str, LegReport]:
    """Reports keyed and ordered by provider id."""
    return {r.provider_id: r for r in sorted(reports, key=lambda r: r.provider_id)}
