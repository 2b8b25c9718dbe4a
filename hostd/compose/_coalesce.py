"""Coalescing: admitted blocks of one source that touch, quoted as one block.

Span merging (``_spans``) joins *overlapping* ranges before ranking, so no line
is paid twice. Ranges that only touch (``L1-4`` and ``L5-8``) are ranked apart:
a union would stand at its best member's rank and carry the weaker neighbour
into the prompt, crowding out other evidence. When the packer has admitted two
or more blocks that touch, each on its own merit (each a ``Span``: bytes known
good, from one re-read source), the prompt quotes them as one block: one fence,
the union's lines cut from the source bytes (F17, digest recomputed, F5), the
identity of the best-ranked member (the *lead*) and its label with the union's
range (``_spans.merged_label``, as a span merge labels its block).

The fence saved stays unspent. Which frames the prompt holds is exactly what the
walk admitted, so coalescing changes how the evidence is laid out, never which
evidence it is: recall is that of the walk, caps and every ``over_budget`` entry
stay as the walk priced them, and ``tokens_used`` reports the smaller prompt. A
group whose block would not be smaller than its members' blocks apart (a label
made unique against the others may grow) stays apart.

An admitted block whose text a later admitted block of another provider quotes
(``_same_text``: the walk could not know it yet) is left out the same way: its
fence unspent, its entry ``contained_in`` the block that quotes it, which keeps its
own place. It takes no part in coalescing.

Everything is decided from the packing (admission order, which is rank order),
the spans and the floors' labels: a pure function of the candidate set.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from hostd.protocol import ContextFrame, Provenance, canonical_token_cost, sha256_digest

from ._candidates import CandidateSet, key_to_wire
from ._lines import Span, merged_label, merged_title, range_text
from ._meter import Meter
from ._pack import Labels, Packing

__all__ = ["Group", "Layout", "audit_notes", "lay_out", "refold"]

#: Renders candidate ``i``'s block for ``frame`` under ``label`` (its provider's fence).
RenderAs = Callable[[int, ContextFrame, str], str]


@dataclass(slots=True, frozen=True)
class Group:
    """Admitted blocks rendered as one: ``members`` (admission indices, best first;
    the first is the lead), the union ``start``-``end`` of ``uri``, and the block."""

    members: tuple[int, ...]
    uri: str
    start: int
    end: int
    label: str
    frame: ContextFrame
    block: str
    saved: int

    @property
    def label_frame(self) -> tuple[str, ContextFrame]:
        return self.label, self.frame

    @property
    def region(self) -> dict[str, str]:
        return {"uri": self.uri, "range": range_text(self.start, self.end)}


@dataclass(slots=True)
class Layout:
    """The prompt's frame blocks: ``parts`` in prompt order, ``placed[p]`` the admission
    index part ``p`` stands for (a group's lead), ``groups`` by lead, ``lead_of`` each
    other member's lead and each block a later one quotes (``contained``: those alone)
    by the placed block that quotes it, ``saved`` what both took off the walk's size."""

    parts: list[str]
    placed: list[int]
    groups: dict[int, Group] = field(default_factory=dict)
    lead_of: dict[int, int] = field(default_factory=dict)
    saved: int = 0
    contained: dict[int, int] = field(default_factory=dict)


def _runs(
    packing: Packing, spans: Mapping[int, Span], folded: Mapping[int, int]
) -> list[list[int]]:
    """Admission indices whose spans touch end to start, two or more to a run, in the
    order of each run's lead (its best-ranked member); none that is ``folded``."""
    by_uri: dict[str, list[tuple[int, int, int]]] = {}
    for j, i in enumerate(packing.chosen):
        span = spans.get(i)
        if span is not None and j not in folded:
            by_uri.setdefault(span.uri, []).append((span.start, span.end, j))
    runs: list[list[int]] = []
    for uri in sorted(by_uri):
        run: list[int] = []
        reach = -1
        for start, end, j in sorted(by_uri[uri]):
            if run and start == reach + 1:
                run.append(j)
            else:
                if len(run) > 1:
                    runs.append(run)
                run = [j]
            reach = end
        if len(run) > 1:
            runs.append(run)
    runs.sort(key=min)
    return runs


def _group(
    run: list[int],
    packing: Packing,
    cands: CandidateSet,
    spans: Mapping[int, Span],
    book: Labels,
    render: RenderAs,
    meter: Meter,
) -> Group | None:
    chosen = packing.chosen
    members = tuple(sorted(run))  # admission order is rank order: the lead first
    lead = spans[chosen[members[0]]]
    first, last = spans[chosen[run[0]]], spans[chosen[run[-1]]]
    data = lead.lines.slice(first.start, last.end)
    try:
        content = data.decode("utf-8")
    except UnicodeDecodeError:  # whole lines of UTF-8 members: kept apart all the same
        return None
    digest = sha256_digest(data)
    rng = range_text(first.start, last.end)
    # The region quoted first (F17: its digest covers exactly these bytes), then every
    # member's own provenance, so the citation resolves to all of them.
    provenance = [Provenance(type="file", uri=lead.uri, range=rng, digest=digest)]
    seen = {(p.type, p.uri, p.range, p.digest, p.method, p.by) for p in provenance}
    for j in members:
        for p in cands.frames[chosen[j]].provenance:
            k = (p.type, p.uri, p.range, p.digest, p.method, p.by)
            if k not in seen:
                seen.add(k)
                provenance.append(p)
    label = book.peek(merged_label(lead.frame, lead.own, rng))
    frame = cands.frames[chosen[members[0]]].model_copy(
        update={
            "content": content,
            "content_digest": digest,
            "token_cost": canonical_token_cost(content),
            "provenance": provenance,
            "citation_label": label,
            "title": merged_title(cands.frames[chosen[members[0]]], label),
        }
    )
    block = render(chosen[members[0]], frame, label)
    saved = sum(meter.size(packing.blocks[j]) for j in members) - meter.size(block)
    if saved <= 0:
        return None
    book.claim(label)
    return Group(members, lead.uri, first.start, last.end, label, frame, block, saved)


def lay_out(
    packing: Packing,
    placed: Sequence[int],
    cands: CandidateSet,
    spans: Mapping[int, Span],
    floor_labels: Iterable[str],
    render: RenderAs,
    meter: Meter,
    folds: Mapping[int, int] | None = None,
) -> Layout:
    """The prompt's frame blocks for ``placed`` (admission indices in prompt order):
    admitted blocks that touch coalesced, each group at its lead's place; ``folds``
    (``Quotes.folds``): blocks a later admitted one quotes, left out."""
    folded = folds or {}
    runs = _runs(packing, spans, folded) if len(spans) > 1 and len(packing.chosen) > 1 else []
    if not (runs or folded):
        return Layout([packing.blocks[j] for j in placed], list(placed))
    # A group's label is unique among every label the prompt could hold (the floors',
    # every admitted block's as the walk made it, the groups' before it).
    book = Labels({*floor_labels, *packing.labels})
    out = Layout([], [])
    for run in runs:
        group = _group(run, packing, cands, spans, book, render, meter)
        if group is None:
            continue
        lead = group.members[0]
        out.groups[lead] = group
        out.saved += group.saved
        for j in group.members[1:]:
            out.lead_of[j] = lead
    for j in sorted(folded):
        k = folded[j]
        while k in folded:  # quoted by a block that a later one quotes in turn
            k = folded[k]
        out.contained[j] = out.lead_of[j] = out.lead_of.get(k, k)
        out.saved += meter.size(packing.blocks[j])
    for j in placed:
        if j in out.lead_of:
            continue
        group = out.groups.get(j)
        out.parts.append(packing.blocks[j] if group is None else group.block)
        out.placed.append(j)
    return out


def audit_notes(
    layout: Layout, packing: Packing, cands: CandidateSet, meter: Meter
) -> dict[int, dict[str, Any]]:
    """By candidate index: a lead's ``coalesced`` note and the providers behind its
    block (``vouched_by``), each other member's ``merged_into`` detail."""
    chosen = packing.chosen
    out: dict[int, dict[str, Any]] = {}
    for j, k in layout.contained.items():
        out[chosen[j]] = {"kept": key_to_wire(cands.key(chosen[k])), "same_text": True}
    for lead, group in layout.groups.items():
        kept = key_to_wire(cands.key(chosen[lead]))
        vouched: set[str] = set()
        for j in group.members:
            vouched.update(cands.vouched_by(chosen[j]))
        out[chosen[lead]] = {
            "coalesced": {
                **group.region,
                "content_digest": group.frame.content_digest,
                "tokens": meter.tokens(meter.size(group.block)),
                "members": [key_to_wire(cands.key(chosen[j])) for j in group.members[1:]],
            },
            "vouched_by": sorted(vouched),
        }
        for j in group.members[1:]:
            out[chosen[j]] = {"kept": kept, "region": group.region, "coalesced": True}
    return out


def refold(
    layout: Layout,
    packing: Packing,
    origin: Sequence[int],
    duplicates: Iterable[tuple[int, int]],
    absorbed: Iterable[tuple[int, int, str, dict[str, str]]],
) -> tuple[list[tuple[int, int]], list[tuple[int, int, str, dict[str, str]]]]:
    """Dedup's and span merging's folds (indices into the pool), each naming the
    candidate whose block quotes it in the end: a frame folded into one that a span
    merge absorbed, into a member a group coalesced, or into one whose text another
    block quotes, names the survivor, the lead or that block (feedback credits every
    frame folded into a cited one, docs/eval.md)."""
    absorbed = list(absorbed)
    into: dict[int, int] = {m: k for m, k, _, _ in absorbed}
    region: dict[int, dict[str, str]] = {}
    chosen = packing.chosen
    for j, lead in layout.lead_of.items():
        into[origin[chosen[j]]] = origin[chosen[lead]]
    for i, j in packing.contained.items():
        into[origin[i]] = origin[chosen[layout.lead_of.get(j, j)]]
    for lead, group in layout.groups.items():
        region[origin[chosen[lead]]] = group.region

    def final(k: int) -> int:
        while k in into:
            k = into[k]
        return k

    dups = [(d, final(k)) for d, k in duplicates]
    folds = []
    for m, k, why, where in absorbed:
        f = final(k)
        folds.append((m, f, why, region.get(f, where) if f != k else where))
    return dups, folds
