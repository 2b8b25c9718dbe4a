"""``compose_for_prompt``: floors → dedup → rank → pack → place → render.

The one entry point for every strategy, as six named stages, each a function
of what the one before returned: ``check_floors`` (``_floors``), ``dedup``,
``rank`` (the strategy's order; the one place a policy decides), ``pack``
(``_pack``, over the blocks' ``price``), ``place`` and ``render``, which
returns the finished record: the prompt, its citations and the audit, every
entry built once (``_audit``).

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
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from hostd.protocol import ContextFrame, FrameId

from ._audit import UNVERIFIABLE, is_verified, ranked_entries, unranked_entries
from ._candidates import CandidateSet, FramePair, pick_from
from ._dedup import dedup_pool
from ._floors import AdmittedFloors, FloorInput, check_budget, check_floors
from ._pack import Packing, pack, tokens_of_bytes
from ._placement import check_placement, place_indices
from ._render import EVIDENCE_PREAMBLE, kinds_and_labels, render_frame, rendered_sizes
from ._result import Citation, ComposedPrompt, CompositionAudit
from .ranking import DEFAULT_STRATEGY, Strategy, rank_with, strategy_from_wire

__all__ = ["Prices", "Survivors", "compose_for_prompt", "dedup", "place", "price", "rank", "render"]

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
    """The dedup stage's output: one candidate per piece of evidence (``cands``,
    with its ``contents`` column) and the collapsed frames as ``(dropped, kept)``
    indices into ``pool`` (the candidates as offered)."""

    pool: CandidateSet
    cands: CandidateSet
    contents: Sequence[str | None]
    duplicates: list[tuple[int, int]]


def dedup(frames: Iterable[FramePair]) -> Survivors:
    """Cross-provider dedup (D2), every field read from each model once."""
    pairs = frames if isinstance(frames, list | tuple) else list(frames)
    pool, contents, provenances = CandidateSet.with_columns(pairs)
    deduped = dedup_pool(pool, provenances)
    if deduped.drops:
        contents = pick_from(deduped.origin)(contents)
    return Survivors(pool, deduped.kept, contents, deduped.drops)


@dataclass(slots=True, frozen=True)
class Prices:
    """Each candidate's citation label and the bytes of its block under it."""

    labels: list[str]
    sizes: list[int]


def price(survivors: Survivors, verification: Verification | None) -> Prices:
    """Every candidate priced as its fenced block, none rendered (``rendered_sizes``)."""
    cands = survivors.cands
    kinds, labels = kinds_and_labels(cands.frames)
    unverified: list[int] = []
    if verification and any(s.get("state") == UNVERIFIABLE for s in verification.values()):
        key = cands.key
        unverified = [i for i in range(len(cands)) if not is_verified(verification, key(i))]
    sizes = rendered_sizes(
        cands.provider_ids, cands.ids, kinds, labels, survivors.contents, unverified
    )
    return Prices(labels, sizes)


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
    placed: Sequence[int],
    prices: Prices,
    *,
    policy: Mapping[str, Any],
    excluded: Iterable[Excluded],
    verification: Verification | None,
) -> ComposedPrompt:
    """The finished record: the prompt (preamble, top floors, frames in placement
    order, bottom floors; nothing to show is the empty prompt), its citations in
    render order and the audit, each entry built once."""
    cands = survivors.cands
    frames, key = cands.frames, cands.key
    parts: list[str] = []
    citations: list[Citation] = []
    shown: list[tuple[str, ContextFrame]] = []
    positions = [0] * len(placed)
    for position, j in enumerate(placed):
        i = packing.chosen[j]
        positions[j] = position
        parts.append(packing.blocks[j])
        k = key(i)
        fid = FrameId(k[0], k[1], k[3] if k[2] else None)
        citations.append(Citation(packing.labels[j], fid, tuple(frames[i].provenance)))
        shown.append((k[0], frames[i]))
    budget = floors.budget
    if parts or floors.blocks:
        prompt = "".join(
            [
                EVIDENCE_PREAMBLE,
                *(b for b, pos in floors.blocks if pos == "top"),
                *parts,
                *(b for b, pos in floors.blocks if pos == "bottom"),
            ]
        )
        tokens_used = tokens_of_bytes(packing.used)
    else:
        prompt = ""
        tokens_used = 0
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
    )
    entries += unranked_entries(survivors.pool, survivors.duplicates, excluded)
    audit = CompositionAudit(
        entries,
        global_budget=budget,
        tokens_used=tokens_used,
        policy=policy,
        floors=floors.records,
    )
    return ComposedPrompt(prompt, tuple(citations), audit, shown=tuple(shown))


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
    policy = _policy(strategy, placement, overfetch, asked)

    if not (isinstance(floors, AdmittedFloors) and floors.budget == budget):
        given = floors.given if isinstance(floors, AdmittedFloors) else floors
        floors = check_floors(given, budget)
    survivors = dedup(frames)
    cands = survivors.cands
    order = rank(strategy, cands)
    prices = price(survivors, verification)
    pids, key = cands.provider_ids, cands.key

    def render_block(i: int, label: str) -> str:
        verified = is_verified(verification, key(i))
        return render_frame(pids[i], cands.frames[i], label, verified=verified)

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
    )
    placed = place(placement, packing, cands)
    return render(
        floors,
        survivors,
        order,
        packing,
        placed,
        prices,
        policy=policy,
        excluded=excluded,
        verification=verification,
    )
