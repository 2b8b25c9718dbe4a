"""The verification and reuse stage between fan-out and composition (D2–D4, F5, F17, V1–V4).

Every frame that reaches composition leaves here with a verification state;
every frame this stage drops leaves as ``(FrameId, reason, detail)``. A turn of
a session runs in three steps, so the ``context/verify`` round trip overlaps the
fresh queries instead of following them:

1. ``plan = stage.plan(session, can_verify=...)`` — sync: which held frames to
   revalidate with which provider (digest-carrying only, V1; D3).
2. ``replies = await stage.ask(plan, send_verify)`` — run it in the same task
   group as the fresh fan-out legs; each provider's failure is a value.
3. ``result = await stage.finish(fresh, plan=plan, replies=replies)`` — judge the
   verdicts (V2, V3), evict ``stale``/``gone`` (V4), check inline digests (D4),
   re-read ``file`` sources under trusted roots in a worker thread (F5, F17),
   flag providers that rubber-stamp, merge reused and fresh frames by FrameId
   (D2) and hold this turn's frames for the next.

``verify_stage(...)`` does the three in order for callers without a fan-out of
their own. This module owns the verification decisions and the session cache;
it never talks to a transport directly (``send_verify`` is given to it).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Mapping
from typing import Any

import anyio
import anyio.to_thread
import structlog

from hostd.protocol import ContextFrame, FrameId, VerdictStatus

from ._checks import check_frames, needs_io
from ._reuse import (
    HeldFrame,
    ReuseCache,
)
from ._rules import (
    UNTRUSTED_CHOICES,
    Exclusion,
    InlineCheck,
    VerifyPlanEntry,
    build_verify_requests,
    decide_frame,
    judge_verdicts,
)
from ._source import DEFAULT_MAX_SOURCE_BYTES, SourceCheck
from ._turn import (
    DEFAULT_VERIFY_TIMEOUT_MS,
    Roots,
    SendVerify,
    StageResult,
    VerifyPlan,
    VerifyReply,
    ask_one,
)

__all__ = ["VerifyStage", "verify_stage"]

log = structlog.get_logger("hostd.engine.verify")

_HEALTH_KEYS = (
    "digest_mismatch",
    "source_mismatch",
    "rubber_stamp",
    "verify_failed",
    "verify_missing",
    "verify_unrequested",
    "verify_conflicting",
)


class VerifyStage:
    """Verification settings, the session cache and cumulative counters for one host.

    ``trusted_roots`` maps provider id → roots under which that provider's
    ``file`` sources are re-read; ``host_roots`` apply to every provider. With
    no root for a provider its sources are not re-read (its frames get
    ``content_checked`` at best). ``remote`` names providers on another machine:
    their paths name that machine's files, so ``host_roots`` do not cover them (only
    their own ``trusted_roots`` do). Source files larger than ``max_source_bytes``
    are ``too_large``.
    """

    def __init__(
        self,
        *,
        cache: ReuseCache | None = None,
        trusted_roots: Mapping[str, Roots] | None = None,
        host_roots: Roots = (),
        max_source_bytes: int = DEFAULT_MAX_SOURCE_BYTES,
        verify_timeout_ms: float = DEFAULT_VERIFY_TIMEOUT_MS,
        untrusted: str = "exclude",
        provider_untrusted: Mapping[str, str] | None = None,
        remote: Iterable[str] = (),
    ) -> None:
        self.cache = cache if cache is not None else ReuseCache()
        self.remote = frozenset(remote)
        self.trusted_roots = {pid: tuple(r) for pid, r in (trusted_roots or {}).items()}
        self.host_roots = tuple(host_roots)
        self.max_source_bytes = max_source_bytes
        for choice in (untrusted, *(provider_untrusted or {}).values()):
            if choice not in UNTRUSTED_CHOICES:
                raise ValueError(f"untrusted must be one of {UNTRUSTED_CHOICES}, got {choice!r}")
        #: Frames with ``file`` provenance outside every trusted root: "exclude" or
        #: "include" (marked ``unverifiable``), per provider or for all.
        self.untrusted = untrusted
        self.provider_untrusted = dict(provider_untrusted or {})
        #: The bound on a ``context/verify`` that ``ask`` was given no limit for.
        self.verify_timeout_ms = verify_timeout_ms
        self._health: dict[str, dict[str, int]] = {}
        self._totals: dict[str, int] = {}

    # -- step 1: plan (sync) -------------------------------------------------------

    def plan(
        self,
        session: str | None,
        *,
        can_verify: Callable[[str], bool] | Mapping[str, bool],
        providers: Iterable[str] | None = None,
    ) -> VerifyPlan:
        """Which held frames of ``session`` to revalidate, and with whom (V1, D3)."""
        if session is None:
            return VerifyPlan(None)
        held = self.cache.held(session)
        entries = build_verify_requests(held, can_verify=can_verify, providers=providers)
        return VerifyPlan(session, entries, len(held))

    # -- step 2: ask (concurrent with the fan-out) ---------------------------------

    async def ask(
        self,
        plan: VerifyPlan,
        send_verify: SendVerify,
        *,
        limits_ms: Mapping[str, float] | None = None,
        started: float | None = None,
    ) -> dict[str, VerifyReply]:
        """Send every planned ``context/verify`` concurrently; failures become replies.

        Each call ends by its provider's deadline: ``started`` (anyio time, default
        now) plus its entry in ``limits_ms`` (the fan-out gives each provider one
        deadline for its query and its verify), else ``verify_timeout_ms``. A
        timeout reads as ``unknown`` for every identity asked (V2).
        """
        asks = plan.asks
        replies: dict[str, VerifyReply] = {}
        if not asks:
            return replies
        start = anyio.current_time() if started is None else started
        limits = limits_ms or {}

        async def one(pid: str, entry: VerifyPlanEntry) -> None:
            limit_ms = limits.get(pid, self.verify_timeout_ms)
            replies[pid] = await ask_one(
                pid, entry, send_verify, deadline=start + limit_ms / 1000, limit_ms=limit_ms
            )

        async with anyio.create_task_group() as tg:
            for pid, entry in asks.items():
                tg.start_soon(one, pid, entry)
        return replies

    # -- step 3: finish ------------------------------------------------------------

    def _roots_for(self, provider_id: str) -> tuple[str | os.PathLike[str], ...]:
        own = self.trusted_roots.get(provider_id, ())
        return own if provider_id in self.remote else (*own, *self.host_roots)

    async def _run_checks(
        self, items: list[tuple[str, ContextFrame]]
    ) -> tuple[list[tuple[InlineCheck, SourceCheck | None]], int]:
        """``check_frames`` in a worker thread when it will touch files, inline otherwise."""
        if not items:
            return [], 0
        if needs_io(items, self._roots_for):
            return await anyio.to_thread.run_sync(
                check_frames, items, self._roots_for, self.max_source_bytes
            )
        return check_frames(items, self._roots_for, self.max_source_bytes)

    async def finish(
        self,
        fresh: Iterable[tuple[str, ContextFrame]],
        *,
        plan: VerifyPlan | None = None,
        replies: Mapping[str, VerifyReply] | None = None,
        remember: bool = True,
        upstream_excluded: Iterable[FrameId] = (),
        distrusted: Mapping[str, str] | Iterable[str] = (),
    ) -> StageResult:
        """Judge, check, merge and (with a session) hold this turn's frames.

        ``upstream_excluded``: FrameIds an earlier stage (the leg audit) already
        dropped this turn; a held copy of one is never reused nor reported again,
        so each FrameId has one audit entry. ``distrusted``: providers whose leg
        was quarantined this turn (id → reason, or ids with reason
        ``quarantined``); their held frames are not reused (B2: a rejected
        provider contributes nothing).
        """
        plan = plan if plan is not None else VerifyPlan(None)
        replies = replies or {}
        session = plan.session
        fresh_list = list(fresh)
        fresh_fids = [FrameId.of(pid, f) for pid, f in fresh_list]
        fresh_ids = set(fresh_fids)
        upstream = set(upstream_excluded)
        if isinstance(distrusted, Mapping):
            blocked = dict(distrusted)
        else:
            blocked = dict.fromkeys(distrusted, "quarantined")
        figures: dict[str, Any] = {
            "session": session,
            "held": plan.held,
            "verify_providers": len(plan.asks),
            "verify_requested": sum(len(e.ask) for e in plan.asks.values()),
            "not_reusable": sum(len(e.skipped) for e in plan.entries.values()),
            "fresh": len(fresh_list),
        }
        counts = dict.fromkeys(
            (
                "reused",
                "stale",
                "gone",
                "unknown",
                "content_checked",
                "source_verified",
                "provider_verified",
                "unverifiable",
                "digest_mismatch",
                "source_mismatch",
                "rubber_stamp",
                "not_reused_distrusted",
            ),
            0,
        )
        health: dict[str, dict[str, int]] = {}
        # Why a provider's verify gave no verdicts this pass (timeout, error), and the bound.
        errors: dict[str, dict[str, Any]] = {}

        def bump(pid: str, key: str, n: int = 1) -> None:
            if n:
                h = health.setdefault(pid, {})
                h[key] = h.get(key, 0) + n

        excluded: dict[FrameId, tuple[FrameId, str, dict[str, Any]]] = {}
        valid_held: list[HeldFrame] = []
        to_evict: dict[str, list[FrameId]] = {}

        # V2–V4: judge each provider's verdicts against what it was asked.
        for pid, entry in plan.asks.items():
            reply = replies.get(pid)
            asked = [h.fid for h in entry.ask]
            verdicts = None if reply is None else reply.verdicts
            judged, anomalies = judge_verdicts(asked, verdicts)
            bump(pid, "verify_failed", 1 if verdicts is None else 0)
            bump(pid, "verify_missing", anomalies["missing"])
            bump(pid, "verify_unrequested", anomalies["unrequested"])
            bump(pid, "verify_conflicting", anomalies["conflicting"] + anomalies["contradictory"])
            if anomalies["unrequested"]:  # verdicts under identities never asked (V2)
                n, missing = anomalies["unrequested"], anomalies["missing"]
                log.warning("verify.unmatched", provider_id=pid, unrequested=n, missing=missing)
            if verdicts is None:
                errors[pid] = {
                    "error": reply.error if reply is not None else "not_sent",
                    "limit_ms": None if reply is None else reply.limit_ms,
                }
                log.warning(
                    "verify.failed",
                    provider_id=pid,
                    session=session,
                    error=reply.error if reply is not None else "not_sent",
                    frames=len(asked),
                )
            for h in entry.ask:
                j = judged[h.fid]
                if h.fid in upstream:
                    continue  # the leg audit dropped this FrameId this turn: its entry stands
                if j.status == VerdictStatus.VALID and pid in blocked:
                    counts["not_reused_distrusted"] += 1
                    if h.fid not in fresh_ids:
                        excluded.setdefault(
                            h.fid,
                            (h.fid, blocked[pid], {"verdict": "valid", "session": session}),
                        )
                    continue
                if j.status == VerdictStatus.VALID:
                    valid_held.append(h)
                    continue
                detail: dict[str, Any] = {"verdict": j.status.value, "session": session}
                if j.note:
                    detail["note"] = j.note
                if j.status in (VerdictStatus.STALE, VerdictStatus.GONE):
                    # V4: never serve the stored copy again.
                    to_evict.setdefault(j.status.value, []).append(h.fid)
                    counts[j.status.value] += 1
                    reason = Exclusion.STALE if j.status == VerdictStatus.STALE else Exclusion.GONE
                    if j.replacement_digest is not None:
                        detail["replacement_digest"] = j.replacement_digest
                        log.info(
                            "verify.replacement_digest",
                            provider_id=pid,
                            frame=str(h.fid),
                            replacement_digest=j.replacement_digest,
                            session=session,
                        )
                else:
                    counts["unknown"] += 1
                    reason = Exclusion.VERIFY_UNKNOWN
                if h.fid not in fresh_ids:
                    excluded.setdefault(h.fid, (h.fid, reason.value, detail))
        if session is not None:
            for reason_name, fids in to_evict.items():
                self.cache.evict(session, fids, reason_name)

        # D4, F5, F17: inline digests and source re-reads, off the event loop when reading.
        # D2: a fresh copy of a held frame is the same content; it is checked only
        # if the held copy falls out, so an unchanged session reads each source once.
        held_ids = {h.fid for h in valid_held}
        first: list[tuple[str, ContextFrame]] = [(h.provider_id, h.frame) for h in valid_held]
        first_fids: list[FrameId] = [h.fid for h in valid_held]
        deferred: list[tuple[FrameId, tuple[str, ContextFrame]]] = []
        for fid, pair in zip(fresh_fids, fresh_list, strict=True):
            if fid in held_ids:
                deferred.append((fid, pair))
            else:
                first.append(pair)
                first_fids.append(fid)

        accepted_reused: list[HeldFrame] = []
        accepted_fresh: dict[FrameId, tuple[str, ContextFrame]] = {}
        verification: dict[FrameId, dict[str, Any]] = {}
        reads = 0

        def take(
            items: list[tuple[str, ContextFrame]],
            fids: list[FrameId],
            checks: list[tuple[InlineCheck, SourceCheck | None]],
            n_reused: int,
        ) -> None:
            for i, ((pid, frame), (inline, source)) in enumerate(zip(items, checks, strict=True)):
                reused = i < n_reused
                fid = fids[i]
                if fid in verification:
                    # D2: same FrameId, same content: the held copy (or the first fresh
                    # one) already stands for it, one FrameId, one audit entry.
                    continue
                choice = self.provider_untrusted.get(pid, self.untrusted)
                d = decide_frame(inline, source, reused=reused, untrusted=choice)
                if d.excluded is None:
                    assert d.state is not None
                    verification[fid] = dict(d.state)
                    if reused:
                        accepted_reused.append(valid_held[i])
                    else:
                        accepted_fresh[fid] = (pid, frame)
                    continue
                counts[d.excluded.value] = counts.get(d.excluded.value, 0) + 1
                bump(pid, d.excluded.value)
                detail = dict(d.detail)
                if d.rubber_stamp:
                    counts["rubber_stamp"] += 1
                    bump(pid, "rubber_stamp")
                    detail["rubber_stamp"] = True
                    if session is not None:
                        self.cache.evict(session, [fid], "rubber_stamp")
                    log.warning(
                        "verify.rubber_stamp",
                        provider_id=pid,
                        frame=str(fid),
                        uri=detail.get("uri"),
                        session=session,
                    )
                else:
                    log.warning(
                        f"verify.{d.excluded.value}",
                        provider_id=pid,
                        frame=str(fid),
                        **_safe(detail),
                    )
                excluded.setdefault(fid, (fid, d.excluded.value, detail))

        checks, n = await self._run_checks(first)
        reads += n
        take(first, first_fids, checks, len(valid_held))
        retry = [(fid, pair) for fid, pair in deferred if fid not in verification]
        if retry:
            checks, n = await self._run_checks([pair for _, pair in retry])
            reads += n
            take([pair for _, pair in retry], [fid for fid, _ in retry], checks, 0)
        figures["source_reads"] = reads
        if errors:
            figures["verify_errors"] = errors

        # D2: one entry per FrameId, ordered by provider then FrameId (as merge_candidates).
        by_id = dict(accepted_fresh)
        from_cache = {h.fid for h in accepted_reused}
        by_id.update((h.fid, (h.provider_id, h.frame)) for h in accepted_reused)
        accepted = [by_id[k] for k in sorted(by_id)]
        for fid in verification:
            excluded.pop(fid, None)  # accepted under this FrameId: not also an exclusion
        for state in verification.values():
            counts[state["state"]] = counts.get(state["state"], 0) + 1
        counts["reused"] = len(from_cache)
        figures.update(counts)
        reused_ids = sorted(from_cache)

        if session is not None and remember:
            self.cache.remember(session, accepted)
        figures["cache"] = {"sessions": len(self.cache), "frames": self.cache.total_frames}

        for pid, flags in health.items():
            cumulative = self._health.setdefault(pid, {})
            for k, n in flags.items():
                cumulative[k] = cumulative.get(k, 0) + n
        for k, n in counts.items():
            self._totals[k] = self._totals.get(k, 0) + n
        self._totals["passes"] = self._totals.get("passes", 0) + 1
        log.info("verify.stage.done", **{k: v for k, v in figures.items() if k != "cache"})
        return StageResult(
            accepted=accepted,
            excluded=[excluded[k] for k in sorted(excluded)],
            verification=verification,
            reused=reused_ids,
            figures=figures,
            health=health,
        )

    # -- state for host/status and providers/list ----------------------------------

    def remember(self, session: str, frames: Iterable[tuple[str, ContextFrame]]) -> int:
        """Hold exactly these frames (e.g. those composed) as ``session``'s last turn."""
        return self.cache.remember(session, frames)

    def health(self, provider_id: str) -> dict[str, int]:
        """Cumulative verification counters against one provider (all keys present)."""
        h = self._health.get(provider_id, {})
        return {k: h.get(k, 0) for k in _HEALTH_KEYS}

    def figures(self) -> dict[str, Any]:
        """Cumulative verification totals and the reuse cache figures, for ``host/status``."""
        return {"verification": dict(sorted(self._totals.items())), "reuse": self.cache.figures()}


def _safe(detail: Mapping[str, Any]) -> dict[str, Any]:
    """Log-safe detail: digests, URIs and ranges only, never content (C8)."""
    keep = ("uri", "range", "expected", "actual", "reused", "provenance")
    return {k: detail[k] for k in keep if k in detail}


async def verify_stage(
    fresh: Iterable[tuple[str, ContextFrame]],
    *,
    stage: VerifyStage,
    session: str | None = None,
    can_verify: Callable[[str], bool] | Mapping[str, bool] | None = None,
    send_verify: SendVerify | None = None,
    providers: Iterable[str] | None = None,
) -> StageResult:
    """Plan, ask and finish in order, for callers that have already fanned out.

    Without ``send_verify`` (or ``can_verify``) nothing is revalidated and held
    frames are not reused; fresh frames are still checked.
    """
    if send_verify is None or can_verify is None:
        plan = stage.plan(session, can_verify=lambda _pid: False, providers=providers)
        return await stage.finish(fresh, plan=plan)
    plan = stage.plan(session, can_verify=can_verify, providers=providers)
    replies = await stage.ask(plan, send_verify)
    return await stage.finish(fresh, plan=plan, replies=replies)
