"""Line regions of a re-read source (F17) and the labels of merged regions.

``Lines`` (the protocol's ``LineIndex``) cuts a source's bytes at whole lines;
``lines_of`` reads an F17 range;
``Span`` is a candidate whose bytes are known good, as the lines it quotes; and
``merged_label`` says in a label which lines a merged or coalesced block quotes.
Shared by span merging (``_spans``, before ranking) and coalescing (``_coalesce``,
after packing).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache

from hostd.protocol import ContextFrame, LineIndex, line_number

from ._render import citation_label_for

__all__ = ["Lines", "Span", "lines_of", "merged_label", "merged_title", "range_text"]

_RANGE_RE = re.compile(r"L([1-9][0-9]*)(?:-([1-9][0-9]*))?")
#: A label's trailing range token: ``L<a>[-<b>]`` after a non-alphanumeric (or nothing).
_LABEL_RANGE_RE = re.compile(r"(?<![0-9A-Za-z])L([1-9][0-9]*)(?:-([1-9][0-9]*))?\Z")


#: A source's line starts, found once (F17): the protocol's ``LineIndex``, which the
#: verify stage hands over with the bytes it re-read (``sources``), so no line is
#: looked for twice.
Lines = LineIndex


def lines_of(rng: str | None, lines: Lines | None) -> tuple[int, int] | None:
    """The 1-based inclusive lines ``rng`` addresses (F17: the end clamps to the
    source when its length is known; no range is the whole source), or None."""
    if rng is None:
        return None if lines is None else (1, lines.count)
    stated = _stated(rng) if len(rng) <= _CACHED_RANGE_CHARS else _parse(rng)
    if stated is None:
        return None
    start, end = stated
    if lines is not None:
        end = min(end, lines.count)
    return (start, end) if start <= end else None


#: Ranges remembered are short (a few KB of cache at most, whatever a peer sends).
_CACHED_RANGE_CHARS = 24


def _parse(rng: str) -> tuple[int, int] | None:
    """The lines an F17 range states (before any clamping), or None if it is not one."""
    m = _RANGE_RE.fullmatch(rng)
    if m is None:
        return None
    start = line_number(m.group(1))
    return start, line_number(m.group(2)) if m.group(2) is not None else start


#: ``_parse``, remembered: the same few ranges ("L1-40") come back in every
#: composition, and a regex match with two int conversions costs several times the
#: cache's lookup.
_stated = lru_cache(maxsize=4096)(_parse)


@dataclass(slots=True, frozen=True)
class Span:
    """A candidate whose bytes are known good, as the lines it quotes: ``start``-``end``
    of ``uri`` (cut from ``lines``, the source as re-read). ``frame`` and ``own`` are
    what its label is made from (the frame as offered and its own lines: for a merged
    candidate, its best member's), so a wider region is labelled as a merge is."""

    uri: str
    start: int
    end: int
    lines: Lines
    frame: ContextFrame
    own: tuple[int, int]


def range_text(start: int, end: int) -> str:
    return f"L{start}" if start == end else f"L{start}-{end}"


def merged_label(frame: ContextFrame, own: tuple[int, int], rng: str) -> str:
    """``frame``'s citation label (F3) for the merged region ``rng``: its own trailing
    range replaced when it ends with one (compared as lines: ``L12`` is ``L12-12``, and
    the range as stated or as clamped to the source, F17), else ``rng`` appended."""
    label = citation_label_for(frame)
    m = _LABEL_RANGE_RE.search(label)
    if m is not None:
        a = line_number(m.group(1))
        said = (a, line_number(m.group(2)) if m.group(2) is not None else a)
        stated = lines_of(frame.provenance[0].range, None)
        if said in (own, stated):
            return label[: m.start()] + rng
    return f"{label} ({rng})"


def merged_title(frame: ContextFrame, label: str) -> str:
    """``frame``'s title for its merged block, cited as ``label``: a title that starts
    with its own label (``module.py L4-9 · in def load``) starts with ``label``
    instead, so the fence names the merged range, never the member's own; any other
    title (``docs/x.md § Setup``) as it is."""
    own = citation_label_for(frame)
    title = frame.title
    return label + title[len(own) :] if title.startswith(own) else title
