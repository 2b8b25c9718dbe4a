"""Judging a fan-out: plain sync functions from raw replies to reports and frames.

``judge_leg`` turns one ``LegReply`` into its ``LegReport`` and, when the
provider answered, its leg audit (``_leg_audit``: frame rules, B1–B4, Q1 against
the query's and the declared kinds, Q2, quarantine). ``judge`` assembles the
``FanOut`` once: reports keyed by provider id, accepted frames ordered by
provider id then FrameId (never by arrival), every dropped frame with its
reason, and each accepted frame's verification state — the verify stage's
result when it ran (its source reads are the fan-out's one I/O step, run before
this), ``unverified`` otherwise. No I/O, no clock.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace
from itertools import repeat
from operator import itemgetter
from types import MappingProxyType
from typing import Any

from hostd._hints import PROVIDER_FAULTS
from hostd.protocol import FRAME_KINDS, ContextFrame, FrameId, Violation

from ._leg_audit import LegAudit, audit_leg
from ._plan import FanOutPlan, LegPlan
from ._report import Excluded, FanOut, LegReport, LegStatus, report_map
from ._run import LegReply
from .verify import StageResult

__all__ = [
    "Audited",
    "JudgedLeg",
    "audited",
    "behind",
    "judge",
    "judge_leg",
    "no_kind_declared",
    "nothing_fit",
    "refused_all",
    "refused_words",
]

#: The state of every accepted frame before (or without) verification: one shared,
#: read-only mapping (readers copy what they keep).
UNVERIFIED: Mapping[str, Any] = MappingProxyType({"state": "unverified"})


@dataclass(slots=True, frozen=True)
class JudgedLeg:
    report: LegReport
    audit: LegAudit | None = None


def judge_leg(
    leg: LegPlan, reply: LegReply, credentials: re.Pattern[str] | None = None
) -> JudgedLeg:
    """One leg's report (and audit, when frames came back). ``credentials`` matches
    the secrets of the host's config: a frame holding one is dropped (``credential``)."""
    fields: dict[str, Any] = {
        "max_tokens": leg.asked,
        "share": leg.share,
        "latency_ms": reply.latency_ms,
    }
    if leg.apart is not None:
        fields["share_apart"] = leg.apart
    if reply.status is not None or reply.frames is None:
        report = LegReport(
            leg.provider_id,
            reply.status or LegStatus.ERROR,
            error_code=reply.error_code,
            error_message=reply.error_message,
            phase=reply.phase,
            stderr_tail=reply.stderr_tail,
            violations=reply.violations,
            missing_scopes=reply.missing_scopes,
            sent=reply.sent,
            **fields,
        )
        return JudgedLeg(report)
    audit = audit_leg(
        leg.provider_id, reply.query, reply.frames, declared_kinds=reply.declared_kinds
    )
    if credentials is not None and audit.accepted:
        audit = _without_credentials(audit, credentials, leg.provider_id)
    fields["violations"] = audit.violations
    fields["frames_offered"] = audit.offered
    if audit.quarantined:
        message = _quarantine_message(audit.quarantine)
        report = LegReport(
            leg.provider_id,
            LegStatus.QUARANTINED,
            error_code="quarantined",
            error_message=message,
            **fields,
        )
        return JudgedLeg(report, audit)
    unfit = nothing_fit(reply, audit.offered, leg.asked)
    said = unfit or no_kind_declared(reply, audit.offered) or _empty(reply, audit.offered)
    notes = [n for n in (said, reply.lost, behind(reply)) if n]
    report = LegReport(
        leg.provider_id,
        LegStatus.OK,
        frames_accepted=len(audit.accepted),
        tokens_accepted=audit.accepted_cost,
        note="; ".join(notes) or None,
        nothing_fit=unfit is not None,
        partial=reply.lost_causes,
        building=reply.building,
        **fields,
    )
    return JudgedLeg(report, audit)


#: Why a frame holding a credential is dropped (its detail: which part held it).
#: The breaches a quarantine message spells out; the rest are counted, by rule.
_BREACHES_SAID = 5


def _quarantine_message(quarantine: tuple[Violation, ...]) -> str:
    """Why a reply was quarantined: each breach once, led by its own rule id
    (``B3 frames[0].token_cost: …``), the first few in full and the rest counted."""
    said = "; ".join(f"{v.rule} {v.field}: {v.message}" for v in quarantine[:_BREACHES_SAID])
    rest = quarantine[_BREACHES_SAID:]
    if rest:
        rules = ", ".join(sorted({v.rule for v in rest}))
        said += f"; and {len(rest)} more ({rules})"
    return said


