"""The leg audit: what the host accepts from one provider's reply, judged in plain sync code.

Every offered frame is parsed and checked on its own (F1–F5, D1, P1–P4,
G1–G2, schema): an invalid frame is dropped with its rule ids and costs only
itself. Then the leg as a whole, on *recomputed* costs: a misstated
``token_cost`` on any frame (B3), an honest total over the share (B1), more
frames than ``max_frames`` (B4), kinds outside the query's ``kinds`` (Q1) or
frames outside ``as_of`` (Q2) quarantine the whole reply: every frame is
dropped with a loud report naming the rule and the figures, never trimmed to
fit (B2). Notices (U2 unknown kind, R3 instruction-shaped content) keep the
frame and are reported.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from itertools import chain, repeat
from operator import add, attrgetter, floordiv, itemgetter
from typing import Any

from pydantic import TypeAdapter, ValidationError
from pydantic_core import SchemaValidator, core_schema

from hostd.protocol import (
    DIGEST_RE,
    FRAME_KINDS,
    ContextFrame,
    ContextQuery,
    FrameId,
    Severity,
    Violation,
    check_as_of,
    check_budget,
    check_frame,
    check_kinds,
    parse_frame,
)

from ._report import Excluded

__all__ = ["QUARANTINE_RULES", "LegAudit", "audit_leg", "looks_like_instructions"]

#: Rules whose breach quarantines the provider's whole reply (B2).
QUARANTINE_RULES = ("B3", "B1", "B4", "Q1", "Q2")

# R3: content is data. These shapes are not rejected (a document may quote
# them); they are flagged so the report and the log show who sent them.
_INSTRUCTION_SHAPES = re.compile(
    r"ignore (all |any )?(the )?(previous|prior|above) (instructions|prompts?)"
    r"|disregard (all |the )?(previous|prior|above)"
    r"|you are now\b"
    r"|^\s*(system|assistant)\s*:"
    r"|<\s*/?\s*(system|evidence|instructions?)\s*>"
    r"|begin (system|new) (prompt|instructions)",
    re.IGNORECASE | re.MULTILINE,
)


# Every shape above contains "<" or one of these words, in some letter case.
_R3_WORD_LIST = ("ignore", "disregard", "you are", "system", "assistant", "begin")
# pydantic-core's Rust regex engine finds any of the words in one vectorised pass: about
# 1 us over a whole 50-frame reply, where seven ``in`` tests over its lower-cased text
# took 33. Its case folding covers every letter ``str.lower`` maps onto one of them.
_R3_WORDS = SchemaValidator(core_schema.str_schema(pattern="(?i)" + "|".join(_R3_WORD_LIST)))


def _has_r3_word(text: str) -> bool:
    """Whether ``text`` has "<" or an R3 word: a cheap test that every R3 match passes."""
    if "<" in text or _R3_WORDS.isinstance_python(text):
        return True
    if text.isascii():
        return False
    # pydantic-core reads the text as UTF-8, which fails whole on a lone surrogate
    # (only a frame built in-process can hold one): such text takes the plain scan.
    try:
        text.encode()
    except UnicodeEncodeError:
        low = text.lower()
        return any(word in low for word in _R3_WORD_LIST)
    return False


def looks_like_instructions(content: str | None) -> bool:
    if not content:
        return False
    # The regex runs only on text that has one of its words: nearly no text does.
    return _has_r3_word(content) and _INSTRUCTION_SHAPES.search(content) is not None


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
    #: ``FrameId`` of each accepted frame, in the same order (computed once, here).
    accepted_ids: tuple[FrameId, ...] = ()
    #: Honest (recomputed) cost of the accepted frames.
    accepted_cost: int = 0

    @property
    def quarantined(self) -> bool:
        return bool(self.quarantine)


_FRAMES: TypeAdapter[list[ContextFrame]] = TypeAdapter(list[ContextFrame])


def _bulk_parse(raw_frames: Sequence[Any]) -> list[ContextFrame] | None:
    """All frames in one validation call (the common, honest case); ``None`` when any
    frame is malformed, so each is then parsed on its own and costs only itself.
    Frames the transport already parsed (``ContextFrame`` instances) are taken as they are."""
    if set(map(type, raw_frames)) <= {ContextFrame}:  # in C: no Python frame per item
        return list(raw_frames)
    try:
        return _FRAMES.validate_python(raw_frames)
    except ValidationError:
        return None


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


# The clean path reads each attribute of all frames in one C-level pass (``map`` over an
# ``attrgetter``): no Python frame, and no bytecode, per frame.
_CONTENT = attrgetter("content")
_KIND = attrgetter("kind")
_SCORE = attrgetter("score")
_TITLE = attrgetter("title")
_LABEL = attrgetter("citation_label")
_DIGEST = attrgetter("content_digest")
_COST = attrgetter("token_cost")
_ID = attrgetter("id")
_PROVENANCE = attrgetter("provenance")
_RELATIONS = attrgetter("relations")
_FIELDS_SET = attrgetter("__pydantic_fields_set__")
#: The members a plainly clean full frame may carry. The others (another
#: representation, timestamps) are ``None`` unless given, so a frame that was given
#: none of them has none (its ``model_fields_set`` says which were given).
_PLAIN_FIELDS = frozenset(ContextFrame.model_fields) - {
    "representation",
    "content_ref",
    "transform",
    "canonical_content_hash",
    "valid_from",
    "valid_to",
    "recorded_at",
}
#: ``n`` well-formed content digests joined by newlines, each line exactly 71 bytes.
_DIGEST_LINES = re.compile(r"(?:sha256:[0-9a-f]{64}\n)*")
_tuple_new = tuple.__new__


def _clean_leg(
    provider_id: str, query: ContextQuery, frames: list[ContextFrame]
) -> LegAudit | None:
    """The audit of a reply whose every frame is a plain, valid full frame.

    The honest reply is nearly every reply, so this answers what ``check_frame``, R3
    and the leg-level rules would find, a column at a time: each test is one C-level
    pass over the reply's frames. It answers only when *nothing* would be reported:
    any frame that is not plainly clean (another representation, timestamps,
    relations, an unknown kind, a bad score, title, label or digest, a misstated
    cost, instruction-shaped content) and any leg-level finding (B1, B4, Q1) or an
    ``as_of`` query returns ``None``, and the general path judges and reports the
    reply. Equivalence with the general path is tested on generated replies.
    """
    n = len(frames)
    if query.as_of is not None or n > query.max_frames:
        return None
    if not all(map(_PLAIN_FIELDS.issuperset, map(_FIELDS_SET, frames))):
        return None  # another representation or a timestamp was given (even as null)
    if any(map(_RELATIONS, frames)):
        return None
    contents = list(map(_CONTENT, frames))
    if None in contents:
        return None
    kinds = set(map(_KIND, frames))
    if not kinds <= FRAME_KINDS or (query.kinds and not kinds.issubset(query.kinds)):
        return None
    scores = list(map(_SCORE, frames))
    # F1: every score in [0, 1]. A NaN anywhere makes the sum NaN (unequal to itself),
    # whatever min() and max() make of it; an infinity fails min() or max().
    if n and not (0.0 <= min(scores) and max(scores) <= 1.0 and sum(scores) == sum(scores)):
        return None
    titles = list(map(_TITLE, frames))
    labels = list(map(_LABEL, frames))
    if not (all(titles) and all(labels)):  # empty, or a label missing (F2, F3)
        return None
    if any(map(str.isspace, titles)) or any(map(str.isspace, labels)):
        return None
    digests = list(map(_DIGEST, frames))
    given = [d for d in digests if d is not None] if None in digests else digests
    if given:
        # D1 for all digests in one match: the lines match only if each digest is one
        # whole line (a digest with a newline in it would make one line too many).
        lines = "\n".join(given) + "\n"
        if len(lines) != 72 * len(given) or _DIGEST_LINES.fullmatch(lines) is None:
            return None
    if any(map(_PROVENANCE, frames)):  # F5: file provenance needs a well-formed digest
        digest_ok = DIGEST_RE.fullmatch
        for prov in chain.from_iterable(map(_PROVENANCE, frames)):
            if prov.type == "file" and (prov.digest is None or digest_ok(prov.digest) is None):
                return None
    # B3 on recomputed costs: ceil(utf8 bytes / 4), the same as canonical_token_cost.
    text = "".join(contents)
    ascii_only = text.isascii()
    sizes = map(len, contents) if ascii_only else map(len, map(str.encode, contents))
    costs = list(map(floordiv, map(add, sizes, repeat(3)), repeat(4)))
    if costs != list(map(_COST, frames)):
        return None
    total = sum(costs)
    if total > query.max_tokens:  # B1
        return None
    # R3: one scan of the whole reply for the words every shape needs; only a reply
    # that has one (words may also meet across two frames) is checked frame by frame.
    if _has_r3_word(text) and any(map(looks_like_instructions, contents)):
        return None
    # FrameId(provider_id, f.id, digest), without a Python-level call per frame.
    fids = list(map(_ID, frames))
    if given is digests:  # every frame has a digest
        keys: Iterable[tuple[str, str, bool, str]] = zip(
            repeat(provider_id), fids, repeat(True), digests
        )
    elif not given:
        keys = zip(repeat(provider_id), fids, repeat(False), repeat(""))
    else:
        pairs = zip(fids, digests, strict=True)
        keys = [(provider_id, f, d is not None, d or "") for f, d in pairs]
    ids = list(map(_tuple_new, repeat(FrameId), keys))
    # FrameId order. One reply has one provider, so when its frame ids are distinct
    # their order is the FrameIds' order, and comparing bare strings is several times
    # cheaper than comparing the tuples.
    order = sorted(range(n), key=(fids if len(set(fids)) == n else ids).__getitem__)
    return LegAudit(
        n,
        tuple(map(frames.__getitem__, order)),
        (),
        (),
        (),
        tuple(map(ids.__getitem__, order)),
        total,
    )


def audit_leg(provider_id: str, query: ContextQuery, raw_frames: Sequence[Any]) -> LegAudit:
    """Judge one reply to ``query`` (the per-provider query actually sent)."""
    bulk = _bulk_parse(raw_frames)
    if bulk is not None:
        clean = _clean_leg(provider_id, query, bulk)
        if clean is not None:
            return clean
    return _audit_each(provider_id, query, raw_frames, bulk)


def _audit_each(
    provider_id: str,
    query: ContextQuery,
    raw_frames: Sequence[Any],
    bulk: list[ContextFrame] | None,
) -> LegAudit:
    """The general path: every frame checked and every finding reported."""
    violations: list[Violation] = []
    parsed: list[tuple[int, ContextFrame]] = []
    valid: list[tuple[int, ContextFrame]] = []
    excluded: list[Excluded] = []
    quarantine: list[Violation] = []

    for i, raw in enumerate(raw_frames if bulk is None else bulk):
        frame: ContextFrame | None
        if bulk is not None:
            frame = raw
            found = check_frame(raw)
        else:
            frame, found = parse_frame(raw)
        if frame is not None and not found:  # the common case: nothing to report
            pair = (i, frame)
            parsed.append(pair)
            if looks_like_instructions(frame.content):
                violations.append(_r3(i))
            valid.append(pair)
            continue
        located = [_at(i, v) for v in found]
        violations.extend(located)
        if frame is None:
            excluded.append(
                (
                    _raw_id(provider_id, raw, i),
                    "invalid_frame",
                    {
                        "rules": sorted({v.rule for v in found}),
                        "violations": [v.to_wire() for v in located],
                    },
                )
            )
            continue
        parsed.append((i, frame))
        quarantine.extend(v for v in located if v.rule == "B3")
        errors = [v for v in located if v.severity is Severity.ERROR and v.rule != "B3"]
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
        tuple(fid for fid, _ in keyed),
        # Accepted frames passed B3/P4, so each declared cost is the honest one.
        sum(f.token_cost for _, f in keyed),
    )
