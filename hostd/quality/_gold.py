"""Gold passages in frames: whether a frame holds one, and which of its lines do.

A frame holds a gold passage when one of its ``file`` provenance uris (or its
own uri) ends in the gold ``file`` and the gold ``phrase`` is in its content,
whitespace and case folded. ``trim_to_gold`` cuts a frame to the lines the
phrase's first occurrence spans (each gold passage it holds): what a perfect
line judge would keep of it, the ``(trim-oracle)`` row's input (docs/eval.md).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from pathlib import PurePosixPath
from urllib.parse import unquote, urlsplit

from hostd.protocol import ContextFrame, canonical_token_cost, sha256_digest

from ._questions import Gold

__all__ = ["fold", "holds_gold", "trim_to_gold"]

_RANGE_START_RE = re.compile(r"L([1-9][0-9]*)(?:-[1-9][0-9]*)?")


def fold(text: str) -> str:
    """Whitespace runs as one space, ends stripped, case folded."""
    return " ".join(text.split()).casefold()


def _paths(frame: ContextFrame) -> set[str]:
    uris = [p.uri for p in frame.provenance if p.type == "file" and p.uri]
    if frame.uri:
        uris.append(frame.uri)
    return {unquote(urlsplit(u).path) if "://" in u else u for u in uris}


def _same_file(path: str, gold: str) -> bool:
    want = PurePosixPath(gold).parts
    have = PurePosixPath(path).parts
    return len(have) >= len(want) and have[-len(want) :] == want


def _matching(frame: ContextFrame, gold: Iterable[Gold]) -> list[str]:
    """The folded phrases of the gold passages ``frame`` holds, in gold order."""
    content = fold(frame.content or "")
    paths = _paths(frame)
    return [
        phrase
        for g in gold
        if (phrase := fold(g.phrase)) in content and any(_same_file(p, g.file) for p in paths)
    ]


def holds_gold(frame: ContextFrame, gold: Iterable[Gold]) -> bool:
    """Whether ``frame`` quotes one of the gold passages (file and phrase)."""
    return bool(_matching(frame, gold))


def _gold_lines(lines: Sequence[str], phrases: Iterable[str]) -> list[int]:
    """Indices of the lines the first occurrence of each phrase spans, ascending.

    Words never cross a line, and case folding maps each character on its own, so
    the folded text is the non-empty folded lines joined by one space: an
    occurrence's offsets name the lines it touches.
    """
    spans: list[tuple[int, int, int]] = []  # (start, end, line index) in the folded text
    at = 0
    for index, line in enumerate(lines):
        folded = fold(line)
        if folded:
            spans.append((at, at + len(folded), index))
            at += len(folded) + 1
    text = " ".join(fold(line) for line in lines if fold(line))
    kept: set[int] = set()
    for phrase in phrases:
        start = text.find(phrase)
        if start < 0:  # not reached: the caller matched it in the same text
            continue
        end = start + len(phrase)
        kept.update(i for lo, hi, i in spans if lo < end and start < hi)
    return sorted(kept)


def trim_to_gold(frame: ContextFrame, gold: Sequence[Gold]) -> ContextFrame | None:
    """``frame`` cut to its gold lines, or None when it holds no gold passage.

    The cut frame's content is those lines in order (each with its line ending),
    its digest and canonical cost recomputed; its ``file`` provenance range names
    the lines from the first kept to the last (its digest dropped: the cut is a
    derivation, not the region the provider quoted).
    """
    phrases = _matching(frame, gold)
    if not phrases:
        return None
    # F17's lines: LF ends a line (each keeps it), a final unterminated line counts.
    pieces = (frame.content or "").split("\n")
    lines = [piece + "\n" for piece in pieces[:-1]] + ([pieces[-1]] if pieces[-1] else [])
    kept = _gold_lines(lines, phrases)
    if not kept:
        return None
    cut = "".join(lines[i] for i in kept)
    provenance = []
    for p in frame.provenance:
        m = _RANGE_START_RE.fullmatch(p.range) if p.type == "file" and p.range else None
        if m is not None:
            first = int(m.group(1)) + kept[0]
            last = int(m.group(1)) + kept[-1]
            rng = f"L{first}" if first == last else f"L{first}-{last}"
            p = p.model_copy(update={"range": rng, "digest": None})
        elif p.type == "file":
            p = p.model_copy(update={"digest": None})
        provenance.append(p)
    return frame.model_copy(
        update={
            "content": cut,
            "content_digest": sha256_digest(cut.encode("utf-8", "surrogatepass")),
            "token_cost": canonical_token_cost(cut),
            "canonical_token_cost": None,
            "canonical_content_hash": None,
            "provenance": provenance,
        }
    )
