"""The leg audit: what the host accepts from one provider's reply, judged in plain sync code.

Every offered frame is parsed and checked on its own (F1–F5, D1, P1–P4,
G1–G2, schema): an invalid frame is dropped with its rule ids and costs only
itself. Then the leg as a whole, on *recomputed* costs: a misstated
``token_cost`` on any frame (B3, judged on a frame the schema refused too, where
its ``content`` and ``token_cost`` are of the right types), an honest total over
the share (B1), more frames than ``max_frames`` (B4), kinds outside the query's
``kinds`` (Q1) or frames outside ``as_of`` (Q2) quarantine the whole reply: every
frame is dropped with a loud report naming the rule and the figures, never trimmed
to fit (B2). A frame of a kind the provider did not declare in its capabilities
(``query.kinds``, when not empty) is invalid under Q1 whatever the query
asked, and costs only itself. Notices (U2 unknown kind, R3 instruction-shaped
content) keep the frame and are reported.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Sequence
from dataclasses import dataclass
from operator import attrgetter, itemgetter
from typing import Any

from hostd.protocol import (
    AcceptedReply,
    AcceptMemo,
    ContextFrame,
    ContextQuery,
    FrameId,
    Severity,
    Violation,
    accept_reply,
    check_as_of,
    check_budget,
    check_kinds,
    parse_frames,
)

from ._report import Excluded

__all__ = ["QUARANTINE_RULES", "LegAudit", "audit_leg", "looks_like_instructions"]

#: Rules whose breach quarantines the provider's whole reply (B2).
QUARANTINE_RULES = ("B3", "B1", "B4", "Q1", "Q2")

# R3: content is data. These shapes are not rejected (a document may quote
# them); they are flagged so the report and the log show who sent them. This is
# the rule; ``looks_like_instructions`` decides it with ``_LOWER_SHAPES``.
_INSTRUCTION_SHAPES = re.compile(
    r"ignore (all |any )?(the )?(previous|prior|above) (instructions|prompts?)"
    r"|disregard (all |the )?(previous|prior|above)"
    r"|you are now\b"
    r"|^\s*(system|assistant)\s*:"
    r"|<\s*/?\s*(system|evidence|instructions?)\s*>"
    r"|begin (system|new) (prompt|instructions)",
    re.IGNORECASE | re.MULTILINE,
)

# The same shapes, case-sensitive, for content lowered first and led by a "\n": the
# line-start branch then begins with "\n" instead of the "^" anchor, so every branch
# begins with a literal and the scan skips every position whose character cannot
# start one (several times faster than the case-folding search). Exactly the same
# decision because for every character but _UNSAFE_CASES, ``str.lower()`` gives one
# character, matches a literal of the rule under IGNORECASE iff it lowers to it, and
# keeps whether it is whitespace (\s) or a word character (\b); a test checks that
# over all of Unicode.
_LOWER_SHAPES = re.compile(
    r"ignore (all |any )?(the )?(previous|prior|above) (instructions|prompts?)"
    r"|disregard (all |the )?(previous|prior|above)"
    r"|you are now\b"
    r"|\n\s*(system|assistant)\s*:"
    r"|<\s*/?\s*(system|evidence|instructions?)\s*>"
    r"|begin (system|new) (prompt|instructions)"
)
# Characters the regex case-folds otherwise than ``str.lower``: dotted and dotless
# capital/small I (U+0130 lowers to two characters) and the long s.
_UNSAFE_CASES = ("\u0130", "\u0131", "\u017f")


def looks_like_instructions(content: str | None) -> bool:
    """R3: whether ``content`` has an instruction shape (any letter case): one
    search of the lowered content; content holding a character ``str.lower`` folds
    otherwise than the regex does takes the case-folding search instead."""
    if content is None:
        return False
    if not content.isascii() and any(ch in content for ch in _UNSAFE_CASES):
        return _INSTRUCTION_SHAPES.search(content) is not None
    low = content.lower()
    # A literal every branch of _LOWER_SHAPES holds (the line-start and tag branches each
    # name one of their words): lowered content holding none of them cannot match, and
    # most content holds none, so the regex scan is skipped for it. Spelled out, one C
    # search each with no generator step between (most frequent first).
    if not (
        "system" in low
        or "instruction" in low
        or "ignore " in low
        or "disregard " in low
        or "you are now" in low
        or "begin " in low
        or "assistant" in low
        or "evidence" in low
    ):
        return False
    return _LOWER_SHAPES.search("\n" + low) is not None


@dataclass(slots=True, frozen=True)
class LegAudit:
    """The outcome of auditing one reply."""

    offered: int
    accepted: tuple[ContextFrame, ...]
    excluded: tuple[Excluded, ...]
    #: Every finding, frame-level ones located as ``frames[i].<field>``.
    violations: tuple[Violation, ...]
    #: The leg-level breaches that quarantined the reply; empty when it was not.
    quarantine: tuple[Violation, ...]
    #: Honest (recomputed) cost of the accepted frames.
    accepted_cost: int = 0
    #: The FrameId of each accepted frame, in the same order: built once here, for the
    #: verify stage and the report.
    accepted_ids: tuple[FrameId, ...] = ()

    @property
    def quarantined(self) -> bool:
        return bool(self.quarantine)


def _raw_id(provider_id: str, raw: Any, index: int) -> FrameId:
    """A FrameId for a frame too malformed to parse, so its exclusion is still audited."""
    fid = raw.get("id") if isinstance(raw, dict) else None
    digest = raw.get("content_digest") if isinstance(raw, dict) else None
    return FrameId(
        provider_id,
        fid if isinstance(fid, str) and fid else f"#{index}",
        digest if isinstance(digest, str) else None,
    )


def _at(index: int, v: Violation) -> Violation:
    return Violation(v.rule, f"frames[{index}].{v.field}", v.message, v.severity)


def _r3(index: int) -> Violation:
    return Violation(
        "R3",
        f"frames[{index}].content",
        "instruction-shaped content: kept as quoted, untrusted data",
        Severity.NOTICE,
    )


#: A kind named as it is: a short token, as the protocol's kinds are (``fact``, ``doc``).
#: Any other is the provider's free text, told by its size.
_KIND_TOKEN = re.compile(r"[a-z][a-z0-9_.-]{0,31}")
#: How many declared kinds a finding names at most.
_KINDS_SHOWN = 8


def _kind(kind: str, article: str = "") -> str:
    if _KIND_TOKEN.fullmatch(kind):
        return repr(kind)
    return f"{article}of {len(kind)} chars (not quoted)"


def _undeclared(kind: str, declared: frozenset[str]) -> Violation:
    """Q1 against the declared kinds, located by ``_at`` like every frame finding: the
    frame's kind and the declared ones, each a short token or told by its size, a few."""
    names = sorted(declared)
    shown = ", ".join(_kind(name, "a kind ") for name in names[:_KINDS_SHOWN])
    more = f" (+{len(names) - _KINDS_SHOWN} more)" if len(names) > _KINDS_SHOWN else ""
    return Violation(
        "Q1",
        "kind",
        f"kind {_kind(kind)} not among the kinds the provider declared "
        f"(capabilities.query.kinds: {shown}{more})",
    )


