"""``compose_for_prompt``: floors → dedup → spans → rank → pack → place → render.

The one entry point for every strategy, as named stages, each a function
of what the one before returned: ``check_floors`` (``_floors``), ``dedup``,
``spans`` (overlapping regions of one source merged, ``_spans``), ``rank`` (the
strategy's order; the one place a policy decides), ``pack`` (``_pack``, over the
blocks' ``price``), ``place`` (admitted blocks that touch coalesced into one,
``_coalesce``) and ``render``, which returns the finished record: the prompt, its
citations and the audit, every entry built once (``_audit``).

The budget bounds the rendered prompt: its *canonical* token cost (B3:
``ceil(utf8 bytes / 4)`` of the whole prompt, preamble and fences included,
never a cost a provider declared) never exceeds it. Floors are admitted first,
with the preamble, and fail loudly if those alone do not fit; caps bound each
provider's share of what remains; the packer walks the ranked survivors and
includes a frame only if the prompt with its fenced block still fits. Every
offered frame — including those earlier pipeline stages already excluded —
ends in the audit exactly once.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from hostd.protocol import ContextFrame, FrameId, LineIndex

from ._audit import UNVERIFIABLE, is_verified, ranked_entries, unranked_entries
from ._candidates import CandidateSet, FramePair, frame_id_of_key, key_to_wire, pick_from
from ._coalesce import Layout, audit_notes, lay_out, refold
from ._dedup import dedup_pool, no_place
from ._floors import AdmittedFloors, FloorInput, check_budget, check_floors
from ._lines import Span
from ._meter import CANONICAL, Meter, TokenCounter, meter_for, same_meter
from ._pack import Packing, pack
from ._placement import check_placement, place_indices
from ._render import (
    EVIDENCE_PREAMBLE,
    fence,
    fence_columns,
    priced_blocks,
    render_frame,
)
from ._result import Citation, ComposedPrompt, CompositionAudit
from ._same_text import Quotes
from ._spans import DEFAULT_MERGE_MAX_RATIO, check_ratio, merge_spans
from ._spans import apply as apply_spans
from .ranking import DEFAULT_STRATEGY, Strategy, rank_with, strategy_from_wire

__all__ = [
    "Prices",
    "Survivors",
    "compose_for_prompt",
    "dedup",
    "place",
    "price",
    "rank",
    "render",
    "spans",
]

#: ``(FrameId, reason, detail)``: a frame an earlier stage dropped.
Excluded = tuple[FrameId, str, Mapping[str, Any]]
Verification = Mapping[FrameId, Mapping[str, Any]]


def _cap_tokens(caps: Mapping[str, float] | None, contested: int) -> dict[str, tuple[int, float]]:
    """``provider -> (tokens, share)``; ``"*"`` stands for every provider not named."""
    if not caps:
        return {}
    out: dict[str, tuple[int, float]] = {}
    for provider, share in caps.items():
        if not isinstance(provider, str) or not provider:
            raise ValueError(f"a cap is keyed by provider id or '*', got {provider!r}")
        if isinstance(share, bool) or not isinstance(share, int | float):
            raise ValueError(f"cap of {provider!r} must be a number in [0, 1], got {share!r}")
        if not (math.isfinite(share) and 0.0 <= share <= 1.0):
            raise ValueError(f"cap of {provider!r} must be a share in [0, 1], got {share!r}")
        out[provider] = (math.floor(share * contested), float(share))
    return out


@dataclass(slots=True, frozen=True)
class Survivors:
    """The dedup stages' output: one candidate per piece of evidence (``cands``,
    with its ``contents`` column; ``origin[i]``: candidate ``i``'s index in ``pool``,
    the candidates as offered), the collapsed frames as ``(dropped, kept)`` indices
    into ``pool``, the frames span merging absorbed as ``(member, survivor, reason,
    region)`` (indices into ``pool``), extra audit members by candidate index, the
    candidates whose bytes are known good as ``Span``s (what coalescing reads), and
    whether the packer is to look for text one block quotes of another (``mixed``)."""

    pool: CandidateSet
    cands: CandidateSet
    contents: Sequence[str | None]
    duplicates: list[tuple[int, int]]
    origin: Sequence[int] = ()
    absorbed: list[tuple[int, int, str, dict[str, str]]] = field(default_factory=list)
    notes: Mapping[int, Mapping[str, Any]] = field(default_factory=dict)
    spans: Mapping[int, Span] = field(default_factory=dict)
    #: Two providers, one frame without ``file`` provenance: text may be quoted twice.
    mixed: bool = False
    #: When ``mixed``: each candidate, whether it has no ``file`` provenance (dedup
    #: found it for the pool; None: ``placeless`` reads it when asked).
    placeless: Sequence[bool] | None = None


def dedup(frames: Iterable[FramePair]) -> Survivors:
    """Cross-provider dedup (D2), every field read from each model once."""
    pairs = frames if isinstance(frames, list | tuple) else list(frames)
    pool, contents, provenances = CandidateSet.with_columns(pairs)
    deduped = dedup_pool(pool, provenances, contents)
    if deduped.drops:
        contents = pick_from(deduped.origin)(contents)
    return Survivors(
        pool,
        deduped.kept,
        contents,
        deduped.drops,
        deduped.origin,
        mixed=deduped.mixed,
        placeless=deduped.placeless,
    )


def spans(
    survivors: Survivors,
    sources: Mapping[str, bytes | LineIndex] | None,
    verification: Verification | None,
    max_ratio: float = DEFAULT_MERGE_MAX_RATIO,
) -> Survivors:
    """Span-aware dedup (``_spans``): overlapping regions of one verified source merged."""
    if sources is None:  # off: nothing is looked for
        check_ratio(max_ratio)
        return survivors
    merge = merge_spans(survivors.cands, sources, verification, max_ratio)
    if not merge.notes:  # nothing merged: the candidates stand, some as spans
        return replace(survivors, spans=merge.spans) if merge.spans else survivors
    cands, origin = survivors.cands, survivors.origin
    keep = merge.keep
    contents = [
        merge.frames[i].content if i in merge.frames else survivors.contents[i] for i in keep
    ]
    position = {i: k for k, i in enumerate(keep)}
    known = survivors.placeless
    return Survivors(
        survivors.pool,
        apply_spans(cands, merge),
        contents,
        survivors.duplicates,
        [origin[i] for i in keep],
        [(origin[m], origin[k], why, region) for m, k, why, region in merge.absorbed],
        {position[i]: note for i, note in merge.notes.items() if i in position},
        {position[i]: span for i, span in merge.spans.items() if i in position},
        survivors.mixed,
        None
        if known is None
        else [
            no_place(merge.frames[i].provenance) if i in merge.frames else known[i] for i in keep
        ],
    )


@dataclass(slots=True, frozen=True)
class Prices:
    """Each candidate's citation label and the size of its block under it (bytes,
    or a tokenizer meter's tokens); ``bodies``: its content as its block quotes it
    (neutralised once, for pricing and for rendering); ``unverified``: the
    candidates fenced ``verified="no"``; ``clean``: no attribute value needs escaping."""

    labels: list[str]
    sizes: list[int]
    bodies: list[str] = field(default_factory=list)
    unverified: frozenset[int] = frozenset()
    clean: bool = False
    kinds: list[str] = field(default_factory=list)
    #: Each candidate's ``title_attributes`` entry (``""``: its title adds nothing to its
    #: cite and it carries no validity).
    titles: list[str] = field(default_factory=list)


def placeless(cands: CandidateSet) -> list[bool]:
    """Each candidate: whether it has no ``file`` provenance (no place to re-read)."""
    return [no_place(f.provenance) for f in cands.frames]


def unverified_of(cands: CandidateSet, verification: Verification | None) -> frozenset[int]:
    """The candidates whose verification state is ``unverifiable`` (fenced so)."""
    if not verification or not any(s.get("state") == UNVERIFIABLE for s in verification.values()):
        return frozenset()
    key = cands.key
    return frozenset(i for i in range(len(cands)) if not is_verified(verification, key(i)))


def price(survivors: Survivors, verification: Verification | None) -> Prices:
    """Every candidate priced as its fenced block, in bytes, none rendered
    (``priced_blocks``); with a tokenizer, ``count_blocks`` prices them again."""
    cands = survivors.cands
    kinds, labels, titles = fence_columns(cands.frames)
    unverified = unverified_of(cands, verification)
    bodies, sizes, clean = priced_blocks(
        cands.provider_ids, kinds, labels, survivors.contents, unverified, titles
    )
    return Prices(labels, sizes, bodies, unverified, clean, kinds, titles)


def count_blocks(prices: Prices, meter: Meter, render_block: Callable[[int, str], str]) -> Prices:
    """With a tokenizer ``meter``: each candidate's block rendered and counted."""
    sizes = [meter.size(render_block(i, label)) for i, label in enumerate(prices.labels)]
    return replace(prices, sizes=sizes)


