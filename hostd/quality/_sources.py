"""What a ``context/query`` result says about verification, in the form composition reads.

``hostd eval`` recomposes each fan-out in-process, so it must hand
``compose_for_prompt`` what the daemon's own composition gets from the verify
stage: each accepted frame's verification state (``verification``) and the
source bytes span merging reads (``sources``). The result lists the states, and
for each source two or more accepted frames quote, its line count only (the
daemon sends no byte of a file beyond what the frames quote). That is enough:
span merging joins only frames whose state is ``source_verified`` and whose
content *is* the lines their range addresses (F5, F17), and a merged block is
the union of touching ranges, so every byte it reads is a byte such a frame
quotes. Those lines are put back at their line numbers, every other line left
empty, and the line count kept, so ranges clamp as they do on the file itself
(F17) and the merge is the daemon's, byte for byte.

A shadow record that keeps content keeps the same two things (``Merging``: the
``source_verified`` candidates and each source's line count), so ``shadow replay``
and ``eval --from-shadow`` rebuild the bytes the same way (``recorded_sources``):
one function, ``rebuild``, serves both.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

from hostd.protocol import ContextFrame, FrameId, line_number

from ._record import Recorded

__all__ = [
    "RecordedSources",
    "rebuild",
    "rebuilt_sources",
    "recorded_sources",
    "spans_unmerged",
    "source_verified",
    "verification_of",
]

Verification = dict[FrameId, Mapping[str, Any]]

_RANGE_RE = re.compile(r"L([1-9][0-9]*)(?:-([1-9][0-9]*))?")
# The states span merging accepts a member's bytes under (hostd.compose._spans).
_SOURCE_STATES = ("source_verified",)


def verification_of(result: Mapping[str, Any]) -> Verification:
    """FrameId -> state, from a ``context/query`` result's ``verification`` list."""
    out: Verification = {}
    for entry in result.get("verification") or ():
        out[FrameId.from_wire(entry["frame"])] = dict(entry.get("verification") or {})
    return out


def _lines(data: bytes) -> list[bytes]:
    """``data`` as F17 lines, each keeping its LF (a final unterminated line too)."""
    pieces = data.split(b"\n")
    out = [p + b"\n" for p in pieces[:-1]]
    if pieces[-1]:
        out.append(pieces[-1])
    return out


def _span(rng: str | None, count: int) -> tuple[int, int] | None:
    if rng is None:
        return (1, count)
    m = _RANGE_RE.fullmatch(rng)
    if m is None:
        return None
    start = line_number(m.group(1))
    end = min(line_number(m.group(2)) if m.group(2) else start, count)
    return (start, end) if start <= end else None


def source_verified(state: Mapping[str, Any] | None) -> bool:
    """Whether span merging takes a frame in this state (``hostd.compose._spans``)."""
    return state is not None and (
        state.get("state") in _SOURCE_STATES or state.get("source") in _SOURCE_STATES
    )


def rebuilt_sources(
    result: Mapping[str, Any],
    candidates: Sequence[tuple[str, ContextFrame]],
    verification: Mapping[FrameId, Mapping[str, Any]],
) -> dict[str, bytes] | None:
    """``file`` URI -> the bytes span merging reads, rebuilt from the verified frames.

    None when the result names no source (a daemon before ``sources`` was sent, or
    verification off): composition then merges nothing, as the daemon's did.
    """
    return rebuild(result.get("sources") or {}, candidates, verification)


def rebuild(
    counts: Mapping[str, Any],
    candidates: Sequence[tuple[str, ContextFrame]],
    verification: Mapping[FrameId, Mapping[str, Any]],
) -> dict[str, bytes] | None:
    """``file`` URI -> the bytes span merging reads, from each source's line count
    (``counts``) and the lines the ``source_verified`` candidates quote; None when
    ``counts`` names no source."""
    if not counts:
        return None
    lines = {uri: [b"\n"] * n for uri, n in counts.items() if isinstance(n, int) and n >= 0}
    for pid, frame in candidates:
        if frame.content is None or not source_verified(verification.get(FrameId.of(pid, frame))):
            continue
        for p in frame.provenance:
            uri = p.uri or frame.uri
            if p.type != "file" or uri not in lines:
                continue
            span = _span(p.range, len(lines[uri]))
            quoted = _lines(frame.content.encode("utf-8", "surrogatepass"))
            # The daemon matched these bytes against the file; a frame whose lines do not
            # fit its range was not matched as a whole, so it rebuilds nothing.
            if span is not None and len(quoted) == span[1] - span[0] + 1:
                lines[uri][span[0] - 1 : span[1]] = quoted
    return {uri: b"".join(held) for uri, held in sorted(lines.items())}


#: What a record hands composition: the states it kept (None: none), the source bytes
#: span merging reads (None: merging off) and the merge cap (None: compose's default).
RecordedSources = tuple[Verification | None, dict[str, bytes] | None, float | None]

_UNVERIFIABLE = {"state": "unverifiable"}


def recorded_sources(
    recorded: Recorded, candidates: Sequence[tuple[str, ContextFrame]]
) -> RecordedSources:
    """A record's verification states (its ``unverifiable`` candidates, fenced
    ``verified="no"`` again, and the ``source_verified`` ones, all merging reads), the
    source bytes rebuilt from ``candidates`` (its frames, ``recorded_frames``) and its
    merge cap. A record that kept no ``Merging`` (no content, or recorded before it was
    kept) has no bytes: composed without them, it merges nothing, as replays always did."""
    verification: Verification = {FrameId(*k): _UNVERIFIABLE for k in recorded.unverifiable}
    merging = recorded.merging
    if merging is None:
        return verification or None, None, None
    state = {"state": _SOURCE_STATES[0]}
    verification.update((FrameId(p, i, d), state) for p, i, d in merging.verified)
    sources = rebuild(dict(merging.sources), candidates, verification)
    return verification, sources or {}, merging.max_ratio


def spans_unmerged(recorded: Recorded) -> bool:
    """Whether a replay of ``recorded`` may quote apart what the live composition quoted
    as one: it kept no ``Merging`` (no content) and two of its candidates quote
    overlapping or touching line ranges of one ``file`` source, which span merging
    joins and admitted touching blocks coalesce."""
    if recorded.merging is not None:
        return False
    spans: dict[str, list[tuple[int, int]]] = {}
    for c in recorded.candidates:
        for kind, uri, rng, _ in c.regions:
            m = _RANGE_RE.fullmatch(rng or "") if kind == "file" and uri else None
            if m is not None:
                start = int(m.group(1))
                spans.setdefault(str(uri), []).append((start, int(m.group(2) or start)))
    for ranges in spans.values():
        ranges.sort()
        if any(b[0] <= a[1] + 1 for a, b in zip(ranges, ranges[1:], strict=False)):
            return True
    return False
