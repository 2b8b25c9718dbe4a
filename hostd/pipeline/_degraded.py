"""One degraded flag: whether a composition is whole, and if not, every reason why.

A composition is whole when every leg it asked answered ``ok``, lost nothing (an
MCP tool of its that failed) and had no frame dropped as invalid, every held frame
it reused was verified, and its strategy ran as asked (the reranker's verdict, the
calibration's maps). Otherwise it is
``degraded``, and each shortfall is one ``Degraded`` from a closed vocabulary
(``REASONS``), naming the provider where one applies, so a client can tell "no
evidence exists" from "a provider was down". Computed once, in the pipeline's
report stage, from values the stages already hold: pure, and ordered so the same
shortfalls give the same bytes. Details are codes and counts hostd chose, never
text a provider wrote; a reason may also carry a ``message``, hostd's account of it
for a person (a rerank fallback: what failed and what to check), bounded.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from hostd.engine import LegReport, LegStatus
from hostd.protocol import Severity

__all__ = ["MESSAGE_CHARS", "REASONS", "Degraded", "degradations", "leg_degradation"]

#: The closed vocabulary of ``degraded_reasons[].reason``.
REASONS = (
    "provider_failed",  # the leg ended timeout, crashed (restarting: a crash loop), error…
    "provider_partial",  # an ok leg lost part: an MCP tool or read failed or timed out
    "provider_warming",  # started but not ready within the leg's bound (never a fault)
    "provider_skipped",  # not asked: its budget share was 0
    "quarantined",  # its reply broke a budget or kind rule (B1–B4, Q1, Q2): none served
    "frames_invalid",  # an ok leg's frames dropped for breaking a frame rule (F1–F5, D1, Q1…)
    "frames_unverified",  # its frames dropped by verification: digest or source mismatch, untrusted
    "consent_missing",  # not asked: a scope it declares has no consent receipt (C1, C6)
    "verify_skipped",  # its context/verify gave no verdicts: held frames read unknown
    "rerank_fallback",  # strategy rerank without the reranker's verdict
    "calibration_missing",  # strategy calibrated without maps: round_robin
)

#: The characters of a reason's ``message`` at most (as a health record's ``last_failure``).
MESSAGE_CHARS = 500

_FAILED = frozenset({LegStatus.TIMEOUT, LegStatus.CRASHED, LegStatus.ERROR, LegStatus.UNAUTHORIZED})


@dataclass(frozen=True, slots=True)
class Degraded:
    """One reason a composition is not whole: ``reason`` from ``REASONS``, the
    ``provider`` it concerns (if one), a short ``detail`` code, and a ``message`` for a
    person where hostd has one of its own (cut to ``MESSAGE_CHARS``)."""

    reason: str
    provider: str | None = None
    detail: str | None = None
    message: str | None = None

    def __post_init__(self) -> None:
        if self.reason not in REASONS:
            raise ValueError(f"unknown degraded reason {self.reason!r}")
        message = self.message
        if message is not None and len(message) > MESSAGE_CHARS:
            object.__setattr__(self, "message", message[: MESSAGE_CHARS - 1] + "…")

    def to_wire(self) -> dict[str, str]:
        out = {"reason": self.reason}
        if self.provider is not None:
            out["provider"] = self.provider
        if self.detail is not None:
            out["detail"] = self.detail
        if self.message is not None:
            out["message"] = self.message
        return out


def leg_degradation(report: LegReport) -> Degraded | None:
    """Why this leg leaves the composition short (``None`` for an ``ok`` leg)."""
    status, pid = report.status, report.provider_id
    if status is LegStatus.OK:
        if not report.violations:  # the common case: one attribute read
            return None
        # An ok leg's errors are its frames dropped as invalid (notices are kept frames).
        dropped = sorted({v.rule for v in report.violations if v.severity is Severity.ERROR})
        return Degraded("frames_invalid", pid, ",".join(dropped)) if dropped else None
    if status in _FAILED:
        # A crash loop's leg (``crashed``, code ``restarting``) says so in its detail: a
        # client tells it (no use asking again until its failure is fixed) from one crash.
        return Degraded(
            "provider_failed", pid, report.error_code if report.looping else status.value
        )
    if status is LegStatus.QUARANTINED:
        rules = sorted({v.rule for v in report.violations})
        return Degraded("quarantined", pid, ",".join(rules) or None)
    if status is LegStatus.NO_CONSENT:
        return Degraded("consent_missing", pid, ",".join(report.missing_scopes) or None)
    if status is LegStatus.WARMING:
        return Degraded("provider_warming", pid, report.error_code)
    return Degraded("provider_skipped", pid, report.error_code)


def _verify_code(error: Any) -> str | None:
    # The verify stage keeps ``"timeout"``, ``"not_sent"`` or ``"ExcType: message"``: the
    # code is what comes before the message (which may hold a provider's words).
    if not isinstance(error, str):
        return None
    return error.split(":", 1)[0] or None


#: The verify stage's drops that say a provider's evidence could not be trusted: its
#: content is not what its digest or its source says, or its source is outside every
#: trusted root (a config that does not cover the provider's files).
_UNVERIFIED = frozenset({"digest_mismatch", "source_mismatch", "untrusted_source"})


def degradations(
    reports: Mapping[str, LegReport],
    figures: Mapping[str, Any],
    strategy: Iterable[Degraded] = (),
    excluded: Iterable[tuple[Any, str, Any]] = (),
) -> tuple[Degraded, ...]:
    """Every reason the composition is not whole, sorted (empty: it is whole).

    ``reports`` are the fan-out's legs, ``figures`` its verify stage's figures
    (``verify_errors``), ``strategy`` what preparing the strategy fell back on,
    ``excluded`` the fan-out's dropped frames (``(FrameId, reason, detail)``)."""
    found = [d for d in map(leg_degradation, reports.values()) if d is not None]
    # Beside what ``leg_degradation`` says of an ok leg (its frames dropped as invalid).
    found.extend(
        Degraded("provider_partial", r.provider_id, ",".join(r.partial))
        for r in reports.values()
        if r.partial
    )
    unverified: dict[str, set[str]] = {}
    for fid, reason, _ in excluded:
        if reason in _UNVERIFIED:
            unverified.setdefault(fid.provider_id, set()).add(reason)
    for pid, reasons in unverified.items():
        found.append(Degraded("frames_unverified", pid, ",".join(sorted(reasons))))
    errors = figures.get("verify_errors")
    # ``errors and``: no verify error (the common case) costs no ABC instance check.
    if errors and isinstance(errors, Mapping):
        for pid, error in errors.items():
            code = _verify_code(error.get("error") if isinstance(error, Mapping) else None)
            found.append(Degraded("verify_skipped", str(pid), code))
    found.extend(strategy)
    return tuple(
        sorted(found, key=lambda d: (REASONS.index(d.reason), d.provider or "", d.detail or ""))
    )
