"""Judging a fan-out: plain sync functions from raw replies to reports and frames.

``judge_leg`` turns one ``LegReply`` into its ``LegReport`` and, when the
provider answered, its leg audit (``_leg_audit``: frame rules, B1–B4, Q1 against
the query's and the declared kinds, Q2, quarantine). ``judge`` assembles the
``FanOut``: reports keyed by provider id,
accepted frames ordered by provider id then FrameId (never by arrival), every
dropped frame with its reason, and each accepted frame ``unverified`` until the
verify stage says more. No I/O, no clock.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from operator import itemgetter
from types import MappingProxyType
from typing import Any

from hostd.protocol import ContextFrame

from ._leg_audit import LegAudit, audit_leg
from ._plan import FanOutPlan, LegPlan
from ._report import Excluded, FanOut, LegReport, LegStatus, report_map
from ._run import LegReply

__all__ = ["JudgedLeg", "judge", "judge_leg"]

#: The state of every accepted frame before (or without) verification: one shared,
#: read-only mapping (readers copy what they keep).
UNVERIFIED: Mapping[str, Any] = MappingProxyType({"state": "unverified"})


@dataclass(slots=True, frozen=True)
class JudgedLeg:
    report: LegReport
    audit: LegAudit | None = None


def judge_leg(leg: LegPlan, reply: LegReply) -> JudgedLeg:
    """One leg's report (and audit, when frames came back)."""
    fields: dict[str, Any] = {
        "max_tokens": leg.asked,
        "share": leg.share,
        "latency_ms": reply.latency_ms,
    }
    if reply.status is not None or reply.frames is None:
        report = LegReport(
            leg.provider_id,
            reply.status or LegStatus.ERROR,
            error_code=reply.error_code,
            error_message=reply.error_message,
            violations=reply.violations,
            missing_scopes=reply.missing_scopes,
            **fields,
        )
        return JudgedLeg(report)
    audit = audit_leg(
        leg.provider_id, reply.query, reply.frames, declared_kinds=reply.declared_kinds
    )
    fields["violations"] = audit.violations
    fields["frames_offered"] = audit.offered
    if audit.quarantined:
        rules = sorted({v.rule for v in audit.quarantine})
        message = f"{', '.join(rules)}: " + "; ".join(
            f"{v.rule} {v.field}: {v.message}" for v in audit.quarantine[:5]
        )
        report = LegReport(
            leg.provider_id,
            LegStatus.QUARANTINED,
            error_code="quarantined",
            error_message=message,
            **fields,
        )
        return JudgedLeg(report, audit)
    report = LegReport(
        leg.provider_id,
        LegStatus.OK,
        frames_accepted=len(audit.accepted),
        tokens_accepted=audit.accepted_cost,
        **fields,
    )
    return JudgedLeg(report, audit)


def judge(plan: FanOutPlan, legs: Mapping[str, JudgedLeg]) -> FanOut:
    """The fan-out's result from every planned leg's judgement."""
    fan = FanOut(query=plan.query, global_budget=plan.global_budget, overfetch=plan.overfetch)
    fan.shares = {leg.provider_id: leg.share for leg in plan.legs}
    fan.asked = {leg.provider_id: leg.asked for leg in plan.legs}
    fan.reports = report_map(legs[leg.provider_id].report for leg in plan.legs)
    accepted: list[tuple[str, ContextFrame]] = []
    excluded: list[Excluded] = []
    for pid in sorted(legs):
        audit = legs[pid].audit
        if audit is None:
            continue
        excluded.extend(audit.excluded)
        accepted.extend((pid, frame) for frame in audit.accepted)
        # Already in (provider id, FrameId) order: providers sorted, each audit's sorted.
        fan.verification.update(dict.fromkeys(audit.accepted_ids, UNVERIFIED))
    fan.accepted = accepted
    fan.excluded = sorted(excluded, key=itemgetter(0))
    return fan
