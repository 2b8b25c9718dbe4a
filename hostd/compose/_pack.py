"""Packing: which ranked candidates fit, counted in the bytes of the prompt itself.

The budget bounds the rendered prompt (B3: ``ceil(utf8 bytes / 4)`` of the
whole of it), so the packer counts what the prompt really holds: the constant
preamble once, each floor's and each frame's fenced block with its attributes.
A frame is priced (``rendered_sizes``) when the walk considers it and admitted
only if the prompt with its block stays within ``4 * budget`` bytes; only then
is the block rendered, and the block admitted is the block later placed.

Labels are made unique here, in rank order (floors first): a label's length
is part of its block's cost, so it has to be known when the block is counted.

A frame whose text a block already admitted quotes (another provider's, one of
the two without ``file`` provenance: ``_same_text``) is not admitted: it costs
nothing and takes no room, cap or label.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

from ._meter import CANONICAL, Meter
from ._render import utf8_size
from ._same_text import Quotes

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
    #: Ranks admitted block by block, then dropped when the whole prompt was counted.
    recounted: list[int] = field(default_factory=list)
    #: Candidates whose text an admitted block quotes: candidate -> its admission index.
    contained: dict[int, int] = field(default_factory=dict)

    @property
    def used(self) -> int:
        return self.used_after[-1] if self.used_after else self.fixed


def pack(
    order: Sequence[int],
    provider_ids: Sequence[str],
    labels: Sequence[str],
    sizes: Sequence[int],
    *,
    fixed: int,
    budget: int,
    book: Labels,
    caps: Caps,
    render: Render,
    meter: Meter = CANONICAL,
    quotes: Quotes | None = None,
) -> Packing:
    """Walk ``order`` (best first) and admit each frame whose block still fits.

    ``fixed`` is the bytes the prompt holds before any frame (preamble and
    floors); ``labels`` each candidate's citation label and ``sizes`` the bytes
    of its block under that label (``rendered_sizes``). A repeated label grows
    by its ASCII ``" #n"`` suffix and the block by as many bytes, so a frame is
    priced without rendering it; only an admitted frame is rendered. Once even
    the smallest block cannot fit, the walk stops: every frame left is over
    budget with the same room left. With a tokenizer ``meter``, ``fixed`` and
    ``sizes`` are its tokens, and a block whose label changed is counted again.
    With ``quotes``, a frame whose text an admitted block holds is skipped
    (``Packing.contained``), whether it would fit or not: it is in the prompt.
    """
    capacity = meter.capacity(budget)
    exact = meter is CANONICAL  # bytes add up: a label suffix costs its length
    out = Packing(fixed)
    used = fixed
    smallest = min(sizes, default=0)
    default_cap = caps.get("*")
    spent: dict[str, int] = {}
    peek = book.peek
    for rank, i in enumerate(order):
        if used + smallest > capacity:
            break
        if quotes is not None and out.chosen:
            quoted_by = quotes.container(i)
            if quoted_by is not None:
                out.contained[i] = quoted_by
                continue
        size = sizes[i]
        if used + size > capacity:
            continue
        base = labels[i]
        label = peek(base)
        block: str | None = None
        if label is not base:
            if exact:
                size += len(label) - len(base)  # the suffix is ASCII: one byte a character
            else:
                block = render(i, label)
                size = meter.size(block)
        if used + size > capacity:
            continue
        cost = tokens_of_bytes(size) if exact else meter.tokens(size)
        if caps:
            pid = provider_ids[i]
            cap = caps.get(pid, default_cap)
            if cap is not None:
                so_far = spent.get(pid, 0)
                if so_far + cost > cap[0]:
                    out.capped[rank] = ((pid, cap[0], cap[1]), cost)
                    continue
                spent[pid] = so_far + cost
        book.claim(label)
        used += size
        out.chosen.append(i)
        out.ranks.append(rank)
        out.blocks.append(render(i, label) if block is None else block)
        out.labels.append(label)
        out.costs.append(cost)
        out.used_after.append(used)
        if quotes is not None:
            quotes.admit(i)
    return out
