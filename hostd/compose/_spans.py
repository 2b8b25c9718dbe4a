"""Span-aware dedup: overlapping or contained regions of one file quoted once.

Exact dedup (``_dedup``) joins the same region served twice; two providers that
chunk a file differently (``L1-6`` and ``L4-9``) still quote lines 4-6 twice.
Here, after it, candidates whose ``file`` provenance addresses overlapping line
ranges of the same ``uri`` (F17 ranges) become one candidate covering their
union, its content the union's lines from the source bytes the engine's verify
stage re-read under the trusted roots (handed in as ``sources``; compose reads
no file) and its digest recomputed (F5, F17).

Ranges that only *touch* (``L1-4`` and ``L5-8``) are not merged here: a union
would stand at its best member's rank and carry the weaker neighbour into the
prompt with it, crowding out other evidence. Each is ranked on its own; what
``spans`` records for them (``SpanMerge.spans``) lets ``_coalesce`` render two
that the packer admitted, each on its own merit, as one block.

A member takes part only when its bytes are known good: its verification state
says the source was re-read and matched (``source_verified``), the source bytes
are at hand, and its content *is* the lines its range addresses. The merged
candidate keeps the identity, label and score of its best member (highest
score, then canonical FrameId) and stands in each provider's list at that
provider's best member's score (F10: no score arithmetic across providers).
Every other member leaves the ranking with reason ``merged_into`` (it widened
the union) or ``contained_in`` (its range lies within another member's), naming
the survivor and the merged region. A member whose bytes cannot be trusted is
never merged: dropped as ``contained_in`` when its range lies wholly within a
verified candidate's, else kept apart, its entry saying why.

The merged candidate's citation label tells the truth about what it quotes: a
label that ends with the survivor's own range in the ``L<a>[-<b>]`` form (as the
bundled providers' ``path L12-40`` labels do) has that range replaced by the merged
region's; any other label gets the region appended (``label (L1-40)``). The
fence's ``id`` stays the survivor's, so feedback by FrameId is unchanged.

A merged block never holds more than ``max_ratio`` times the bytes of its
largest member: members are taken in range order and a block that would grow
past that is closed, the next one starting with the member that did not fit
(after the last line of the one before, so the two touch and never overlap).
So merging cannot pull a whole file into the prompt. Everything is sorted on
explicit keys ending in the canonical FrameId: a pure function of the input set.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from hostd.protocol import (
    ContextFrame,
    FrameId,
    Provenance,
    canonical_token_cost,
    sha256_digest,
)

from ._candidates import CandidateSet, SortKey, key_to_wire
from ._lines import Lines, Span, lines_of, merged_label, merged_title, range_text

__all__ = ["DEFAULT_MERGE_MAX_RATIO", "SpanMerge", "apply", "check_ratio", "merge_spans"]

#: A merged block holds at most this many times the bytes of its largest member.
DEFAULT_MERGE_MAX_RATIO = 2.0

_SOURCE_STATES = ("source_verified",)

Verification = Mapping[FrameId, Mapping[str, Any]]


@dataclass(slots=True, frozen=True)
class _Region:
    """Candidate ``index``'s lines ``start``-``end`` (1-based, inclusive) of ``uri``;
    ``lines`` is the source as re-read (the end clamped to it, F17), None when the
    verify stage handed no bytes for ``uri``."""

    index: int
    uri: str
    start: int
    end: int
    key: SortKey
    lines: Lines | None


@dataclass(slots=True)
class SpanMerge:
    """The dedup survivors after span merging.

    ``keep``: indices into the candidates given that stay (in their order);
    ``frames``: a survivor's merged frame by that index; ``support``: the
    providers behind a merged survivor, each at its best member's score;
    ``absorbed``: ``(member, survivor, reason, region)``, indices into the
    candidates given; ``notes``: extra audit members by candidate index (a
    survivor's ``merged``, a member kept apart's ``span``); ``spans``: every
    candidate of a source the verify stage re-read whose bytes are known good,
    merged or not, by index (what coalescing reads after packing).
    """

    keep: list[int]
    frames: dict[int, ContextFrame] = field(default_factory=dict)
    support: dict[int, tuple[tuple[str, float], ...]] = field(default_factory=dict)
    absorbed: list[tuple[int, int, str, dict[str, str]]] = field(default_factory=list)
    notes: dict[int, dict[str, Any]] = field(default_factory=dict)
    spans: dict[int, Span] = field(default_factory=dict)


def _runs(regions: Sequence[_Region]) -> list[list[_Region]]:
    """Maximal runs of overlapping regions (given sorted by start); regions that only
    touch fall in separate runs (they are ranked apart and may be coalesced later)."""
    runs: list[list[_Region]] = []
    reach = 0
    for r in regions:
        if runs and r.start <= reach:
            runs[-1].append(r)
            reach = max(reach, r.end)
        else:
            runs.append([r])
            reach = r.end
    return runs


def _distrust(verification: Verification | None, r: _Region, content: str) -> str | None:
    """Why the bytes of ``r``'s frame cannot be merged, or None when they can."""
    if r.lines is None:
        return "source_unavailable"  # not re-read: no trusted root, too large, unreadable
    return _distrust_lines(verification, r.key, r.lines, r.start, r.end, content)


