"""An answer a binding put together from several calls of its own, some of which failed.

An MCP provider's leg reads its resources and calls every configured tool; a read or
a tool that fails or runs out of time costs only its own results, and the leg answers
with the others' (``hostd.mcp``).
What it lost is still the leg's to report: its ``note``, the composition's
``provider_partial`` reason, the provider's health. ``PartialResult`` carries that
from the binding to the engine. A binding builds it, never a peer's reply (replies
are read as plain ``ContextQueryResult``), and it is never written to a peer either:
its own fields are left out of every dump.
"""

from __future__ import annotations

from pydantic import Field

from hostd.protocol import ContextQueryResult

__all__ = ["PartialResult"]


class PartialResult(ContextQueryResult):
    """A ``ContextQueryResult`` missing what some of the binding's own calls should
    have given."""

    #: What was lost, for the leg's ``note``: hostd's own words, never a peer's text.
    lost: str = Field(exclude=True)
    #: How, as short codes (``timeout``, ``isError``, ``error``, ``protocol_fault``):
    #: the composition's ``provider_partial`` detail.
    causes: tuple[str, ...] = Field(exclude=True)
