"""Floors: content admitted before ranking, priced once as the fenced blocks it becomes.

``check_floors`` is the floors stage of a composition, and the one place a floor
is priced: it hands out the floors' citation labels (floors first), renders their
fenced blocks, counts them with the constant preamble and fails loudly
(``FloorsExceedBudget``) if those alone overflow the budget. The server calls it
before any provider is asked, takes ``contested`` (what the floors leave of the
budget) for the budget split, and passes the same ``AdmittedFloors`` on to
``compose_for_prompt``: priced once, for the split and for the prompt.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from hostd.errors import FloorsExceedBudget
from hostd.protocol import canonical_token_cost

from ._meter import CANONICAL, Meter, TokenCounter, meter_for
from ._pack import Labels
from ._render import EVIDENCE_PREAMBLE, PREAMBLE_BYTES, render_floor
from ._result import FloorRecord

__all__ = ["AdmittedFloors", "Floor", "FloorInput", "check_budget", "check_floors"]


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


def check_budget(budget: object) -> int:
    """``budget`` as a whole number of tokens (a whole float is accepted), or ValueError."""
    if isinstance(budget, bool) or not isinstance(budget, int | float):
        raise ValueError(f"budget must be an integer, got {type(budget).__name__}")
    if isinstance(budget, float):
        if not math.isfinite(budget) or not budget.is_integer():
            raise ValueError(f"budget must be a whole, finite number, got {budget!r}")
        budget = int(budget)
    if budget < 0:
        raise ValueError(f"budget must not be negative, got {budget}")
    return budget


#: What a caller may give as a floor.
FloorInput = Floor | Mapping[str, Any] | tuple[Any, ...]


@dataclass(slots=True, frozen=True)
class AdmittedFloors:
    """The floors of one composition as admitted against ``budget``.

    ``blocks`` are the fenced blocks with their position, in the order given;
    ``records`` what each costs; ``labels`` the citation labels they claimed;
    ``fixed`` the size a prompt holds before any frame: the preamble and the
    blocks (the preamble alone with no floor; an empty prompt holds neither), in
    ``meter``'s unit (bytes for the canonical meter, ``preamble`` the preamble's).
    """

    budget: int
    blocks: tuple[tuple[str, str], ...] = ()
    records: tuple[FloorRecord, ...] = ()
    labels: frozenset[str] = frozenset()
    fixed: int = PREAMBLE_BYTES
    #: The floors as given (so another budget can admit them again).
    given: tuple[Floor, ...] = ()
    #: What the budget counts (``_meter``) and the preamble's size in its unit.
    meter: Meter = CANONICAL
    preamble: int = PREAMBLE_BYTES
    #: What the floors leave of the budget for the frames: the budget less the floors'
    #: fenced blocks (the budget split and the shadow record read it). Worked out once,
    #: here, so admitting the floors and reading what they leave is one call.
    contested: int = field(init=False)

    def __post_init__(self) -> None:
        contested = (
            self.budget
            if not self.blocks
            else max(0, self.budget - self.meter.tokens(self.fixed - self.preamble))
        )
        object.__setattr__(self, "contested", contested)  # frozen: set once, at admission

    @property
    def remainder(self) -> int:
        """The tokens left after the preamble and the floors: what caps are shares of."""
        return max(0, self.budget - self.meter.tokens(self.fixed))

    def labels_taken(self) -> Labels:
        """A fresh label book holding the floors' labels (frames are labelled after them)."""
        return Labels(set(self.labels))


def check_floors(
    floors: Iterable[FloorInput], budget: int, *, tokenizer: TokenCounter | Meter | None = None
) -> AdmittedFloors:
    """The floors admitted against ``budget``: labels, blocks, costs (pure).

    ``tokenizer``: count the budget in that tokenizer's tokens (``str -> int``)
    instead of canonical ones (B3); pass the same one to ``compose_for_prompt``.
    Raises ``FloorsExceedBudget`` (naming each floor's block cost, the preamble's
    and the total) if the preamble and the fenced floors alone cost more than
    ``budget``, and ``ValueError`` for a floor or budget that cannot be read.
    """
    budget = check_budget(budget)
    meter = meter_for(tokenizer)
    if meter is CANONICAL and isinstance(floors, list | tuple) and not floors:
        # No floor (most requests): nothing to label, render or count; the preamble
        # alone, in canonical units, is what the defaults say.
        return AdmittedFloors(budget)
    labels = Labels()
    blocks: list[tuple[str, str]] = []
    records: list[FloorRecord] = []
    given = tuple(map(Floor.of, floors))
    for f in given:
        label = labels.claim(f.label)
        block = render_floor(label, f.content, f.position)
        blocks.append((block, f.position))
        records.append(FloorRecord(label, f.position, meter.tokens(meter.size(block))))
    preamble = PREAMBLE_BYTES if meter is CANONICAL else meter.size(EVIDENCE_PREAMBLE)
    if meter.exact or not blocks:
        fixed = preamble + sum(meter.size(b) for b, _ in blocks)
    else:  # counted whole, as the prompt will be: a tokenizer need not add up
        fixed = meter.size(
            "".join([EVIDENCE_PREAMBLE, *(b for b, pos in blocks if pos == "top")])
            + "".join(b for b, pos in blocks if pos == "bottom")
        )
    if blocks and meter.tokens(fixed) > budget:
        raise FloorsExceedBudget(
            [(r.label, r.tokens) for r in records],
            budget,
            preamble=meter.tokens(preamble),
            total=meter.tokens(fixed),
        )
    taken = frozenset(labels.taken)
    return AdmittedFloors(
        budget, tuple(blocks), tuple(records), taken, fixed, given, meter, preamble
    )