_CREDENTIAL = "credential"


def _without_credentials(
    audit: LegAudit, credentials: re.Pattern[str], provider_id: str
) -> LegAudit:
    """``audit`` less the accepted frames whose text holds a credential of the host's
    config (a token, a secret ``env`` value): a provider may serve the very file a
    ``token_file`` names, and nothing of it may reach a model. The credential is not
    quoted, only the field that held it."""
    search = credentials.search
    ids = audit.accepted_ids or FrameId.many(provider_id, audit.accepted)
    kept: list[tuple[ContextFrame, FrameId]] = []
    dropped: list[Excluded] = []
    for frame, fid in zip(audit.accepted, ids, strict=True):
        held = next(
            (
                name
                for name, text in (
                    ("content", frame.content),
                    ("title", frame.title),
                    ("citation_label", frame.citation_label),
                )
                if text and search(text)
            ),
            None,
        )
        if held is None:
            kept.append((frame, fid))
        else:
            dropped.append((fid, _CREDENTIAL, {"field": held}))
    if not dropped:
        return audit
    return replace(
        audit,
        accepted=tuple(f for f, _ in kept),
        accepted_ids=tuple(i for _, i in kept) if audit.accepted_ids else (),
        accepted_cost=sum(f.token_cost for f, _ in kept),
        excluded=(*audit.excluded, *dropped),
    )


def nothing_fit(reply: LegReply, offered: int, asked: int) -> str | None:
    """The note of a leg that answered no frame and said it left some out
    (``truncated``): what it had did not fit what it was asked for. ``None`` otherwise."""
    if offered or not reply.truncated or reply.query.max_frames == 0:
        return None
    left = f" (it left out {reply.dropped} frame(s))" if reply.dropped else ""
    return f"nothing fit: no frame within its share of {asked} tokens{left}"


def refused_all(judged: JudgedLeg) -> str | None:
    """What an ``ok`` leg's frames broke when it offered some and every one was refused
    as invalid at its audit (``invalid_frame 2 of 2 (schema frames[0].title: missing)``),
    for its provider's health when no verify stage runs (``refused_words`` otherwise,
    once the stage has dropped what it drops). ``None`` otherwise."""
    audit = judged.audit
    if judged.report.status is not LegStatus.OK or audit is None or audit.accepted:
        return None
    return refused_words(judged.report, audit.excluded)


def refused_words(report: LegReport, excluded: Iterable[Excluded]) -> str | None:
    """What an ``ok`` leg's frames were refused for when it offered some and lost every
    one for what it sent (``PROVIDER_FAULTS``: an invalid frame, a digest or a source
    that is not its content's, a file outside the trusted roots), by reason, of how many
    it offered, with the first violation of the first invalid frame (hostd's words):
    ``digest_mismatch 1, invalid_frame 1 of 2 (schema frames[0].title: missing)``. For
    its provider's health (up and answering, yet giving nothing usable). ``None``
    otherwise: no frame offered, one kept, or one dropped for another reason.
    ``excluded``: every frame dropped in the fan-out (this leg's are picked out)."""
    offered = report.frames_offered
    if report.status is not LegStatus.OK or not offered:
        return None
    pid = report.provider_id
    # A plain dict, not a Counter: this runs for every ok leg of every composition, and
    # most have nothing excluded.
    reasons: dict[str, int] = {}
    first: dict[str, Any] | None = None
    for fid, reason, detail in excluded:
        if fid.provider_id != pid or reason not in PROVIDER_FAULTS:
            continue
        reasons[reason] = reasons.get(reason, 0) + 1
        if first is None and reason == "invalid_frame":
            first = (detail.get("violations") or [{}])[0]
    if sum(reasons.values()) != offered:
        return None
    counts = ", ".join(f"{reason} {n}" for reason, n in sorted(reasons.items()))
    what = (
        " ".join(str(first.get(k, "")) for k in ("rule", "field") if first.get(k)) if first else ""
    )
    said = f" ({what}: {first['message']})" if first and what and first.get("message") else ""
    return f"{counts} of {offered}{said}"


def _empty(reply: LegReply, offered: int) -> str | None:
    """The note of a leg whose binding said why its answer holds no frame
    (``EmptyResult``). ``None`` otherwise."""
    return reply.empty if not offered else None