def rank(strategy: Strategy, cands: CandidateSet) -> list[int]:
    """The policy's order of ``cands`` (indices, best first): the one stage a
    strategy decides, a pure function of the candidate set."""
    return rank_with(strategy, cands)


def place(placement: str, packing: Packing, cands: CandidateSet) -> list[int]:
    """The included frames (indices into ``packing.chosen``) in prompt order."""
    chosen = packing.chosen
    return place_indices(
        placement,
        list(range(len(chosen))),
        [cands.provider_ids[i] for i in chosen],
        lambda j: cands.key(chosen[j]),
    )


def render(
    floors: AdmittedFloors,
    survivors: Survivors,
    order: Sequence[int],
    packing: Packing,
    layout: Layout,
    prices: Prices,
    *,
    policy: Mapping[str, Any],
    excluded: Iterable[Excluded],
    verification: Verification | None,
    render_block: Callable[[int, str], str] | None = None,
    counted: int | None = None,
) -> ComposedPrompt:
    """The finished record: the prompt (preamble, top floors, frames in placement
    order, bottom floors; nothing to show is the empty prompt), its citations in
    render order and the audit, each entry built once."""
    cands = survivors.cands
    frames, key = cands.frames, cands.key
    citations: list[Citation] = []
    shown: list[tuple[str, ContextFrame]] = []
    positions = [0] * len(packing.chosen)
    for position, j in enumerate(layout.placed):
        i = packing.chosen[j]
        positions[j] = position
        k = key(i)
        fid = frame_id_of_key(k)
        group = layout.groups.get(j)
        label, frame = (packing.labels[j], frames[i]) if group is None else group.label_frame
        citations.append(Citation(label, fid, tuple(frame.provenance)))
        shown.append((k[0], frame))
    for j, lead in layout.lead_of.items():  # a block left out stands where its quoter does
        positions[j] = positions[lead]
    budget, meter = floors.budget, floors.meter
    prompt = assemble(floors, layout.parts)
    # The prompt's UTF-8 size, where the walk counted it: with the canonical meter its
    # bytes are the preamble's, the floors' and each admitted block's, less what
    # coalescing saved (``prompt_usage`` reads it instead of encoding the prompt).
    size: int | None = None
    if not prompt:
        tokens_used = 0
    elif counted is not None:  # the whole prompt, counted by the tokenizer
        tokens_used = counted
    else:
        used = packing.used - layout.saved
        tokens_used = meter.tokens(used)
        if meter is CANONICAL:
            size = used
    assert tokens_used <= budget  # the packer's invariant; a failure here is a bug
    entries = ranked_entries(
        order,
        cands,
        packing,
        positions,
        prices.labels,
        prices.sizes,
        budget=budget,
        floor_labels=floors.labels,
        verification=verification,
        notes=survivors.notes,
        meter=meter,
        render_block=render_block,
        coalesced=(
            audit_notes(layout, packing, cands, meter)
            if layout.groups or layout.contained
            else None
        ),
        contained={
            i: {
                "kept": key_to_wire(key(packing.chosen[layout.lead_of.get(j, j)])),
                "same_text": True,
            }
            for i, j in packing.contained.items()
        },
    )
    duplicates, absorbed = survivors.duplicates, survivors.absorbed
    if layout.lead_of or absorbed or packing.contained:  # every fold names its block
        duplicates, absorbed = refold(layout, packing, survivors.origin, duplicates, absorbed)
    entries += unranked_entries(survivors.pool, duplicates, excluded, absorbed)
    # What the included entries' ``tokens`` add up to: every admitted block the walk
    # charged, but a coalesced group's other members (their entries are ``merged_into``).
    costs = packing.costs
    included = sum(costs) - sum(costs[j] for j in layout.lead_of)
    audit = CompositionAudit(
        entries,
        global_budget=budget,
        tokens_used=tokens_used,
        policy=policy,
        floors=floors.records,
        tokens_other=tokens_used - included,
    )
    model_tokens = tokens_used if meter is not CANONICAL else None
    return ComposedPrompt(
        prompt,
        tuple(citations),
        audit,
        model_tokens,
        _tokenizer_name(meter),
        tuple(shown),
        prompt_bytes=0 if not prompt else size,
    )


