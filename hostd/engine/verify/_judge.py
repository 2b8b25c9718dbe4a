"""A verify turn's two pure steps, either side of its one source-reading step.

``judge_held`` reads each provider's verdicts against what it was asked (V2–V4):
which held frames stand (``valid``), which are evicted (``stale``, ``gone``) and
which are excluded, and what each provider's answer counted against it.
``merge`` takes every frame's inline and source check (read by the stage's one
I/O step) and decides each frame once (D4, F5, F17): accepted with a state or
excluded with a reason; a held copy that stands wins over a fresh copy of the same
FrameId (D2), and the result is ordered by provider id then FrameId. No I/O, no
clock, no state: what the stage must remember (evictions, this turn's frames,
health) is in the ``StageResult`` for ``VerifyStage.record``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from hostd._log import get_logger
from hostd.protocol import ContextFrame, FrameId, LineIndex, VerdictStatus

from ._reuse import HeldFrame
from ._rules import (
    Exclusion,
    InlineCheck,
    decide_frame,
    judge_verdicts,
    settled_state,
    sourceless_states,
    unrooted_states,
)
from ._source import SourceCheck
from ._turn import StageResult, VerifyPlan, VerifyReply

__all__ = ["Checked", "HeldJudgement", "judge_held", "merge"]

log = get_logger("hostd.engine.verify")

Pair = tuple[str, ContextFrame]
Excluded = tuple[FrameId, str, dict[str, Any]]
Checks = list[tuple[InlineCheck, SourceCheck | None]]


_COUNTS = (
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
)


@dataclass(slots=True)
class HeldJudgement:
    """What the verdicts say of the held frames (``judge_held``)."""

    session: str | None
    valid: list[HeldFrame] = field(default_factory=list)
    excluded: dict[FrameId, Excluded] = field(default_factory=dict)
    #: ``stale``/``gone`` → the FrameIds never to serve again (V4).
    evict: dict[str, list[FrameId]] = field(default_factory=dict)
    counts: dict[str, int] = field(default_factory=lambda: dict.fromkeys(_COUNTS, 0))
    health: dict[str, dict[str, int]] = field(default_factory=dict)
    #: Why a provider's verify gave no verdicts (timeout, error), and its bound.
    errors: dict[str, dict[str, Any]] = field(default_factory=dict)

    def bump(self, pid: str, key: str, n: int = 1) -> None:
        if n:
            h = self.health.setdefault(pid, {})
            h[key] = h.get(key, 0) + n


@dataclass(slots=True, frozen=True)
class Checked:
    """The turn after its source-reading step: every frame to decide, in order (the
    standing held copies first, ``n_reused`` of them), with its checks."""

    plan: VerifyPlan
    held: HeldJudgement
    fresh: int
    items: list[Pair]
    fids: list[FrameId]
    checks: Checks
    n_reused: int
    reads: int
    #: ``file`` URI -> the bytes frames were matched against this turn.
    sources: Mapping[str, LineIndex] = field(default_factory=dict)
    #: The held frames a provider offered again this turn.
    reoffered: frozenset[FrameId] = frozenset()
    #: The providers whose leg answered this turn (``None``: not known, every held frame
    #: may stand). Their held frames stand only when offered again: the answer to this
    #: turn's goal supersedes the last; a provider that gave none is stood in for.
    answered: frozenset[str] | None = None


def judge_held(
    plan: VerifyPlan,
    replies: Mapping[str, VerifyReply],
    *,
    fresh_ids: set[FrameId],
    upstream: set[FrameId],
    blocked: Mapping[str, str],
) -> HeldJudgement:
    """Judge each provider's verdicts against what it was asked (V2–V4).

    ``upstream``: FrameIds the leg audit already dropped this turn (their entry
    stands, a held copy is neither reused nor reported again); ``blocked``:
    providers whose leg was quarantined (id → reason; B2: their held frames are
    not reused).
    """
    session = plan.session
    out = HeldJudgement(session)
    for pid, entry in plan.asks.items():
        reply = replies.get(pid)
        asked = [h.fid for h in entry.ask]
        verdicts = None if reply is None else reply.verdicts
        judged, anomalies = judge_verdicts(asked, verdicts)
        out.bump(pid, "verify_failed", 1 if verdicts is None else 0)
        out.bump(pid, "verify_missing", anomalies["missing"])
        out.bump(pid, "verify_unrequested", anomalies["unrequested"])
        out.bump(pid, "verify_conflicting", anomalies["conflicting"] + anomalies["contradictory"])
        if anomalies["unrequested"]:  # verdicts under identities never asked (V2)
            n, missing = anomalies["unrequested"], anomalies["missing"]
            log.warning("verify.unmatched", provider_id=pid, unrequested=n, missing=missing)
        if verdicts is None:
            error = reply.error if reply is not None else "not_sent"
            limit = None if reply is None else reply.limit_ms
            out.errors[pid] = {"error": error, "limit_ms": limit}
            log.warning(
                "verify.failed", provider_id=pid, session=session, error=error, frames=len(asked)
            )
        for h in entry.ask:
            j = judged[h.fid]
            if h.fid in upstream:
                continue  # the leg audit dropped this FrameId this turn: its entry stands
            if j.status == VerdictStatus.VALID and pid in blocked:
                out.counts["not_reused_distrusted"] += 1
                if h.fid not in fresh_ids:
                    kept = {"verdict": "valid", "session": session}
                    out.excluded.setdefault(h.fid, (h.fid, blocked[pid], kept))
                continue
            if j.status == VerdictStatus.VALID:
                out.valid.append(h)
                continue
            detail: dict[str, Any] = {"verdict": j.status.value, "session": session}
            if j.note:
                detail["note"] = j.note
            if j.status in (VerdictStatus.STALE, VerdictStatus.GONE):
                out.evict.setdefault(j.status.value, []).append(h.fid)  # V4
                out.counts[j.status.value] += 1
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
                out.counts["unknown"] += 1
                reason = Exclusion.VERIFY_UNKNOWN
            if h.fid not in fresh_ids:
                out.excluded.setdefault(h.fid, (h.fid, reason.value, detail))
    return out


def merge(checked: Checked, untrusted_for: Mapping[str, str], untrusted: str) -> StageResult:
    """Decide every checked frame once and merge reused and fresh frames (D2)."""
    held, plan, session = checked.held, checked.plan, checked.plan.session
    counts = dict(held.counts)
    excluded = dict(held.excluded)
    evict = {k: list(v) for k, v in held.evict.items()}
    health = {pid: dict(h) for pid, h in held.health.items()}

    def bump(pid: str, key: str) -> None:
        h = health.setdefault(pid, {})
        h[key] = h.get(key, 0) + 1

    accepted_reused: list[HeldFrame] = []
    accepted_fresh: dict[FrameId, Pair] = {}
    # Shared read-only states (``settled_state``): most frames allocate none.
    verification: dict[FrameId, Mapping[str, Any]] = {}
    n_reused = checked.n_reused
    held_sourceless, fresh_sourceless = sourceless_states(True), sourceless_states(False)
    held_unrooted, fresh_unrooted = unrooted_states(True), unrooted_states(False)
    items = zip(checked.items, checked.fids, checked.checks, strict=True)
    reoffered, answered = checked.reoffered, checked.answered
    not_offered = 0
    for i, (pair, fid, (inline, source)) in enumerate(items):
        if fid in verification:
            # D2: same FrameId, same content: the held copy (or the first fresh one)
            # already stands for it, one FrameId, one audit entry.
            continue
        reused = i < n_reused
        if source is None:
            states = held_sourceless if reused else fresh_sourceless
            for p in pair[1].provenance:  # a plain loop: no call per frame
                if p.type == "file":
                    # Its provider has no trusted root: the file it cites was not
                    # re-read, so its state must not read as checked (F5): unverifiable.
                    states = held_unrooted if reused else fresh_unrooted
                    break
            state = states.get(inline.outcome)
        else:
            state = settled_state(inline, source, reused)
        if state is None:
            pid = pair[0]
            choice = untrusted_for.get(pid, untrusted)
            d = decide_frame(inline, source, reused=reused, untrusted=choice)
            if d.excluded is not None:
                counts[d.excluded.value] = counts.get(d.excluded.value, 0) + 1
                bump(pid, d.excluded.value)
                detail = dict(d.detail)
                if d.rubber_stamp:
                    counts["rubber_stamp"] += 1
                    bump(pid, "rubber_stamp")
                    detail["rubber_stamp"] = True
                    evict.setdefault("rubber_stamp", []).append(fid)
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
                continue
            assert d.state is not None
            state = d.state
        if reused and answered is not None and pair[0] in answered and fid not in reoffered:
            # Still good, but its provider answered this turn's goal without it: it
            # answered an earlier goal, at that goal's score, and would outrank this
            # turn's evidence. Not composed now, nor held on. (Judged all the same: a
            # provider that rubber-stamps it is caught.)
            not_offered += 1
            continue
        verification[fid] = state
        if reused:
            accepted_reused.append(held.valid[i])
        else:
            accepted_fresh[fid] = pair

    # D2: one entry per FrameId, ordered by provider then FrameId; a standing held copy
    # wins over a fresh copy of the same identity (it renders as the last turn did).
    by_id = dict(accepted_fresh)
    by_id.update((h.fid, (h.provider_id, h.frame)) for h in accepted_reused)
    accepted = [by_id[k] for k in sorted(by_id)]
    if excluded:
        for fid in verification:
            excluded.pop(fid, None)  # accepted under this FrameId: not also an exclusion
    # Counted in C, each state's key added as first seen, so the figures keep that order.
    for entry in verification.values():
        key = entry["state"]
        counts[key] = counts.get(key, 0) + 1
    counts["reused"] = len(accepted_reused)
    counts["not_offered_again"] = not_offered
    figures: dict[str, Any] = {
        "session": session,
        "held": plan.held,
        "verify_providers": len(plan.asks),
        "verify_requested": sum(len(e.ask) for e in plan.asks.values()),
        "not_reusable": sum(len(e.skipped) for e in plan.entries.values()),
        "fresh": checked.fresh,
        "source_reads": checked.reads,
    }
    if held.errors:
        figures["verify_errors"] = held.errors
    figures.update(counts)
    return StageResult(
        sources=_shared_sources(checked.sources, accepted),
        accepted=accepted,
        excluded=[excluded[k] for k in sorted(excluded)],
        verification=verification,
        reused=sorted(h.fid for h in accepted_reused),
        figures=figures,
        health=health,
        session=session,
        evict=evict,
        counts=counts,
    )


def split_held(
    held: Sequence[HeldFrame], fresh: Sequence[Pair], fresh_fids: Sequence[FrameId]
) -> tuple[list[Pair], list[FrameId], list[tuple[FrameId, Pair]]]:
    """The frames to check at once (standing held copies first, then fresh frames no
    held copy stands for) and the fresh copies of held frames, deferred: D2, each
    checked only if its held copy falls out, so an unchanged session reads each
    source once."""
    if not held:  # no session, or nothing of it stands: every fresh frame, at once
        return list(fresh), list(fresh_fids), []
    held_ids = {h.fid for h in held}
    first: list[Pair] = [(h.provider_id, h.frame) for h in held]
    first_fids: list[FrameId] = [h.fid for h in held]
    deferred: list[tuple[FrameId, Pair]] = []
    for fid, pair in zip(fresh_fids, fresh, strict=True):
        if fid in held_ids:
            deferred.append((fid, pair))
        else:
            first.append(pair)
            first_fids.append(fid)
    return first, first_fids, deferred


def _shared_sources(
    sources: Mapping[str, LineIndex], accepted: Sequence[Pair]
) -> dict[str, LineIndex]:
    """The sources two or more accepted frames quote: the only ones span merging can use."""
    if not sources:
        return {}
    quoting: dict[str, int] = {}
    for _, frame in accepted:
        provenance = frame.provenance
        if len(provenance) == 1:  # most frames: one entry, so no set of URIs to build
            p = provenance[0]
            if p.type == "file":
                uri = p.uri or frame.uri
                if uri is not None and uri in sources:
                    quoting[uri] = quoting.get(uri, 0) + 1
            continue
        for uri in {p.uri or frame.uri for p in provenance if p.type == "file"}:
            if uri is not None and uri in sources:
                quoting[uri] = quoting.get(uri, 0) + 1
    return {uri: sources[uri] for uri in sorted(quoting) if quoting[uri] > 1}


def _safe(detail: Mapping[str, Any]) -> dict[str, Any]:
    """Log-safe detail: digests, URIs and ranges only, never content (C8)."""
    keep = ("uri", "range", "expected", "actual", "reused", "provenance")
    return {k: detail[k] for k in keep if k in detail}
