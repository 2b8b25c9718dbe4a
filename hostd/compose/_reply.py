"""``compose_reply``: a composition and the reply that carries it, in one call.

A ``context/compose`` reply is the composition's wire form with the caller's members
after its ``audit`` (a fan-out's ``providers``, ``usage``, ``verification``): built
here, right after composing, so the caller asks composition once, and a composition
run in a worker thread (a tokenizer, ``mmr``) writes its reply there too (the
prompt's count in the tokenizer's tokens included), not on the caller's event loop.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from hostd.protocol import LineIndex

from ._candidates import FramePair
from ._compose import Excluded, Verification, compose_for_prompt
from ._floors import AdmittedFloors, FloorInput
from ._meter import Meter, TokenCounter
from ._result import ComposedPrompt
from ._spans import DEFAULT_MERGE_MAX_RATIO
from .ranking import Strategy

__all__ = ["compose_reply"]


def compose_reply(
    frames: Iterable[FramePair],
    budget: int,
    *,
    include_content: bool = False,
    then: dict[str, Any] | None = None,
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
) -> tuple[ComposedPrompt, dict[str, Any]]:
    """``compose_for_prompt`` (the same arguments after ``include_content`` and
    ``then``) and its wire form, ``ComposedPrompt.to_wire(include_content=...,
    then=...)``: ``then``'s members after ``audit``, in their order, taken as they are;
    a ``usage`` among them gets the prompt's size. Pure. (Each argument is passed on by
    name, not through ``**kwargs``: no dict built per composition.)"""
    composed = compose_for_prompt(
        frames,
        budget,
        strategy=strategy,
        placement=placement,
        floors=floors,
        caps=caps,
        excluded=excluded,
        verification=verification,
        overfetch=overfetch,
        asked=asked,
        sources=sources,
        merge_max_ratio=merge_max_ratio,
        tokenizer=tokenizer,
    )
    return composed, composed.to_wire(include_content=include_content, then=then)