def _distrust_lines(
    verification: Verification | None,
    key: SortKey,
    lines: Lines,
    start: int,
    end: int,
    content: str,
) -> str | None:
    """``_distrust`` of a region given as its parts (a run of one makes no ``_Region``)."""
    state = verification.get(key) if verification else None  # type: ignore[call-overload]  # a FrameId equals its key
    if state is None or not (
        state.get("state") in _SOURCE_STATES or state.get("source") in _SOURCE_STATES
    ):
        return "not_source_verified"
    if content.encode("utf-8", "surrogatepass") != lines.slice(start, end):
        return "content_differs"  # not the lines its range addresses: a derivation
    return None


def check_ratio(max_ratio: float) -> None:
    if isinstance(max_ratio, bool) or not isinstance(max_ratio, int | float):
        raise ValueError(f"merge_max_ratio must be a number, got {max_ratio!r}")
    if not (max_ratio >= 1.0 and math.isfinite(max_ratio)):
        raise ValueError(f"merge_max_ratio must be at least 1, got {max_ratio!r}")


def _indexed(source: bytes | Lines) -> Lines:
    return source if isinstance(source, Lines) else Lines(source)


def merge_spans(
    cands: CandidateSet,
    sources: Mapping[str, bytes | Lines] | None,
    verification: Verification | None,
    max_ratio: float = DEFAULT_MERGE_MAX_RATIO,
) -> SpanMerge:
    """Merge the candidates' touching regions of one file (see the module's docstring).

    ``sources``: ``file`` URI -> the bytes the verify stage re-read and matched (as
    bytes, or with their lines already found); None turns span merging off (no
    overlap is even looked for).
    """
    check_ratio(max_ratio)
    n = len(cands)
    out = SpanMerge(list(range(n)))
    if sources is None or n < 2:
        return out
    frames, key = cands.frames, cands.key
    # Only a URI two or more candidates quote can hold a run: the others are not looked
    # at further (no range parsed, no line found), so a composition where no two frames
    # share a source pays one pass over the provenance and nothing else.
    first = list(map(_first_uri, frames))
    quoted = Counter(first)
    shared = {uri for uri, count in quoted.items() if count > 1 and uri is not None}
    if not shared:
        return out
    lines = {uri: _indexed(sources[uri]) for uri in shared if uri in sources}
    # Each region as a plain row (start, end, index): a run of one whose source was
    # not re-read can be neither merged nor a span, so it is never made a ``_Region``,
    # and its key is read only when its source was.
    by_uri: dict[str, list[tuple[int, int, int]]] = {}
    for i in range(n):
        uri = first[i]
        if uri not in shared:
            continue
        span = _lines_addressed(frames[i], uri, lines.get(uri))
        if span is not None:
            by_uri.setdefault(uri, []).append((span[0], span[1], i))
    dropped: set[int] = set()
    for uri in sorted(by_uri):
        rows = by_uri[uri]
        if len(rows) < 2:
            continue
        # By start then end: rows that tie on both overlap, so they fall in one run,
        # which is put in key order below (the index never decides).
        rows.sort()
        source = lines.get(uri)
        for run in _row_runs(rows):
            if len(run) > 1:
                keyed = sorted((a, b, key(i), i) for a, b, i in run)
                regions = [_Region(i, uri, a, b, k, source) for a, b, k, i in keyed]
                _merge_run(regions, cands, verification, max_ratio, out, dropped)
            elif source is not None:  # else: "source_unavailable", nothing to note
                a, b, i = run[0]
                frame = frames[i]
                k = key(i)
                if _distrust_lines(verification, k, source, a, b, frame.content or "") is None:
                    out.spans[i] = Span(uri, a, b, source, frame, (a, b))
    if dropped:
        out.keep = [i for i in range(n) if i not in dropped]
    return out


