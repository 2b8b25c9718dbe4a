"""``compose_for_prompt``: dedup → rank → floors, caps and packing → place → render.

The one entry point for every strategy. Floors are admitted first and fail
loudly if they alone exceed the budget; caps bound each provider's share of
what remains; the packer walks the ranked survivors and includes a frame only
while its *canonical* token cost (B3: ``ceil(utf8 bytes / 4)`` of its content,
not the cost it declared) fits. Every offered frame — including those earlier
pipeline stages already excluded — ends in the audit exactly once.
"""

from __future__ import annotations

import functools
import gc
import math
from bisect import bisect_left
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from itertools import islice
from typing import Any, Literal, ParamSpec, TypeVar

from hostd.errors import FloorsOverBudget
from hostd.protocol import FrameId, canonical_token_cost

from ._audit import Citation, ComposedPrompt, CompositionAudit, FloorRecord, Row
from ._candidates import CandidateSet, FramePair, frame_id_of_key, pick_from
from ._dedup import dedup_pool
from ._placement import check_placement, place_indices
from ._render import EVIDENCE_PREAMBLE, citation_label_for, render_floor, render_frame
from .ranking import DEFAULT_STRATEGY, Strategy, rank_with, strategy_from_wire

__all__ = ["Floor", "FloorsExceedBudget", "compose_for_prompt"]

_UNCHECKED: Mapping[str, Any] = {"state": "unchecked"}


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


class FloorsExceedBudget(FloorsOverBudget, ValueError):
    """The floors alone cost more than the budget; nothing is dropped silently.

    ``floors`` lists ``(label, cost)`` for every floor, ``budget`` and ``total``
    the two numbers that disagree.
    """

    reason = "floors_exceed_budget"

    def __init__(self, floors: list[tuple[str, int]], budget: int) -> None:
        total = sum(cost for _, cost in floors)
        detail = ", ".join(f"{label!r} costs {cost}" for label, cost in floors)
        super().__init__(
            f"floors cost {total} tokens but the budget is {budget} ({detail})",
            floors=[{"label": label, "cost": cost} for label, cost in floors],
            budget=budget,
            total=total,
        )
        self.floors = floors
        self.budget = budget
        self.total = total


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


_P = ParamSpec("_P")
_R = TypeVar("_R")


def _collector_paused(fn: Callable[_P, _R]) -> Callable[_P, _R]:
    """Run ``fn`` with the cyclic garbage collector paused (restored, also on error)."""

    @functools.wraps(fn)
    def paused(*args: _P.args, **kwargs: _P.kwargs) -> _R:
        was_enabled = gc.isenabled()
        if was_enabled:
            gc.disable()
        try:
            return fn(*args, **kwargs)
        finally:
            if was_enabled:
                gc.enable()

    return paused


