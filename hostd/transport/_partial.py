"""An answer a binding put together from several calls of its own: some failed, or none
gave anything.

An MCP provider's leg reads its resources and calls every configured tool; a read or
a tool that fails or runs out of time costs only its own results, and the leg answers
with the others' (``hostd.mcp``).
What it lost is still the leg's to report: its ``note``, the composition's
``provider_partial`` reason, the provider's health. ``PartialResult`` carries that
from the binding to the engine. A binding builds it, never a peer's reply (replies
are read as plain ``ContextQueryResult``), and it is never written to a peer either:
its own fields are left out of every dump. ``EmptyResult`` is the same for an answer
that lost nothing and yet holds no frame: the binding knows why (nothing it is
configured to read matched the goal), and says so in the leg's note.
"""

from __future__ import annotations

from pydantic import Field

from hostd.protocol import ContextQueryResult

__all__ = ["EmptyResult", "PartialResult"]


class PartialResult(ContextQueryResult):
    """A ``ContextQueryResult`` missing what some of the binding's own calls should
    have given."""

    #: What was lost, for the leg's ``note``: hostd's own words, never a peer's text.
    lost: str = Field(exclude=True)
    #: How, as short codes (``timeout``, ``isError``, ``error``, ``protocol_fault``):
    #: the composition's ``provider_partial`` detail.
    causes: tuple[str, ...] = Field(exclude=True)


class EmptyResult(ContextQueryResult):
    """A ``ContextQueryResult`` with no frame, none lost: every call answered, and
    nothing it gave matched the goal."""

    #: Why, for the leg's ``note``: hostd's own words, never a peer's text.
    why: str = Field(exclude=True)