def _tokenizer_name(meter: Meter) -> str | None:
    return None if meter is CANONICAL else meter.name


def assemble(floors: AdmittedFloors, parts: Sequence[str]) -> str:
    """The prompt: the preamble, the top floors, the frames' blocks in placement
    order, the bottom floors; nothing to show is the empty prompt."""
    if not (parts or floors.blocks):
        return ""
    return "".join(
        [
            EVIDENCE_PREAMBLE,
            *(b for b, pos in floors.blocks if pos == "top"),
            *parts,
            *(b for b, pos in floors.blocks if pos == "bottom"),
        ]
    )


def fit_counted(
    floors: AdmittedFloors,
    packing: Packing,
    placement: str,
    cands: CandidateSet,
    lay: Callable[[list[int]], Layout],
) -> tuple[Layout, int]:
    """With a tokenizer (whose counts need not add up across blocks): the whole prompt
    counted, and the last frame admitted dropped until it fits the budget. Returns
    the layout (``lay`` of the placement) and the prompt's count; ``packing`` loses
    the frames dropped."""
    meter = floors.meter
    while True:
        layout = lay(place(placement, packing, cands))
        prompt = assemble(floors, layout.parts)
        counted = meter.size(prompt) if prompt else 0
        if counted <= floors.budget or not packing.chosen:
            return layout, counted
        packing.recounted.append(packing.ranks.pop())
        for column in (packing.chosen, packing.blocks, packing.labels):
            column.pop()
        packing.costs.pop()
        packing.used_after.pop()
        # what only the block dropped quoted is no longer in the prompt: over budget
        gone = len(packing.chosen)
        for i in [i for i, j in packing.contained.items() if j == gone]:
            del packing.contained[i]