@_collector_paused
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
    - ``floors``: admitted before ranking at their canonical cost; if they alone
      exceed ``budget``, ``FloorsExceedBudget`` names each floor's cost.
    - ``caps``: provider id (or ``"*"`` for every provider not named) → share in
      [0, 1] of the budget left after floors; a provider's included frames never
      cost more than ``floor(share * remainder)`` tokens.
    - ``excluded``: ``(FrameId, reason, detail)`` dropped by earlier stages
      (quarantine, invalid frame, digest mismatch, stale …); each becomes one
      excluded audit entry with that reason and a copy of its detail.
    - ``verification``: FrameId → small JSON dict copied into that frame's
      included entry (``{"state": "unchecked"}`` when absent).

    The prompt is a pure function of the frame *set* (and the arguments): any
    order of the same frames gives the same bytes.

    The cyclic garbage collector is paused for the call (and restored, also on
    error): composing makes no garbage cycles of its own (any a third-party
    policy leaves are collected once the collector resumes), and at 100k
    candidates each collection it would otherwise trigger walks the big
    candidate columns and the models behind them, which made the cost grow
    faster than the input.
    """
    budget = _check_budget(budget)
    if strategy is None:
        strategy = DEFAULT_STRATEGY
    elif isinstance(strategy, str | Mapping):  # a client API value, e.g. {"quota": 2}
        strategy = strategy_from_wire(strategy)
    placement = check_placement(placement)

    # Floors first (before ranking): they cost their canonical tokens, and fail loudly.
    floor_list = [Floor.of(f) for f in floors]
    floor_costs = [(f.label, f.cost) for f in floor_list]
    floors_total = sum(cost for _, cost in floor_costs)
    if floors_total > budget:
        raise FloorsExceedBudget(floor_costs, budget)
    contested = budget - floors_total
    caps_by_provider = _cap_tokens(caps, contested)
    default_cap = caps_by_provider.get("*")

    pairs = frames if isinstance(frames, list | tuple) else list(frames)
    # Every field the hot path needs is read from each model once, in one pass.
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
        rows.append(
            (
                in_key(d),
                "duplicate",
                in_key(k),
                None,
                pool.scores[d],
                None,
                canonical_token_cost(contents[d]),
                None,
                (),
            )
        )
    c_contents = contents if not deduped.drops else pick_from(deduped.origin)(contents)

    order = rank_with(strategy, cands)

    # Pack: walk the ranked survivors, include each whose canonical cost fits.
    # ceil(chars / 4) never exceeds a frame's canonical cost (a UTF-8 character is
    # at least one byte), so most misses are decided without encoding, and once
    # even the cheapest frame still ahead cannot fit, the walk stops: every
    # frame from there on is over budget with the same tokens remaining. The
    # walk starts from the cheapest candidate overall (one C-level pass, no
    # per-rank table); a long stretch with nothing included tightens that to the
    # cheapest frame actually ahead, at doubling intervals, so an early stop
    # never costs more than O(n log n) C-level steps.
    c_pids = cands.provider_ids
    try:
        lengths = list(map(len, c_contents))
    except TypeError:  # a reference frame carries no inline content (P3)
        lengths = [len(c) if c else 0 for c in c_contents]
    cheapest = min(lengths, default=0)  # never above the cheapest frame still ahead
    exact_until = -1  # up to this rank, ``cheapest`` is exactly the cheapest ahead
    stretch = 256
    remaining = contested
    used_by: dict[str, int] = {}
    chosen: list[int] = []
    chosen_rank: dict[int, int] = {}
    costs: dict[int, int] = {}
    included_ranks: list[int] = []  # with the tokens remaining after each inclusion
    remaining_after: list[int] = []
    capped: dict[int, tuple[str, int, float]] = {}
    cost_of = canonical_token_cost
    last_included = -1
    for rank, i in enumerate(order):
        if (cheapest + 3) >> 2 > remaining:
            break
        if rank - last_included > stretch and rank > exact_until:
            # The cheapest ahead cannot change before the walk passes its last
            # occurrence, so until then no pass over the rest is repeated.
            ahead = list(map(lengths.__getitem__, islice(order, rank, None)))
            cheapest = min(ahead)
            ahead.reverse()
            exact_until = rank + len(ahead) - 1 - ahead.index(cheapest)
            stretch *= 2
            if (cheapest + 3) >> 2 > remaining:
                break
        length = lengths[i]
        if length:
            if (length + 3) >> 2 > remaining or (cost := cost_of(c_contents[i])) > remaining:
                continue
        else:
            cost = 0
        if caps_by_provider:
            pid = c_pids[i]
            cap = caps_by_provider.get(pid, default_cap)
            if cap is not None:
                spent = used_by.get(pid, 0)
                if spent + cost > cap[0]:
                    capped[rank] = (pid, cap[0], cap[1])
                    continue
                used_by[pid] = spent + cost
        remaining -= cost
        chosen.append(i)
        chosen_rank[i] = rank
        costs[i] = cost
        included_ranks.append(rank)
        remaining_after.append(remaining)
        last_included = rank

    def skipped_rows() -> list[Row]:
        # Built only when the audit is read. A skipped frame saw the tokens left
        # after the last inclusion ranked above it. Scores come from the pool
        # column (NaN read as -inf); both go to the wire as null.
        key = cands.key
        scores = cands.scores
        taken = set(included_ranks)
        rows: list[Row] = []
        for rank in range(len(order)):
            if rank in taken:
                continue
            i = order[rank]
            before = bisect_left(included_ranks, rank)
            left = remaining_after[before - 1] if before else contested
            cap = capped.get(rank)
            rows.append(
                (
                    key(i),
                    "over_budget" if cap is None else "provider_cap",
                    left if cap is None else cap,
                    rank,
                    scores[i],
                    None,
                    cost_of(c_contents[i]),
                    None,
                    (),
                )
            )
        return rows

    placed = place_indices(placement, chosen, c_pids, cands.key)

    # Render: preamble, top floors, frames in placement order, bottom floors.
    parts = [EVIDENCE_PREAMBLE]
    labels_taken: set[str] = set()

    def unique_label(label: str) -> str:
        # Two blocks with one label could not be told apart by a citation, so a
        # repeated label gets a stable " #n" suffix: floors claim theirs first,
        # then frames in render order.
        if label not in labels_taken:
            labels_taken.add(label)
            return label
        n = 2
        while f"{label} #{n}" in labels_taken:
            n += 1
        out = f"{label} #{n}"
        labels_taken.add(out)
        return out

    floor_records: list[FloorRecord] = []
    bottom: list[str] = []
    for f in floor_list:
        label = unique_label(f.label)
        block = render_floor(label, f.content, f.position)
        (parts if f.position == "top" else bottom).append(block)
        floor_records.append(FloorRecord(label, f.position, f.cost))

    citations: list[Citation] = []
    frames_used = 0
    c_frames = cands.frames
    for position, i in enumerate(placed):
        frame = c_frames[i]
        pid = c_pids[i]
        label = unique_label(citation_label_for(frame))
        parts.append(render_frame(pid, frame, label))
        key = cands.key(i)
        fid = frame_id_of_key(key)
        citations.append(Citation(label, fid, tuple(frame.provenance)))
        cost = costs[i]
        frames_used += cost
        state = verification.get(fid) if verification is not None else None
        rows.append(
            (
                key,
                None,
                None,
                chosen_rank[i],
                frame.score,
                position,
                cost,
                dict(state) if state is not None else dict(_UNCHECKED),
                cands.vouched_by(i),
            )
        )
    parts.extend(bottom)

    tokens_used = floors_total + frames_used
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
        more_rows=skipped_rows if len(chosen) < len(order) else None,
    )
    return ComposedPrompt("".join(parts), tuple(citations), audit)
