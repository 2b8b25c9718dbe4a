"""``compose_reply``: a composition and the reply that carries it, in one call.

A ``context/compose`` reply is the composition's wire form with the caller's members
after its ``audit`` (a fan-out's ``providers``, ``usage``, ``verification``): built
here, right after composing, so the caller asks composition once, and a composition
run in a worker thread (a tokenizer, ``mmr``) writes its reply there too (the
prompt's count in the tokenizer's tokens included), not on the caller's event loop.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from ._candidates import FramePair
from ._compose import compose_for_prompt
from ._result import ComposedPrompt

__all__ = ["compose_reply"]


def compose_reply(
    frames: Iterable[FramePair],
    budget: int,
    *,
    include_content: bool = False,
    then: dict[str, Any] | None = None,
    **options: Any,
) -> tuple[ComposedPrompt, dict[str, Any]]:
    """``compose_for_prompt(frames, budget, **options)`` and its wire form
    (``ComposedPrompt.to_wire(include_content=..., then=...)``: ``then``'s members
    after ``audit``, in their order, taken as they are; a ``usage`` among them gets the
    prompt's size). Pure."""
    composed = compose_for_prompt(frames, budget, **options)
    return composed, composed.to_wire(include_content=include_content, then=then)