def _audit_clean(
    query: ContextQuery, declared: frozenset[str], clean: AcceptedReply
) -> LegAudit | None:
    """``audit_leg`` of a reply accepted whole (``accept_reply``: every frame passed every
    frame rule, and B1/B4): what is left to judge is the declared kinds (Q1), the
    other leg-level rules and R3. ``None`` when one of those finds something: the
    general path then names it with the frame's index, exactly as it always does."""
    frames = clean.frames
    if declared and not declared.issuperset(map(_KIND, frames)):
        return None
    if query.kinds and check_kinds(query, frames):  # no kinds asked: none to check (Q1)
        return None
    if query.as_of is not None and check_as_of(query, frames):
        return None
    violations = tuple(_r3(i) for i, c in enumerate(map(_CONTENT, frames)) if _R3.flags(c))
    keyed = sorted(zip(clean.ids, frames, strict=True), key=itemgetter(0))
    return LegAudit(
        len(frames),
        tuple(map(itemgetter(1), keyed)),
        (),
        violations,
        (),
        clean.tokens,
        tuple(map(itemgetter(0), keyed)),
    )


class R3Memo:
    """``looks_like_instructions`` of the contents it was asked about, by their text, so
    a content offered again (providers offer the same frames turn after turn, and the
    accept memo hands out the same frame, the same string, whose hash Python keeps) is
    looked up instead of lowered and scanned again: the answer is a function of the
    text alone. Bounded: at most ``max_entries`` contents of at most ``max_chars``
    characters each; when full it starts over. One dict operation per step."""

    __slots__ = ("_seen", "max_chars", "max_entries")

    def __init__(self, *, max_entries: int = 1024, max_chars: int = 4096) -> None:
        self._seen: dict[str, bool] = {}
        self.max_entries = max_entries
        self.max_chars = max_chars

    def __len__(self) -> int:
        return len(self._seen)

    def flags(self, content: str | None) -> bool:
        """``looks_like_instructions(content)``, remembered."""
        if content is None:
            return False
        seen = self._seen
        flagged = seen.get(content)
        if flagged is None:
            flagged = looks_like_instructions(content)
            if len(content) <= self.max_chars:
                if len(seen) >= self.max_entries:
                    seen.clear()
                seen[content] = flagged
        return flagged