def _first_uri(frame: ContextFrame) -> str | None:
    """The URI of ``frame``'s first provenance entry (else the frame's own), or None
    without provenance; read from the models' ``__dict__`` (pydantic v2)."""
    fields = frame.__dict__
    provs = fields["provenance"]
    if not provs:
        return None
    return provs[0].__dict__["uri"] or fields["uri"]  # type: ignore[no-any-return]  # str | None


def _lines_addressed(frame: ContextFrame, uri: str, lines: Lines | None) -> tuple[int, int] | None:
    """The one line region every provenance entry of ``frame`` (whose first entry
    names ``uri``) addresses, if any."""
    if frame.content is None:
        return None
    span = None
    for p in frame.provenance:  # "L12" and "L12-12" differ as text, not as lines
        if p.type != "file" or (p.uri or frame.uri) != uri:
            return None  # a derivation, or another file: not one span
        here = lines_of(p.range, lines)
        if here is None or (span is not None and here != span):
            return None
        span = here
    return span


def _row_runs(rows: Sequence[tuple[int, int, int]]) -> list[list[tuple[int, int, int]]]:
    """``_runs`` over plain rows ``(start, end, index)`` sorted by start."""
    runs: list[list[tuple[int, int, int]]] = []
    reach = 0
    for row in rows:
        if runs and row[0] <= reach:
            runs[-1].append(row)
            reach = max(reach, row[1])
        else:
            runs.append([row])
            reach = row[1]
    return runs


_Block = tuple[list[_Region], int, int]  # (members in range order, start, end)


def _merge_run(
    run: list[_Region],
    cands: CandidateSet,
    verification: Verification | None,
    max_ratio: float,
    out: SpanMerge,
    dropped: set[int],
) -> None:
    """One run of touching regions: verified blocks merged, the rest placed or noted."""
    frames = cands.frames
    good: list[_Region] = []
    apart: list[tuple[_Region, str]] = []
    for r in run:
        why = _distrust(verification, r, frames[r.index].content or "")
        if why is None:
            good.append(r)
        else:
            apart.append((r, why))
    # Verified candidates as they now stand: (start, end, survivor) in range order.
    containers: list[tuple[int, int, _Region]] = []
    for good_run in _runs(good):
        for k, (members, start, end) in enumerate(_blocks(good_run, max_ratio)):
            best = _survivor(members, cands)
            whole = len(members) == 1 and start == members[0].start  # a frame as offered
            if whole or _merge_block(members, start, end, cands, out, dropped):
                containers.append((start, end, best))
                out.spans[best.index] = replace(
                    _span(best, frames[best.index]), start=start, end=end
                )
            else:
                for r in members:
                    out.notes.setdefault(r.index, {})["span"] = {"kept_apart": "not_text"}
                    containers.append((r.start, r.end, r))
            if k:  # the cap closed the block before it (they touch: no line twice)
                out.notes.setdefault(best.index, {})["span"] = {"kept_apart": "merge_cap"}
    for r, why in apart:
        found = next(((s, e, c) for s, e, c in containers if s <= r.start and r.end <= e), None)
        if found is None:
            out.notes.setdefault(r.index, {})["span"] = {"kept_apart": why}
            continue
        start, end, best = found
        region = {"uri": r.uri, "range": range_text(start, end)}
        out.absorbed.append((r.index, best.index, "contained_in", region))
        dropped.add(r.index)
        digest = out.frames.get(best.index, frames[best.index]).content_digest
        note: dict[str, Any] = out.notes.setdefault(best.index, {}).setdefault(
            "merged", {**region, "content_digest": digest, "members": []}
        )
        note["members"].append(key_to_wire(r.key))


def _span(r: _Region, frame: ContextFrame) -> Span:
    assert r.lines is not None  # only verified regions are spans
    return Span(r.uri, r.start, r.end, r.lines, frame, (r.start, r.end))


