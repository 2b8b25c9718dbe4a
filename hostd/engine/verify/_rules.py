"""Verification decisions: inline digests, frame states, verify requests and verdicts.

Everything here is synchronous and pure: ``check_inline_digest``,
``decide_frame``, ``build_verify_requests``, ``judge_verdicts`` and
``merge_candidates`` are functions of their arguments (re-reading sources is
``_source``'s). Rules: D1 (inline digest grammar) and D4 (a digest is a claim
about the inline bytes), D2/D3 (identity and reuse), V1–V4 (verify).
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum
from types import MappingProxyType
from typing import Any

from hostd.protocol import (
    ContextFrame,
    FrameId,
    FrameIdentity,
    FrameVerdict,
    Representation,
    VerdictStatus,
    is_sha256_digest,
    sha256_digest,
)

from ._reuse import HeldFrame
from ._source import NOT_RE_READ, SourceCheck, SourceOutcome, Unverifiable

__all__ = [
    "UNTRUSTED_CHOICES",
    "Decision",
    "Exclusion",
    "InlineCheck",
    "InlineMemo",
    "InlineOutcome",
    "VerdictJudgement",
    "VerificationState",
    "VerifyPlanEntry",
    "build_verify_requests",
    "check_inline_digest",
    "decide_frame",
    "judge_verdicts",
    "quick_inline_check",
    "settled_state",
    "sourceless_states",
    "unrooted_states",
]


class VerificationState(StrEnum):
    """The state every frame this stage lets through carries into the audit."""

    #: Its inline content hashes to its ``content_digest`` (D1, D4).
    CONTENT_CHECKED = "content_checked"
    #: Every ``file`` provenance digest matched the re-read source (F5, F17).
    SOURCE_VERIFIED = "source_verified"
    #: Reused from an earlier turn on a ``valid`` verdict (V3).
    PROVIDER_VERIFIED = "provider_verified"
    #: Nothing could be checked; ``reason`` says why. Never a mismatch, never verified.
    UNVERIFIABLE = "unverifiable"


class Exclusion(StrEnum):
    """Why this stage dropped a frame (the audit's ``reason``)."""

    DIGEST_MISMATCH = "digest_mismatch"
    SOURCE_MISMATCH = "source_mismatch"
    STALE = "stale"
    GONE = "gone"
    #: A held frame whose verdict was ``unknown`` or missing (V2, V3): not reused.
    VERIFY_UNKNOWN = "verify_unknown"
    #: ``file`` provenance outside the provider's trusted roots (``untrusted = "exclude"``).
    UNTRUSTED_SOURCE = "untrusted_source"


#: What to do with a frame whose ``file`` provenance lies outside every trusted root.
UNTRUSTED_CHOICES = ("exclude", "include")


# --- inline digest (D1, D4) ---------------------------------------------------------


class InlineOutcome(StrEnum):
    CHECKED = "checked"
    MISMATCH = "mismatch"
    ABSENT = "absent"
    NO_CONTENT = "no_content"


@dataclass(slots=True, frozen=True)
class InlineCheck:
    outcome: InlineOutcome
    #: The frame's ``content_digest``, as it was sent.
    declared: str | None = None
    #: The sha256 of its content's UTF-8 bytes, as hostd computed it.
    computed: str | None = None


def check_inline_digest(frame: ContextFrame) -> InlineCheck:
    """Hash the exact UTF-8 content bytes and compare with ``content_digest`` (D4)."""
    if frame.content_digest is None:
        if frame.content is None or (
            frame.effective_representation == Representation.REFERENCE.value
        ):
            return InlineCheck(InlineOutcome.NO_CONTENT)
        return InlineCheck(InlineOutcome.ABSENT)
    if frame.content is None:
        return InlineCheck(InlineOutcome.NO_CONTENT, declared=frame.content_digest)
    computed = sha256_digest(frame.content.encode("utf-8"))
    if computed != frame.content_digest:
        return InlineCheck(InlineOutcome.MISMATCH, frame.content_digest, computed)
    return InlineCheck(InlineOutcome.CHECKED, frame.content_digest, computed)


_CHECKED = InlineCheck(InlineOutcome.CHECKED)
_ABSENT = InlineCheck(InlineOutcome.ABSENT)
_NO_CONTENT = InlineCheck(InlineOutcome.NO_CONTENT)
_REFERENCE = Representation.REFERENCE.value
_sha256 = hashlib.sha256


def quick_inline_check(frame: ContextFrame) -> InlineCheck:
    """``check_inline_digest`` for the stage's per-frame pass: the same outcome, and the
    same value for a mismatch (the audit names both digests) and for a digest without
    content, but a matching digest gives one shared ``checked`` value without the
    digests (equal to the frame's own: nothing reads them), so the pass allocates
    nothing per verified frame."""
    digest = frame.content_digest
    content = frame.content
    if digest is None:
        if content is None or frame.representation == _REFERENCE:
            return _NO_CONTENT
        return _ABSENT
    if content is None:
        return InlineCheck(InlineOutcome.NO_CONTENT, declared=digest)
    computed = "sha256:" + _sha256(content.encode("utf-8")).hexdigest()
    if computed != digest:
        return InlineCheck(InlineOutcome.MISMATCH, digest, computed)
    return _CHECKED


class InlineMemo:
    """``quick_inline_check`` that remembers the contents it found honest, by digest.

    A frame carrying a remembered digest and the very same content (equal text is
    equal UTF-8 bytes, and those hashed to that digest) is ``checked`` without hashing
    it again: providers offer the same frames turn after turn. Anything else is hashed,
    and only a matching digest is remembered (a mismatch never is). Bounded: at most
    ``max_entries`` contents (one more per pass running beside another) of at most
    ``max_chars`` characters each, 8 MB of ASCII text by default; when full it starts
    over. Safe to share between the stage's worker threads: each step is one dict
    operation, and a lost race costs a hash, never a wrong answer."""

    __slots__ = ("_seen", "max_chars", "max_entries")

    def __init__(self, *, max_entries: int = 4096, max_chars: int = 2048) -> None:
        self._seen: dict[str, str] = {}
        self.max_entries = max_entries
        self.max_chars = max_chars

    def __len__(self) -> int:
        return len(self._seen)

    def check(self, frame: ContextFrame) -> InlineCheck:
        digest = frame.content_digest
        content = frame.content
        if digest is not None and content is not None and self._seen.get(digest) == content:
            return _CHECKED
        got = quick_inline_check(frame)
        if (
            got is _CHECKED
            and digest is not None
            and content is not None
            and len(content) <= self.max_chars
        ):
            seen = self._seen
            if len(seen) >= self.max_entries:
                seen.clear()
            seen[digest] = content
        return got


@dataclass(slots=True, frozen=True)
class Decision:
    """What happens to one frame: excluded with a reason, or let through with a state."""

    excluded: Exclusion | None
    detail: Mapping[str, Any]
    state: Mapping[str, Any] | None
    #: A ``valid`` verdict for a frame whose source re-read mismatched.
    rubber_stamp: bool = False


def decide_frame(
    inline: InlineCheck, source: SourceCheck | None, *, reused: bool, untrusted: str = "exclude"
) -> Decision:
    """Combine the inline digest check, the source re-read and reuse into one decision.

    A ``file`` provenance that resolves outside every trusted root (the provider has
    roots, its own or the host's; without any, sources are not re-read at all)
    cannot be checked by the host,
    whatever the provider says (a ``valid`` verdict included): with ``untrusted``
    ``"exclude"`` the frame is dropped (``untrusted_source``), with ``"include"`` it
    stays, ``{"state": "unverifiable", "reason": "outside_trusted_roots"}``, for the
    composer to mark.

    Mismatches exclude (tampering and stale indexes look like this). Otherwise
    the state is the strongest that holds: ``provider_verified`` for a reused
    frame, then ``source_verified``, then ``unverifiable`` when a source was
    tried and could not be checked, then ``content_checked``, then
    ``unverifiable`` for want of anything to check.
    """
    if inline.outcome == InlineOutcome.MISMATCH:
        # ``expected``: the digest the frame must carry, computed from its content;
        # ``actual``: the one it carries (as for a source mismatch).
        return Decision(
            Exclusion.DIGEST_MISMATCH,
            {"expected": inline.computed, "actual": inline.declared, "reused": reused},
            None,
        )
    if source is not None and source.outcome == SourceOutcome.MISMATCH:
        return Decision(
            Exclusion.SOURCE_MISMATCH,
            {**source.detail, "reused": reused},
            None,
            rubber_stamp=reused,
        )
    checked = inline.outcome == InlineOutcome.CHECKED
    state: dict[str, Any]
    if source is not None and source.reason == Unverifiable.UNTRUSTED_PATH.value:
        if untrusted != "include":
            detail = {**source.detail, "reused": reused}
            return Decision(Exclusion.UNTRUSTED_SOURCE, detail, None)
        reason = Unverifiable.OUTSIDE_TRUSTED_ROOTS.value
        return Decision(None, {}, {"state": VerificationState.UNVERIFIABLE.value, "reason": reason})
    if reused:
        state = {"state": VerificationState.PROVIDER_VERIFIED.value}
        if source is not None:
            state["source"] = source.outcome.value
            if source.reason is not None:
                state["source_reason"] = source.reason
    elif source is not None and source.outcome == SourceOutcome.VERIFIED:
        state = {"state": VerificationState.SOURCE_VERIFIED.value}
    elif source is not None:
        state = {"state": VerificationState.UNVERIFIABLE.value, "reason": source.reason}
        if checked:
            state["content_checked"] = True
    elif checked:
        state = {"state": VerificationState.CONTENT_CHECKED.value}
    else:
        reason = (
            Unverifiable.NO_INLINE_CONTENT
            if inline.outcome == InlineOutcome.NO_CONTENT
            else Unverifiable.NO_CONTENT_DIGEST
        )
        state = {"state": VerificationState.UNVERIFIABLE.value, "reason": reason.value}
    return Decision(None, {}, state)


def _settled() -> dict[tuple[InlineOutcome, SourceOutcome | None, bool], Mapping[str, Any]]:
    """``decide_frame``'s state for every input no per-frame detail enters: an inline
    check other than a mismatch, and no source check or a verified one with no reason.
    Computed by ``decide_frame`` itself, once, each state one read-only value."""
    out: dict[tuple[InlineOutcome, SourceOutcome | None, bool], Mapping[str, Any]] = {}
    for outcome in (InlineOutcome.CHECKED, InlineOutcome.ABSENT, InlineOutcome.NO_CONTENT):
        for source in (None, SourceCheck(SourceOutcome.VERIFIED)):
            for reused in (False, True):
                state = decide_frame(InlineCheck(outcome), source, reused=reused).state
                assert state is not None  # nothing here excludes
                key = (outcome, None if source is None else source.outcome, reused)
                out[key] = MappingProxyType(dict(state))
    return out


_SETTLED = _settled()
_VERIFIED = SourceOutcome.VERIFIED
_SOURCELESS = {
    reused: {o: st for (o, src, r), st in _SETTLED.items() if src is None and r == reused}
    for reused in (False, True)
}


_UNROOTED = {
    reused: {
        outcome: MappingProxyType(dict(state))
        for outcome in (InlineOutcome.CHECKED, InlineOutcome.ABSENT, InlineOutcome.NO_CONTENT)
        if (state := decide_frame(InlineCheck(outcome), NOT_RE_READ, reused=reused).state)
    }
    for reused in (False, True)
}


def unrooted_states(reused: bool) -> Mapping[InlineOutcome, Mapping[str, Any]]:
    """``decide_frame``'s state for a frame citing a file its provider has no trusted
    root to re-read it under (``NOT_RE_READ``), by its inline outcome, shared and
    read-only (a mismatch is absent: ``decide_frame`` decides it)."""
    return _UNROOTED[reused]


def sourceless_states(reused: bool) -> Mapping[InlineOutcome, Mapping[str, Any]]:
    """``settled_state`` of a frame with no source check, by its inline outcome (a
    mismatch is absent: ``decide_frame`` decides it): one lookup per frame."""
    return _SOURCELESS[reused]


def settled_state(
    inline: InlineCheck, source: SourceCheck | None, reused: bool
) -> Mapping[str, Any] | None:
    """The state ``decide_frame`` gives these checks, shared and read-only, when it takes
    nothing from the frame's own detail (its common cases: ``content_checked``,
    ``source_verified``, ``provider_verified``, ``unverifiable`` for want of a digest
    or content); ``None`` otherwise (a mismatch, an unverifiable or untrusted source):
    then ``decide_frame`` decides. Whatever ``untrusted`` is: it only reads an
    ``untrusted_path`` source."""
    if source is None:
        return _SETTLED.get((inline.outcome, None, reused))
    if source.outcome is _VERIFIED and source.reason is None:
        return _SETTLED.get((inline.outcome, _VERIFIED, reused))
    return None


# --- verify requests (V1, D3) -------------------------------------------------------


@dataclass(slots=True, frozen=True)
class VerifyPlanEntry:
    """One provider's share of a session's held frames."""

    provider_id: str
    #: Held frames to revalidate: digest-carrying only (V1), sorted by FrameId.
    ask: tuple[HeldFrame, ...]
    #: Held frames that cannot be reused unchecked (no digest, D3; or no verify capability).
    skipped: tuple[HeldFrame, ...]

    def identities(self) -> list[FrameIdentity]:
        """The wire request: identities only, never bodies (V1)."""
        return [h.fid.identity() for h in self.ask]


def build_verify_requests(
    held: Iterable[HeldFrame],
    *,
    can_verify: Callable[[str], bool] | Mapping[str, bool],
    providers: Iterable[str] | None = None,
) -> dict[str, VerifyPlanEntry]:
    """Group held frames per provider into verify requests.

    Only providers in ``providers`` (all when ``None``) and declaring
    ``capabilities.verify`` are asked; only digest-carrying identities are sent
    (V1); a digest-less frame is never reused unchecked (D3), it is re-queried.
    Duplicate FrameIds are asked once.
    """
    check = can_verify.get if isinstance(can_verify, Mapping) else can_verify
    wanted = None if providers is None else set(providers)
    ask: dict[str, dict[FrameId, HeldFrame]] = {}
    skipped: dict[str, dict[FrameId, HeldFrame]] = {}
    for h in held:
        if wanted is not None and h.provider_id not in wanted:
            continue
        if h.fid.content_digest is None or not check(h.provider_id):
            skipped.setdefault(h.provider_id, {}).setdefault(h.fid, h)
        else:
            ask.setdefault(h.provider_id, {}).setdefault(h.fid, h)
    out: dict[str, VerifyPlanEntry] = {}
    for pid in sorted(set(ask) | set(skipped)):
        a = ask.get(pid, {})
        s = skipped.get(pid, {})
        out[pid] = VerifyPlanEntry(
            pid, tuple(a[k] for k in sorted(a)), tuple(s[k] for k in sorted(s))
        )
    return out


# --- verdicts (V2, V3, V4) ----------------------------------------------------------


@dataclass(slots=True, frozen=True)
class VerdictJudgement:
    fid: FrameId
    status: VerdictStatus
    replacement_digest: str | None = None
    #: Why a verdict was read as ``unknown`` when the provider did not say so.
    note: str | None = None


def judge_verdicts(
    requested: Sequence[FrameId], verdicts: Sequence[FrameVerdict] | None
) -> tuple[dict[FrameId, VerdictJudgement], dict[str, int]]:
    """Match verdicts to the identities asked, by full identity, never by position.

    ``verdicts`` is ``None`` when the call failed: every identity is ``unknown``.
    A requested identity with no verdict is ``unknown`` (V2); an unrecognised
    status is ``unknown`` (V3); two different verdicts for one identity, or a
    ``valid`` carrying a different ``replacement_digest``, are contradictions and
    read as ``unknown`` — reuse needs an unambiguous positive answer (V3).
    Verdicts for identities never asked are ignored and counted. Returns the
    judgements and anomaly counters (``missing``, ``unrequested``,
    ``conflicting``, ``contradictory``, ``malformed_replacement``, ``failed``).
    """
    anomalies = {
        "missing": 0,
        "unrequested": 0,
        "conflicting": 0,
        "contradictory": 0,
        "malformed_replacement": 0,
        "failed": 0,
    }
    asked = set(requested)
    if verdicts is None:
        anomalies["failed"] = len(asked)
        return (
            {f: VerdictJudgement(f, VerdictStatus.UNKNOWN, note="verify_failed") for f in asked},
            anomalies,
        )
    seen: dict[FrameId, VerdictJudgement] = {}
    conflicted: set[FrameId] = set()
    for v in verdicts:
        fid = FrameId.from_wire(v.frame)
        if fid not in asked:
            anomalies["unrequested"] += 1
            continue
        status = v.verdict
        replacement = v.replacement_digest
        note = None
        if status == VerdictStatus.UNKNOWN and v.status != VerdictStatus.UNKNOWN.value:
            note = "unrecognised_status"
        if replacement is not None and not is_sha256_digest(replacement):
            anomalies["malformed_replacement"] += 1
            replacement = None
        if (
            status == VerdictStatus.VALID
            and replacement is not None
            and replacement != fid.content_digest
        ):
            anomalies["contradictory"] += 1
            status, note = VerdictStatus.UNKNOWN, "valid_with_other_digest"
        j = VerdictJudgement(fid, status, replacement, note)
        prev = seen.get(fid)
        if prev is not None and (prev.status, prev.replacement_digest) != (
            j.status,
            j.replacement_digest,
        ):
            conflicted.add(fid)
        seen.setdefault(fid, j)
    for fid in conflicted:
        anomalies["conflicting"] += 1
        seen[fid] = VerdictJudgement(fid, VerdictStatus.UNKNOWN, note="conflicting_verdicts")
    for fid in asked - seen.keys():
        anomalies["missing"] += 1
        seen[fid] = VerdictJudgement(fid, VerdictStatus.UNKNOWN, note="missing_verdict")
    return seen, anomalies