_KIND = attrgetter("kind")
_ACCEPTED = AcceptMemo()
_CONTENT = attrgetter("content")
_R3 = R3Memo()


def audit_leg(
    provider_id: str,
    query: ContextQuery,
    raw_frames: Sequence[Any],
    *,
    declared_kinds: Collection[str] = (),
) -> LegAudit:
    """Judge one reply to ``query`` (the per-provider query actually sent), frame by
    frame: the reply's frames are validated in one call, each on its own only when
    one breaks the schema (a frame the transport already parsed is checked as it
    is), so a malformed one costs only itself. ``declared_kinds``
    is the provider's ``capabilities.query.kinds`` (empty: any kind, Q1)."""
    declared = frozenset(declared_kinds)
    clean = accept_reply(raw_frames, query, provider_id, _ACCEPTED)
    if clean is not None:
        audit = _audit_clean(query, declared, clean)
        if audit is not None:
            return audit
    violations: list[Violation] = []
    parsed: list[tuple[int, ContextFrame]] = []
    valid: list[tuple[int, ContextFrame]] = []
    excluded: list[Excluded] = []
    quarantine: list[Violation] = []

    for i, (frame, found) in enumerate(parse_frames(raw_frames)):
        if declared and frame is not None and frame.kind not in declared:
            found = [*found, _undeclared(frame.kind, declared)]
        if frame is not None and not found:  # the common case: nothing to report
            pair = (i, frame)
            parsed.append(pair)
            if looks_like_instructions(frame.content):
                violations.append(_r3(i))
            valid.append(pair)
            continue
        located = [_at(i, v) for v in found]
        violations.extend(located)
        # A misstated cost quarantines the reply whatever else its frame breaks: B3 is
        # judged on a frame the schema refused too (``parse_frame``), as on one that parsed.
        quarantine.extend(v for v in located if v.rule == "B3")
        errors = [v for v in located if v.severity is Severity.ERROR and v.rule != "B3"]
        if frame is None:
            excluded.append(
                (
                    _raw_id(provider_id, raw_frames[i], i),
                    "invalid_frame",
                    {
                        "rules": sorted({v.rule for v in errors}),
                        "violations": [v.to_wire() for v in errors],
                    },
                )
            )
            continue
        parsed.append((i, frame))
        if errors:
            excluded.append(
                (
                    FrameId.of(provider_id, frame),
                    "invalid_frame",
                    {
                        "rules": sorted({v.rule for v in errors}),
                        "violations": [v.to_wire() for v in errors],
                    },
                )
            )
            continue
        if looks_like_instructions(frame.content):
            violations.append(_r3(i))
        valid.append((i, frame))

    # Leg-level rules on every frame that parsed: the provider offered them all.
    frames = [f for _, f in parsed]
    leg_level = [*check_budget(query, frames), *check_kinds(query, frames)]
    leg_level.extend(check_as_of(query, frames))
    # check_kinds/check_as_of index into ``frames``; map back to the reply's indices.
    index_of = [i for i, _ in parsed]
    for v in leg_level:
        m = re.match(r"frames\[(\d+)\](.*)", v.field)
        if m:
            v = Violation(v.rule, f"frames[{index_of[int(m.group(1))]}]{m.group(2)}", v.message)
        violations.append(v)
        quarantine.append(v)

    if quarantine:
        rules = sorted({v.rule for v in quarantine}, key=QUARANTINE_RULES.index)
        detail = {
            "rules": rules,
            "violations": [v.to_wire() for v in quarantine],
        }
        dropped = list(excluded)  # invalid frames keep their own reason
        invalid = {e[0] for e in excluded}
        for _, f in parsed:
            fid = FrameId.of(provider_id, f)
            if fid not in invalid:
                dropped.append((fid, "quarantined", detail))
        dropped.sort(key=itemgetter(0))  # a FrameId is its own sort key
        return LegAudit(len(raw_frames), (), tuple(dropped), tuple(violations), tuple(quarantine))

    # FrameId order; each FrameId is built once and travels with its frame.
    keyed = sorted(
        ((FrameId(provider_id, f.id, f.content_digest), f) for _, f in valid),
        key=itemgetter(0),
    )
    excluded.sort(key=itemgetter(0))
    return LegAudit(
        len(raw_frames),
        tuple(f for _, f in keyed),
        tuple(excluded),
        tuple(violations),
        (),
        # Accepted frames passed B3/P4, so each declared cost is the honest one.
        sum(f.token_cost for _, f in keyed),
        tuple(fid for fid, _ in keyed),
    )
