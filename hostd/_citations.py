"""The citations of a ``context/compose`` reply as hostd's faces show them: each with
its ``rank`` (0: the best), so ``hostd compose --json`` and ``hostd mcp``'s structured
output carry the same citation fields.

The wire's citations are in prompt order, which the placement decides (``edges``
puts the best first and the next best last), and carry no rank: the audit's
included entries do. A leaf over the reply's dict, imports nothing of hostd, so the
CLI loads it without the MCP SDK.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

__all__ = ["ranked_citations"]


def ranked_citations(result: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The reply's citations, in its order, each with the rank of its audit entry.

    A citation whose entry carries no rank (a daemon older than the audit's ``rank``)
    is left as it is: a rank is never guessed from the prompt order."""
    entries = (result.get("audit") or {}).get("entries") or []
    ranks = {
        _frame_key(e.get("frame")): e["rank"]
        for e in entries
        if e.get("disposition") == "included" and isinstance(e.get("rank"), int)
    }
    citations = []
    for c in result.get("citations") or []:
        rank = ranks.get(_frame_key(c.get("frame")))
        citations.append(c if rank is None else {**c, "rank": rank})
    return citations


def _frame_key(frame: Any) -> tuple[Any, Any, Any]:
    """A FrameId's identity (its members may be absent in an older daemon's reply)."""
    if not isinstance(frame, Mapping):
        return (None, None, None)
    return (frame.get("provider_id"), frame.get("frame_id"), frame.get("content_digest"))