def _policy(
    strategy: Strategy,
    placement: str,
    overfetch: float | None,
    asked: Mapping[str, int] | None,
) -> dict[str, Any]:
    policy: dict[str, Any] = {"strategy": strategy.name, "placement": placement}
    to_wire = getattr(strategy, "to_wire", None)
    if to_wire is not None:
        policy["strategy_params"] = to_wire()
    if overfetch is not None:
        # What the providers were asked for: share × overfetch, capped at the budget.
        policy["overfetch"] = overfetch
    if asked is not None:
        policy["asked"] = dict(asked)
    return policy


def compose_for_prompt(
    frames: Iterable[FramePair],
    budget: int,
    *,
    strategy: Strategy | str | Mapping[str, Any] | None = None,
    placement: str = "edges",
    floors: AdmittedFloors | Iterable[FloorInput] = (),
    caps: Mapping[str, float] | None = None,
    excluded: Iterable[Excluded] = (),
    verification: Verification | None = None,
    overfetch: float | None = None,
    asked: Mapping[str, int] | None = None,
    sources: Mapping[str, bytes | LineIndex] | None = None,
    merge_max_ratio: float = DEFAULT_MERGE_MAX_RATIO,
    tokenizer: TokenCounter | Meter | None = None,
) -> ComposedPrompt:
    """Compose ``(provider_id, frame)`` pairs into a fenced, cited, audited prompt.

    - ``strategy``: a ranking policy (``DEFAULT_STRATEGY`` when None), or its
      client API form (``"round_robin"``, ``{"quota": 2}``, …; see
      ``strategy_from_wire``).
    - ``placement``: one of ``PLACEMENTS``, applied to the included frames.
    - ``floors``: admitted before ranking (``check_floors``; an ``AdmittedFloors``
      already checked against this budget is taken as it is); if the preamble
      and the fenced floors alone cost more than ``budget``,
      ``FloorsExceedBudget`` names each floor's cost.
    - ``caps``: provider id (or ``"*"`` for every provider not named) → share in
      [0, 1] of the budget left after the preamble and floors; a provider's
      included blocks never cost more than ``floor(share * remainder)`` tokens.
    - ``excluded``: ``(FrameId, reason, detail)`` dropped by earlier stages
      (quarantine, invalid frame, digest mismatch, stale …); each becomes one
      excluded audit entry with that reason and a copy of its detail.
    - ``verification``: FrameId → small JSON dict copied into that frame's
      included entry (``{"state": "unchecked"}`` when absent); a frame whose
      ``state`` is ``"unverifiable"`` is fenced with ``verified="no"``.
    - ``overfetch``, ``asked``: from a fan-out, the over-fetch factor and the
      tokens each provider was asked for; recorded in the audit's ``policy``.
    - ``sources``: ``file`` URI → the bytes the verify stage re-read under the
      trusted roots (``FanOut.sources``); with it, candidates quoting overlapping
      or contained line ranges of one source are merged into one covering their
      union before ranking (``_spans``), at most ``merge_max_ratio`` times the
      bytes of its largest member, and admitted blocks whose ranges touch are
      quoted as one after packing (``_coalesce``). None: neither.
    - ``tokenizer``: any ``str -> int`` (the model's tokenizer): the budget then
      counts the rendered prompt in its tokens (block by block, then the whole
      prompt once more) and ``tokens_used`` and every entry's ``tokens`` are
      its tokens; ``prompt_usage()`` reports them beside the canonical count.
      Without it the budget counts canonical tokens (B3: bytes / 4).

    The prompt is a pure function of the frame *set* (and the arguments): any
    order of the same frames gives the same bytes. Its canonical cost is
    ``tokens_used``, never above ``budget``; a composition with nothing to show
    (no floor, no frame that fits, e.g. a budget below the preamble's cost) is
    the empty prompt, with every frame in the audit as ``over_budget``.
    """
    budget = check_budget(budget)
    if strategy is None:
        strategy = DEFAULT_STRATEGY
    elif isinstance(strategy, str | Mapping):  # a client API value, e.g. {"quota": 2}
        strategy = strategy_from_wire(strategy)
    placement = check_placement(placement)
    meter = meter_for(tokenizer)
    policy = _policy(strategy, placement, overfetch, asked)
    if meter is not CANONICAL:
        policy["tokenizer"] = meter.name

    if not (
        isinstance(floors, AdmittedFloors)
        and floors.budget == budget
        and same_meter(floors.meter, meter)
    ):
        given = floors.given if isinstance(floors, AdmittedFloors) else floors
        floors = check_floors(given, budget, tokenizer=meter)
    meter = floors.meter
    survivors = spans(dedup(frames), sources, verification, merge_max_ratio)
    cands = survivors.cands
    order = rank(strategy, cands)
    pids = cands.provider_ids
    prices = price(survivors, verification)

    def render_block(i: int, label: str) -> str:
        verified = i not in prices.unverified
        clean = prices.clean and label == prices.labels[i]  # tested in bulk as priced
        body, kind, title = prices.bodies[i], prices.kinds[i], prices.titles[i]
        return fence(pids[i], kind, label, body, verified=verified, clean=clean, title=title)

    if meter is not CANONICAL:
        prices = count_blocks(prices, meter, render_block)
    quotes = None
    if survivors.mixed:
        known = survivors.placeless
        quotes = Quotes.of(pids, survivors.contents, placeless(cands) if known is None else known)

    packing = pack(
        order,
        pids,
        prices.labels,
        prices.sizes,
        fixed=floors.fixed,
        budget=budget,
        book=floors.labels_taken(),
        caps=_cap_tokens(caps, floors.remainder),
        render=render_block,
        meter=meter,
        quotes=quotes,
    )

    def render_as(i: int, frame: ContextFrame, label: str) -> str:
        return render_frame(pids[i], frame, label, verified=i not in prices.unverified)

    def lay(placed: list[int]) -> Layout:
        spans = survivors.spans
        folds = quotes.folds(packing.chosen) if quotes is not None else None
        return lay_out(packing, placed, cands, spans, floors.labels, render_as, meter, folds)

    counted: int | None = None
    if meter.exact:
        layout = lay(place(placement, packing, cands))
    else:
        layout, counted = fit_counted(floors, packing, placement, cands, lay)
    return render(
        floors,
        survivors,
        order,
        packing,
        layout,
        prices,
        policy=policy,
        excluded=excluded,
        verification=verification,
        render_block=render_block,
        counted=counted,
    )
