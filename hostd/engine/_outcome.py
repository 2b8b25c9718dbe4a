"""What one leg brought back, before any judgement, and a typed failure's report fields.

``LegReply`` is the value every leg of a fan-out ends as (``_run``), judged by
``judge_leg`` (``_judge``); ``failure_of`` maps a leg's typed failure to its status,
code, message and violations, ``stderr_tail_of`` reads the stderr lines it carries.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from hostd.errors import (
    HandshakeFailed,
    HostdError,
    ProviderCrashed,
    ProviderError,
    ProviderTimeout,
    ProviderUnauthorized,
)
from hostd.protocol import ContextQuery, Violation

from ._report import LegStatus

__all__ = [
    "WARMING_PARTIAL",
    "LegReply",
    "building",
    "failure_of",
    "progress_figure",
    "stderr_tail_of",
    "warming_note",
    "warming_phase",
]


@dataclass(slots=True, frozen=True)
class LegReply:
    """What one leg brought back, before any judgement: the frames as received, or why
    there are none (``status``: timeout, crashed, error, no_consent, skipped)."""

    provider_id: str
    #: The query actually sent (after the gate); the leg audit judges against it.
    query: ContextQuery
    frames: Sequence[Any] | None = None
    status: LegStatus | None = None
    error_code: str | None = None
    error_message: str | None = None
    #: A ``warming`` leg's provider's last phase (``warming_phase``).
    phase: str | None = None
    #: A failed leg's provider's last stderr lines (``stderr_tail_of``).
    stderr_tail: str | None = None
    violations: tuple[Violation, ...] = ()
    missing_scopes: tuple[str, ...] = ()
    #: From the fan-out's start.
    latency_ms: float = 0.0
    #: The answering provider's ``capabilities.query.kinds`` (Q1: empty is any kind).
    declared_kinds: tuple[str, ...] = ()
    #: The reply said it left eligible frames out (``truncated``), and how many.
    truncated: bool = False
    dropped: int | None = None
    #: Files changed since the index it answered from was built (``unindexed_changes``).
    behind: int | None = None
    #: The binding's own calls it lost the results of (``PartialResult``): hostd's words
    #: for the leg's note, and how, as codes.
    lost: str | None = None
    lost_causes: tuple[str, ...] = ()
    #: An answer given while its provider still builds its index: ``(done, total)`` of
    #: its last progress (``building``), what it searched of what it will.
    building: tuple[int, int] | None = None
    #: Why an answer with no frame holds none, when its binding can tell
    #: (``EmptyResult``): hostd's words for the leg's note.
    empty: str | None = None
    #: Its provider's ``Health.timeout_mark`` when the query was sent (``None``: never
    #: sent): a timeout counts toward "hung" only if none was counted while it was out.
    sent_mark: int | None = None
    #: ``False``: a failure told at once, the query never sent (``LegReport.sent``).
    sent: bool = True


def stderr_tail_of(exc: HostdError) -> str | None:
    """The last lines of its stderr a provider's failure carries (the transport's
    ``explain`` adds them), ``None`` when none: its process wrote nothing, or there was
    no process to ask (a remote provider, a hang)."""
    tail = exc.data.get("stderr_tail")
    return tail if isinstance(tail, str) and tail else None


def _violations_of(exc: HostdError) -> tuple[Violation, ...]:
    raw = exc.data.get("violations") or []
    return tuple(Violation(v["rule"], v["field"], v["message"]) for v in raw if isinstance(v, dict))


def failure_of(
    exc: HostdError, progress: Mapping[str, Any] | None = None
) -> tuple[LegStatus, str, str, tuple[Violation, ...]]:
    """A leg's typed failure as (status, code, message, violations); ``progress``: the
    provider's last warm-up figures, told with a ``warming`` answer. The code is said
    once: a message that begins with it (``certificate not trusted (…)``, code
    ``certificate``) is given without it (``not trusted (…)``), as its health's
    ``last_failure`` says it (``failure_text``)."""
    status, code, message, violations = _failure_of(exc, progress)
    return status, code, message.removeprefix(f"{code} "), violations


def _failure_of(
    exc: HostdError, progress: Mapping[str, Any] | None
) -> tuple[LegStatus, str, str, tuple[Violation, ...]]:
    if isinstance(exc, ProviderTimeout):  # the handshake's own timeout
        return LegStatus.TIMEOUT, "handshake_timeout", exc.message, ()
    if isinstance(exc, ProviderUnauthorized):  # a remote provider's 401/403
        return LegStatus.UNAUTHORIZED, exc.reason, exc.message, ()
    if isinstance(exc, ProviderCrashed):  # RemoteTransport included: code ``transport``
        return LegStatus.CRASHED, exc.reason, exc.message, ()
    if isinstance(exc, HandshakeFailed):  # IncompatibleVersion included (H1–H3, H2, C5)
        return LegStatus.ERROR, exc.reason, exc.message, _violations_of(exc)
    if isinstance(exc, ProviderError):
        if exc.data.get("warming") is True:  # answered "not ready yet" (_readiness)
            # hostd's words and the provider's last figures: its own message (by size
            # only, C8) would tell the user nothing.
            message = f"provider warming, answered not ready{progress_figure(progress or {})}"
            return LegStatus.WARMING, "warming", message, ()
        return LegStatus.ERROR, exc.cgp_code.value, exc.message, ()
    return LegStatus.ERROR, exc.reason, exc.message, ()  # ProtocolFault, ShuttingDown, …


def warming_phase(progress: Mapping[str, Any] | None) -> str | None:
    """The phase a warming provider last reported (``load``, ``embed``), for its leg's
    report: what it is doing decides the words a user is told (``hostd._hints``).
    ``None`` before it reported one."""
    phase = (progress or {}).get("phase")
    return phase if isinstance(phase, str) and phase and phase != "start" else None


#: The ``provider_partial`` cause of an answer given while its provider still warms.
WARMING_PARTIAL = "warming"


def warming_note(progress: Mapping[str, Any]) -> str:
    """The note of an answer given while its provider still warms (a provider that
    answers from what it has built so far, ``Progress.answer_meanwhile``): partial, as
    far as its last progress says, in hostd's words and the provider's figures
    (``partial: searched 2,257 of 33,002; still warming (embed)``)."""
    phase, done, total = warming_phase(progress), progress.get("done"), progress.get("total")
    still = f"still warming ({phase})" if phase else "still warming"
    if total is None:
        return f"partial: answered from what it has built so far; {still}"
    return f"partial: searched {done or 0:,} of {total:,}; {still}"


def building(progress: Mapping[str, Any]) -> tuple[int, int] | None:
    """``(done, total)`` of a warming provider's last progress, when it says how far its
    build is (``0 <= done < total``): what share of its index an answer searched."""
    done, total = progress.get("done"), progress.get("total")
    if type(done) is not int or type(total) is not int or not 0 <= done < total:
        return None
    return done, total


def progress_figure(progress: Mapping[str, Any]) -> str:
    """``: embed 64/449`` from a provider's last progress, or nothing."""
    phase, done, total = progress.get("phase"), progress.get("done"), progress.get("total")
    if not phase or phase == "start":
        return ""
    if total is not None:
        return f": {phase} {done or 0}/{total}"
    return f": {phase}"
