"""Packing: which ranked candidates fit, counted in the bytes of the prompt itself.

The budget bounds the rendered prompt (B3: ``ceil(utf8 bytes / 4)`` of the
whole of it), so the packer counts what the prompt really holds: the constant
preamble once, each floor's and each frame's fenced block with its attributes.
A block is rendered when its frame is considered, and admitted only if the
prompt with it stays within ``4 * budget`` bytes; the block admitted is the
block later placed, so the count cannot drift from the output.

Labels are made unique here, in rank order (floors first): a label's length
is part of its block's cost, so it has to be known when the block is counted.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

from hostd.protocol import ContextFrame

from ._render import FENCE_MIN_BYTES, citation_label_for, utf8_size

__all__ = ["Labels", "Packing", "pack", "tokens_of_bytes", "utf8_size"]

#: ``provider -> (tokens, share)``, ``"*"`` for every provider not named.
Caps = Mapping[str, tuple[int, float]]
Render = Callable[[int, str], str]


def tokens_of_bytes(n: int) -> int:
    """The canonical token cost (B3) of ``n`` UTF-8 bytes."""
    return (n + 3) >> 2


@dataclass(slots=True)
class Labels:
    """Citation labels handed out so far; a repeat gets a stable ``" #n"`` suffix
    (the smallest ``n >= 2`` not taken), so two blocks are never cited by one label.

    ``taken`` only grows, so the smallest free suffix of a label only grows too:
    ``_next`` remembers where the last search for each label stopped and the next
    one resumes there. Many frames sharing one label cost linear time, not the
    quadratic walk from ``#2`` on every call.
    """

    taken: set[str] = field(default_factory=set)
    _next: dict[str, int] = field(default_factory=dict)

    def peek(self, label: str) -> str:
        taken = self.taken
        if label not in taken:
            return label
        n = self._next.get(label, 2)
        while f"{label} #{n}" in taken:
            n += 1
        self._next[label] = n
        return f"{label} #{n}"

    def claim(self, label: str) -> str:
        out = self.peek(label)
        self.taken.add(out)
        return out


@dataclass(slots=True)
class Packing:
    """What the walk admitted (in rank order) and what it saw on the way.

    ``used_after[j]`` is the prompt's size in bytes once ``chosen[j]`` was in;
    ``capped`` maps the rank of a frame a cap refused to its cap and its cost.
    """

    fixed: int
    chosen: list[int] = field(default_factory=list)
    ranks: list[int] = field(default_factory=list)
    blocks: list[str] = field(default_factory=list)
    labels: list[str] = field(default_factory=list)
    costs: list[int] = field(default_factory=list)
    used_after: list[int] = field(default_factory=list)
    capped: dict[int, tuple[tuple[str, int, float], int]] = field(default_factory=dict)

    @property
    def used(self) -> int:
        return self.used_after[-1] if self.used_after else self.fixed


def pack(
    order: Sequence[int],
    frames: Sequence[ContextFrame],
    provider_ids: Sequence[str],
    lengths: Sequence[int],
    *,
    fixed: int,
    budget: int,
    labels: Labels,
    caps: Caps,
    render: Render,
) -> Packing:
    """Walk ``order`` (best first) and admit each frame whose block still fits.

    ``fixed`` is the bytes the prompt holds before any frame (preamble and
    floors); ``lengths`` each candidate's content length in characters, a lower
    bound of its content's UTF-8 bytes, so a frame that cannot fit is mostly
    passed over without rendering it. Once even the shortest frame cannot fit,
    the walk stops: every frame left is over budget with the same room left.
    """
    capacity = 4 * budget
    out = Packing(fixed)
    used = fixed
    shortest = min(lengths, default=0) + FENCE_MIN_BYTES
    default_cap = caps.get("*")
    spent: dict[str, int] = {}
    for rank, i in enumerate(order):
        if used + shortest > capacity:
            break
        if used + lengths[i] + FENCE_MIN_BYTES > capacity:
            continue
        label = labels.peek(citation_label_for(frames[i]))
        block = render(i, label)
        size = utf8_size(block)
        if used + size > capacity:
            continue
        cost = tokens_of_bytes(size)
        if caps:
            pid = provider_ids[i]
            cap = caps.get(pid, default_cap)
            if cap is not None:
                so_far = spent.get(pid, 0)
                if so_far + cost > cap[0]:
                    out.capped[rank] = ((pid, cap[0], cap[1]), cost)
                    continue
                spent[pid] = so_far + cost
        labels.claim(label)
        used += size
        out.chosen.append(i)
        out.ranks.append(rank)
        out.blocks.append(block)
        out.labels.append(label)
        out.costs.append(cost)
        out.used_after.append(used)
    return out
