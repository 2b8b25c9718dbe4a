"""``compose_for_prompt``: dedup → rank → floors, caps and packing → place → render.

The one entry point for every strategy. The budget bounds the rendered prompt:
its *canonical* token cost (B3: ``ceil(utf8 bytes / 4)`` of the whole prompt,
preamble and fences included, never a cost a provider declared) never exceeds
it. Floors are admitted first, with the preamble, and fail loudly if those
alone do not fit; caps bound each provider's share of what remains; the packer
walks the ranked survivors and includes a frame only if the prompt with its
fenced block still fits. Every offered frame — including those earlier
pipeline stages already excluded — ends in the audit exactly once.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Literal

from hostd.errors import FloorsExceedBudget
from hostd.protocol import FrameId, canonical_token_cost

from ._candidates import CandidateSet, FramePair, frame_id_of_key, pick_from
from ._dedup import dedup_pool
from ._pack import Labels, pack, tokens_of_bytes, utf8_size
from ._placement import check_placement, place_indices
from ._render import (
    EVIDENCE_PREAMBLE,
    PREAMBLE_BYTES,
    citation_label_for,
    render_floor,
    render_frame,
    rendered_size,
)
from ._result import Citation, ComposedPrompt, CompositionAudit, FloorRecord, Row
from .ranking import DEFAULT_STRATEGY, Strategy, rank_with, strategy_from_wire

__all__ = ["Floor", "compose_for_prompt"]

_UNCHECKED: Mapping[str, Any] = {"state": "unchecked"}
#: The verification state of evidence hostd could not check (its fence says so).
UNVERIFIABLE = "unverifiable"


@dataclass(slots=True, frozen=True)
class Floor:
    """Content admitted before ranking (a pinned file, the user's selection).

    It costs its canonical tokens (B3) and is rendered fenced like any frame,
    at the ``top`` (just after the preamble) or the ``bottom`` of the block,
    floors at one end in the order given.
    """

    label: str
    content: str
    position: Literal["top", "bottom"] = "top"

    def __post_init__(self) -> None:
        if not isinstance(self.label, str) or not self.label.strip():
            raise ValueError("a floor needs a non-empty label to be cited by")
        if not isinstance(self.content, str):
            raise ValueError(f"floor {self.label!r}: content must be a string")
        if self.position not in ("top", "bottom"):
            raise ValueError(
                f"floor {self.label!r}: position must be 'top' or 'bottom', got {self.position!r}"
            )

    @property
    def cost(self) -> int:
        return canonical_token_cost(self.content)

    @classmethod
    def of(cls, value: Floor | Mapping[str, Any] | tuple[Any, ...]) -> Floor:
        """A floor from itself, a ``{label, content, position?}`` dict or a tuple."""
        if isinstance(value, Floor):
            return value
        if isinstance(value, Mapping):
            unknown = sorted(set(map(str, value)) - {"label", "content", "position"})
            if unknown:
                raise ValueError(f"a floor has unknown member(s) {unknown}")
            if "label" not in value or "content" not in value:
                raise ValueError("a floor needs a label and a content")
            return cls(value["label"], value["content"], value.get("position", "top"))
        if isinstance(value, tuple) and len(value) in (2, 3):
            return cls(*value)
        raise ValueError(f"cannot read a floor from {type(value).__name__}")


def _check_budget(budget: object) -> int:
    if isinstance(budget, bool) or not isinstance(budget, int | float):
        raise ValueError(f"budget must be an integer, got {type(budget).__name__}")
    if isinstance(budget, float):
        if not math.isfinite(budget) or not budget.is_integer():
            raise ValueError(f"budget must be a whole, finite number, got {budget!r}")
        budget = int(budget)
    if budget < 0:
        raise ValueError(f"budget must not be negative, got {budget}")
    return budget


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


def compose_for_prompt(
    frames: Iterable[FramePair],
    budget: int,
    *,
    strategy: Strategy | str | Mapping[str, Any] | None = None,
    placement: str = "edges",
    floors: Iterable[Floor | Mapping[str, Any] | tuple[Any, ...]] = (),
    caps: Mapping[str, float] | None = None,
    excluded: Iterable[tuple[FrameId, str, Mapping[str, Any]]] = (),
    verification: Mapping[FrameId, Mapping[str, Any]] | None = None,
) -> ComposedPrompt:
    """Compose ``(provider_id, frame)`` pairs into a fenced, cited, audited prompt.

    - ``strategy``: a ranking policy (``DEFAULT_STRATEGY`` when None), or its
      client API form (``"round_robin"``, ``{"quota": 2}``, …; see
      ``strategy_from_wire``).
    - ``placement``: one of ``PLACEMENTS``, applied to the included frames.
    - ``floors``: admitted before ranking; if the preamble and the fenced floors
      alone cost more than ``budget``, ``FloorsExceedBudget`` names each
      floor's cost.
    - ``caps``: provider id (or ``"*"`` for every provider not named) → share in
      [0, 1] of the budget left after the preamble and floors; a provider's
      included blocks never cost more than ``floor(share * remainder)`` tokens.
    - ``excluded``: ``(FrameId, reason, detail)`` dropped by earlier stages
      (quarantine, invalid frame, digest mismatch, stale …); each becomes one
      excluded audit entry with that reason and a copy of its detail.
    - ``verification``: FrameId → small JSON dict copied into that frame's
      included entry (``{"state": "unchecked"}`` when absent); a frame whose
      ``state`` is ``"unverifiable"`` is fenced with ``verified="no"``.

    The prompt is a pure function of the frame *set* (and the arguments): any
    order of the same frames gives the same bytes. Its canonical cost is
    ``tokens_used``, never above ``budget``; a composition with nothing to show
    (no floor, no frame that fits, e.g. a budget below the preamble's cost) is
    the empty prompt, with every frame in the audit as ``over_budget``.
    """
    budget = _check_budget(budget)
    if strategy is None:
        strategy = DEFAULT_STRATEGY
    elif isinstance(strategy, str | Mapping):  # a client API value, e.g. {"quota": 2}
        strategy = strategy_from_wire(strategy)
    placement = check_placement(placement)

    # Floors first (before ranking): their labels claimed first, their fenced
    # blocks counted with the preamble; if those alone overflow, fail loudly.
    labels = Labels()
    floor_blocks: list[tuple[str, str]] = []
    floor_records: list[FloorRecord] = []
    for f in (Floor.of(f) for f in floors):
        label = labels.claim(f.label)
        block = render_floor(label, f.content, f.position)
        floor_blocks.append((block, f.position))
        floor_records.append(FloorRecord(label, f.position, tokens_of_bytes(utf8_size(block))))
    floor_labels = frozenset(labels.taken)
    fixed = PREAMBLE_BYTES + sum(utf8_size(b) for b, _ in floor_blocks)
    if floor_blocks and tokens_of_bytes(fixed) > budget:
        raise FloorsExceedBudget(
            [(r.label, r.tokens) for r in floor_records],
            budget,
            preamble=tokens_of_bytes(PREAMBLE_BYTES),
            total=tokens_of_bytes(fixed),
        )
    caps_by_provider = _cap_tokens(caps, max(0, budget - tokens_of_bytes(fixed)))

    pairs = frames if isinstance(frames, list | tuple) else list(frames)
    # Every field the walk needs is read from each model once, in one pass.
    pool, contents, provenances = CandidateSet.with_columns(pairs)
    rows: list[Row] = []

    # Earlier stages' exclusions: one entry each, reason as given.
    for item in excluded:
        fid, reason, detail = item
        if not isinstance(fid, FrameId):
            raise ValueError(f"excluded entries are (FrameId, reason, detail), got {fid!r}")
        if not isinstance(reason, str) or not reason:
            raise ValueError(f"excluded {fid}: reason must be a non-empty string")
        rows.append(
            (fid.sort_key, reason, dict(detail) if detail else {}, None, None, None, None, None, ())
        )

    # Cross-provider dedup (D2): the losers are excluded as duplicates of the survivor.
    deduped = dedup_pool(pool, provenances)
    cands = deduped.kept
    in_key = pool.key
    for d, k in deduped.drops:
        rows.append((in_key(d), "duplicate", in_key(k), None, pool.scores[d], None, None, None, ()))
    c_contents = contents if not deduped.drops else pick_from(deduped.origin)(contents)
    c_frames = cands.frames
    c_pids = cands.provider_ids

    order = rank_with(strategy, cands)

    def verified(i: int) -> bool:
        if not verification:
            return True
        state = verification.get(frame_id_of_key(cands.key(i)))
        return state is None or state.get("state") != UNVERIFIABLE

    def render(i: int, label: str) -> str:
        return render_frame(c_pids[i], c_frames[i], label, verified=verified(i))

    # Pack: the preamble and floors first, then each ranked frame whose fenced
    # block keeps the whole prompt within the budget (B3 of the prompt).
    packing = pack(
        order,
        c_frames,
        c_pids,
        [len(c) if c else 0 for c in c_contents],  # a reference frame has no content (P3)
        fixed=fixed,
        budget=budget,
        labels=labels,
        caps=caps_by_provider,
        render=render,
    )

    def skipped_rows() -> list[Row]:
        # Built only when the audit is read. A skipped frame is costed as the
        # block it would have been when the walk reached it: its label as made
        # unique then, and the room the prompt had after the last inclusion
        # ranked above it (never below 0). Scores come from the pool column
        # (NaN read as -inf); both go to the wire as null.
        replay = Labels(set(floor_labels))
        peek, key, scores, capped = replay.peek, cands.key, cands.scores, packing.capped
        out: list[Row] = []
        start = 0
        # Between two inclusions the room left and the labels taken stay the same.
        for j, stop in enumerate([*packing.ranks, len(order)]):
            used = packing.used_after[j - 1] if j else fixed
            remaining = max(0, budget - tokens_of_bytes(used))
            for rank in range(start, stop):
                i = order[rank]
                cap = capped.get(rank)
                if cap is None:
                    # Priced, not rendered: nobody reads this block.
                    f = c_frames[i]
                    size = rendered_size(
                        c_pids[i],
                        f,
                        peek(citation_label_for(f)),
                        verified=verified(i) if verification else True,
                    )
                    row: Row = (
                        key(i),
                        "over_budget",
                        remaining,
                        rank,
                        scores[i],
                        None,
                        (size + 3) >> 2,  # tokens_of_bytes, inline
                        None,
                        (),
                    )
                else:
                    row = (key(i), "provider_cap", cap[0], rank, scores[i], None, cap[1], None, ())
                out.append(row)
            if j < len(packing.labels):
                replay.claim(packing.labels[j])
            start = stop + 1
        return out

    placed = place_indices(
        placement,
        list(range(len(packing.chosen))),
        [c_pids[i] for i in packing.chosen],
        lambda j: cands.key(packing.chosen[j]),
    )

    citations: list[Citation] = []
    parts: list[str] = []
    for position, j in enumerate(placed):
        i = packing.chosen[j]
        frame = c_frames[i]
        parts.append(packing.blocks[j])
        key = cands.key(i)
        fid = frame_id_of_key(key)
        citations.append(Citation(packing.labels[j], fid, tuple(frame.provenance)))
        state = verification.get(fid) if verification is not None else None
        rows.append(
            (
                key,
                None,
                None,
                packing.ranks[j],
                frame.score,
                position,
                packing.costs[j],
                dict(state) if state is not None else dict(_UNCHECKED),
                cands.vouched_by(i),
            )
        )

    # Render: preamble, top floors, frames in placement order, bottom floors; an
    # empty composition is an empty prompt (nothing to introduce).
    if parts or floor_blocks:
        prompt = "".join(
            [
                EVIDENCE_PREAMBLE,
                *(b for b, pos in floor_blocks if pos == "top"),
                *parts,
                *(b for b, pos in floor_blocks if pos == "bottom"),
            ]
        )
        tokens_used = tokens_of_bytes(packing.used)
    else:
        prompt = ""
        tokens_used = 0
    assert tokens_used <= budget  # the packer's invariant; a failure here is a bug
    policy: dict[str, Any] = {"strategy": strategy.name, "placement": placement}
    to_wire = getattr(strategy, "to_wire", None)
    if to_wire is not None:
        policy["strategy_params"] = to_wire()
    audit = CompositionAudit(
        rows,
        global_budget=budget,
        tokens_used=tokens_used,
        policy=policy,
        floors=tuple(floor_records),
        more_rows=skipped_rows if len(packing.chosen) < len(order) else None,
    )
    return ComposedPrompt(prompt, tuple(citations), audit)
