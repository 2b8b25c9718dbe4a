"""A recorded candidate set as frames again: what replay, eval and credit compose from.

A frame stored without its content becomes a stand-in of the same canonical cost
(B3) with the same identity and regions, which is all ranking, dedup (D2) and
packing read.
"""

from __future__ import annotations

from hostd.protocol import ContextFrame, Provenance

from ._record import Candidate, Recorded

__all__ = ["recorded_frames"]


def _frame(c: Candidate) -> ContextFrame:
    content = c.content
    if content is None and c.cost:
        content = " " * (4 * c.cost)  # B3: ceil(4 * cost / 4) == cost
    return ContextFrame(
        id=c.id,
        kind=c.kind,
        title=c.label if c.title is None else c.title,
        content=content,
        content_digest=c.digest,
        score=c.score,
        token_cost=c.cost,
        provenance=[Provenance(type=t, uri=u, range=r, digest=d) for t, u, r, d in c.regions],
        citation_label=c.label,
    )


def recorded_frames(recorded: Recorded) -> list[tuple[str, ContextFrame]]:
    """The recorded candidate set as frames (stand-ins of the same cost without content)."""
    return [(c.provider, _frame(c)) for c in recorded.candidates]
