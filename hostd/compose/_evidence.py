"""The evidence itself: the included frames' own content, for clients that ask.

The prompt quotes each frame fenced and neutralised (R3), so it is the wrong place
to read a frame's content back from. A composition keeps the frames it showed, in
prompt order, beside their citations; ``evidence_dicts`` lays them out as the
``evidence`` member of the wire form, only when the client asked for it
(``include_content``): a client that wants only the prompt pays nothing.

Each item is the frame as its provider sent it (``content`` unescaped, never the
fenced text) with what the composition decided about it (its label, rank and
verification, read from its audit entry), so a client needs no second lookup.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from hostd.protocol import ContextFrame, sha256_digest

__all__ = ["evidence_dicts"]


def _uri_and_range(frame: ContextFrame) -> tuple[str | None, str | None]:
    """The frame's ``uri`` (else its first provenance's) and the line range that
    provenance gives for it: where the content came from, as one pair. A frame that
    names no URI anywhere (a piece of an MCP tool's answer) still has the range its
    first provenance with one gives: the lines of the text it was cut from."""
    uri = frame.uri
    for prov in frame.provenance:
        if prov.uri is not None and (uri is None or prov.uri == uri):
            return prov.uri, prov.range
    if uri is None:  # no provenance names a URI either
        return None, next((p.range for p in frame.provenance if p.range is not None), None)
    return uri, None


def evidence_dicts(
    labels: Sequence[str],
    frames: Sequence[tuple[str, ContextFrame]],
    entries: Iterable[Mapping[str, Any]],
) -> list[dict[str, Any]]:
    """One JSON-ready item per included frame, in prompt order.

    ``labels[p]`` and ``frames[p]`` are the citation label and ``(provider_id,
    frame)`` shown at position ``p``; ``entries`` are the audit's wire entries,
    whose included ones carry that ``position``. ``content_digest`` is computed
    here from the content's UTF-8 bytes, so it always names exactly the text sent.
    """
    by_position = {e["position"]: e for e in entries if e.get("disposition") == "included"}
    out: list[dict[str, Any]] = []
    for position, (label, (provider_id, frame)) in enumerate(zip(labels, frames, strict=True)):
        entry = by_position.get(position, {})
        content = frame.content
        uri, range_ = _uri_and_range(frame)
        out.append(
            {
                "label": label,
                "provider_id": provider_id,
                "frame_id": frame.id,
                "kind": frame.kind,
                "title": frame.title,
                "uri": uri,
                "range": range_,
                "content": content,
                "content_digest": (
                    None
                    if content is None
                    else sha256_digest(content.encode("utf-8", "surrogatepass"))
                ),
                "score": entry.get("score"),
                "rank": entry.get("rank"),
                "verification": entry.get("verification"),
                "valid_from": frame.valid_from,
                "valid_to": frame.valid_to,
            }
        )
    return out
