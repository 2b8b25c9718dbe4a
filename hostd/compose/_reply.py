"""``compose_reply``: a composition and the reply that carries it, in one call.

A ``context/compose`` reply is the composition's wire form with the caller's members
after its ``audit`` (a fan-out's ``providers``, ``usage``, ``verification``): built
here, right after composing, so the caller asks composition once, and a composition
run in a worker thread (a tokenizer, ``mmr``) writes its reply there too (the
prompt's count in the tokenizer's tokens included), not on the caller's event loop.
The reply's ``usage`` comes back a second time as compact JSON, as the caller keeps it
for ``usage/report`` (UR1: bytes, not an object graph; it lists every served FrameId).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import orjson

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
) -> tuple[ComposedPrompt, dict[str, Any], bytes | None]:
    """``compose_for_prompt(frames, budget, **options)``, its wire form
    (``ComposedPrompt.to_wire(include_content=..., then=...)``: ``then``'s members
    after ``audit``, in their order, taken as they are; a ``usage`` among them gets the
    prompt's size) and that ``usage`` as compact JSON (``None`` without one). Pure."""
    composed = compose_for_prompt(frames, budget, **options)
    reply = composed.to_wire(include_content=include_content, then=then)
    usage = reply.get("usage")
    return composed, reply, None if usage is None else orjson.dumps(usage)