def _blocks(members: list[_Region], max_ratio: float) -> list[_Block]:
    """Members (in range order) grouped greedily into blocks within the size cap.

    A member that would grow the block past the cap starts the next block, which
    begins after the last line of the one before: the lines they share are quoted
    by the first block only (the next one is cut from the same verified bytes), so
    no line is quoted twice. A member wholly inside a block already made joins it.
    """
    out: list[_Block] = []
    cur: list[_Region] = []
    start = end = largest = 0
    for r in members:
        lines = r.lines
        assert lines is not None  # only verified members come here
        size = len(lines.slice(r.start, r.end))
        if cur and start <= r.start and r.end <= end:  # contained: the union does not grow
            cur.append(r)
            largest = max(largest, size)
            continue
        home = next((b for b in reversed(out) if b[1] <= r.start and r.end <= b[2]), None)
        if home is not None:  # inside a block the cap closed: it joins that one
            home[0].append(r)
            continue
        if cur and len(lines.slice(start, r.end)) <= max_ratio * max(largest, size):
            cur.append(r)
            end, largest = max(end, r.end), max(largest, size)
            continue
        if cur:
            out.append((cur, start, end))
            start = max(r.start, end + 1)
        else:
            start = r.start
        cur, end, largest = [r], r.end, size
    if cur:
        out.append((cur, start, end))
    return out


def _survivor(members: Sequence[_Region], cands: CandidateSet) -> _Region:
    """The best member: highest score, then the canonical FrameId."""
    scores = cands.scores
    return min(members, key=lambda r: (-scores[r.index], r.key))


def _merge_block(
    members: list[_Region],
    start: int,
    end: int,
    cands: CandidateSet,
    out: SpanMerge,
    dropped: set[int],
) -> bool:
    """One candidate for the block's union, its members absorbed; False (nothing
    done) when the union's bytes are not UTF-8 text."""
    best = _survivor(members, cands)
    assert best.lines is not None
    data = best.lines.slice(start, end)
    try:
        content = data.decode("utf-8")
    except UnicodeDecodeError:
        return False
    digest = sha256_digest(data)
    rng = range_text(start, end)
    frames, scores, pids = cands.frames, cands.scores, cands.provider_ids
    ranked = sorted(members, key=lambda r: (-scores[r.index], r.key))
    # The region quoted first (F17: its digest covers exactly these bytes), then every
    # member's own provenance, so the citation resolves to all of them.
    provenance = [Provenance(type="file", uri=best.uri, range=rng, digest=digest)]
    seen = {(p.type, p.uri, p.range, p.digest, p.method, p.by) for p in provenance}
    for r in ranked:
        for p in frames[r.index].provenance:
            k = (p.type, p.uri, p.range, p.digest, p.method, p.by)
            if k not in seen:
                seen.add(k)
                provenance.append(p)
    label = merged_label(frames[best.index], (best.start, best.end), rng)
    out.frames[best.index] = frames[best.index].model_copy(
        update={
            "content": content,
            "content_digest": digest,
            "token_cost": canonical_token_cost(content),
            "provenance": provenance,
            "citation_label": label,
            "title": merged_title(frames[best.index], label),
        }
    )
    # Each provider at its best member's score (F10: within its own list).
    support: dict[str, float] = {}
    for r in ranked:
        for pid, score in cands.support.get(r.index, ((pids[r.index], scores[r.index]),)):
            if score > support.get(pid, float("-inf")):
                support[pid] = score
    out.support[best.index] = tuple(sorted(support.items()))
    region = {"uri": best.uri, "range": rng}
    absorbed = []
    for r in members:
        if r is best:
            continue
        inside = any(o is not r and o.start <= r.start and r.end <= o.end for o in members)
        out.absorbed.append(
            (r.index, best.index, "contained_in" if inside else "merged_into", region)
        )
        dropped.add(r.index)
        absorbed.append(key_to_wire(r.key))
    out.notes.setdefault(best.index, {})["merged"] = {
        **region,
        "content_digest": digest,
        "members": absorbed,
    }
    if start > min(r.start for r in members):
        # its first lines are quoted by the block before it, which the cap closed
        out.notes[best.index]["merged"]["trimmed"] = True
    return True


def apply(cands: CandidateSet, merge: SpanMerge) -> CandidateSet:
    """``cands`` with the absorbed members gone and the survivors' merged frames in
    place; the identity columns (id, digest) stay the survivor's as offered."""
    keep = merge.keep
    sub = cands.subset(keep)
    if merge.frames:
        sub = replace(sub, frames=tuple([merge.frames.get(i, cands.frames[i]) for i in keep]))
    position = {i: k for k, i in enumerate(keep)}
    support = {position[i]: s for i, s in cands.support.items() if i in position}
    for i, s in merge.support.items():
        if len(s) > 1:
            support[position[i]] = s
        else:  # one provider behind every member: no support record (``vouched_by``)
            support.pop(position[i], None)
    return replace(sub, support=support)