def behind(reply: LegReply) -> str | None:
    """The note of a leg whose provider answered from an index built before some files
    changed, while it builds the next (``unindexed_changes``): its frames may miss what
    changed (those it quotes of a changed file are re-read by verify). ``None`` otherwise."""
    if not reply.behind:
        return None
    return f"answered from its index before {reply.behind} changed file(s); rebuilding"


def no_kind_declared(reply: LegReply, offered: int) -> str | None:
    """The note of a leg that answered no frame when the request asked for kinds its
    provider declares none of (its ``capabilities.query.kinds``): those of the
    protocol's vocabulary are named, so the caller knows what to ask; any other is the
    provider's own text (U2), counted, never quoted. ``None`` otherwise."""
    kinds, declared = reply.query.kinds, reply.declared_kinds
    if offered or not kinds or not declared or not set(kinds).isdisjoint(declared):
        return None
    known = sorted(set(declared) & FRAME_KINDS)
    others = len(set(declared)) - len(known)
    named = ", ".join(known) + (f" and {others} other(s)" if others and known else "")
    return (
        f"no frame: none of the kinds asked ({', '.join(kinds)}) is among the "
        f"{len(declared)} it declares" + (f" ({named})" if known else "")
    )


@dataclass(slots=True, frozen=True)
class Audited:
    """What the leg audits let through and dropped, before verification: accepted
    frames by provider id then FrameId, every drop with its reason, and the
    providers whose leg was quarantined (B2: their held frames are not reused)."""

    accepted: list[tuple[str, ContextFrame]]
    excluded: list[Excluded]
    distrusted: list[str]
    #: The FrameId of each accepted frame, in the same order (the leg audits built them).
    accepted_ids: list[FrameId]


def audited(legs: Mapping[str, JudgedLeg]) -> Audited:
    """Every judged leg's frames, merged (pure; never by arrival)."""
    accepted: list[tuple[str, ContextFrame]] = []
    ids: list[FrameId] = []
    excluded: list[Excluded] = []
    for pid in sorted(legs):
        audit = legs[pid].audit
        if audit is None:
            continue
        excluded.extend(audit.excluded)
        # Already in (provider id, FrameId) order: providers sorted, each audit's sorted.
        accepted.extend(zip(repeat(pid), audit.accepted))
        if len(audit.accepted_ids) == len(audit.accepted):
            ids.extend(audit.accepted_ids)
        else:  # an audit built without them
            ids.extend(FrameId.many(pid, audit.accepted))
    distrusted = [p for p in sorted(legs) if legs[p].report.status is LegStatus.QUARANTINED]
    return Audited(accepted, excluded, distrusted, ids)


def judge(
    plan: FanOutPlan, legs: Mapping[str, JudgedLeg], verified: StageResult | None = None
) -> FanOut:
    """The fan-out's result, built once, from every planned leg's judgement and (with
    the verify stage on) the turn's verified result: its accepted frames and states
    stand, its drops join the leg audits'. Without it every accepted frame is
    ``unverified``."""
    fan = FanOut(query=plan.query, global_budget=plan.global_budget, overfetch=plan.overfetch)
    fan.shares = {leg.provider_id: leg.share for leg in plan.legs}
    fan.asked = {leg.provider_id: leg.asked for leg in plan.legs}
    fan.reports = report_map(legs[leg.provider_id].report for leg in plan.legs)
    fan.coverage = {p: r.building for p, r in fan.reports.items() if r.building is not None}
    if verified is None:
        got = audited(legs)
        fan.accepted = got.accepted
        fan.excluded = sorted(got.excluded, key=itemgetter(0))
        fan.verification = dict.fromkeys(got.accepted_ids, UNVERIFIED)
        fan.part = fan.compose_part()
        return fan
    # The verify stage's result holds the accepted frames (it was handed ``audited``'s
    # before): of the leg audits only their drops are still to merge, not their frames
    # paired and listed again.
    dropped = [e for pid in sorted(legs) if (a := legs[pid].audit) is not None for e in a.excluded]
    fan.accepted = list(verified.accepted)
    fan.excluded = sorted([*dropped, *verified.excluded], key=itemgetter(0))
    fan.verification = dict(verified.verification)
    fan.figures = dict(verified.figures)
    fan.sources = dict(verified.sources)
    fan.part = fan.compose_part()
    return fan
