"""Where the records of a multi-line JSON text are: one per element of its list.

An MCP tool that returns a dict or a list (every Python tool on the SDK) is served as
JSON indented by 2. Cut into runs of lines, such a text splits its objects: a piece
holds the end of one order and the start of the next, and the model reads an order
without its status. ``json_records`` finds the elements' lines instead, so each
element is one record (``_chunk.chunk_text`` then sizes it like any other record).

Only the outer one or two levels are walked here, one value at a time (``_json_walk``,
which the notebook reader walks by too: C speed, each end index exact); nothing
recurses in Python. A value nested deeper than the interpreter's recursion limit makes
the decoder raise ``RecursionError``, and a text over ``MAX_JSON_BYTES`` is not parsed at all: both,
like a text that is not one JSON value (JSON lines, a truncated answer), have no JSON
records and are cut as any other text is.
"""

from __future__ import annotations

import re
from bisect import bisect_left
from typing import Any

from ._json_walk import Element, array, decode, members, skip

__all__ = ["MAX_JSON_BYTES", "json_records"]

#: A text longer than this is not parsed for records: the decoder builds every value
#: of it, several times its size in memory, for what is then cut by lines anyway.
MAX_JSON_BYTES = 1 << 20
#: Members whose value names an element, most telling first (matched without case).
_NAME_KEYS = ("id", "name", "title", "key", "slug")
#: A name longer than this, or one that is not printable on one line, is not used: the
#: element is called by its place instead (``orders[7]``).
_MAX_NAME = 48
_OPENS = re.compile(rb"[ \t\n\r]*[\[{]")


def _elements_or_step(text: str, at: int) -> tuple[list[Element] | None, int]:
    """A member's value as ``members`` reads it for records: an array's elements where
    they are, ``None`` for any other value (only stepped over)."""
    if text.startswith("[", at):
        return array(text, at)
    return None, decode(text, at)[1]


def _name(value: Any, where: str) -> str:
    """What an element is called: its ``id``-like member's value when that is short and
    printable, else its place (``[7]``, ``orders[7]``)."""
    if isinstance(value, dict):
        lowered = {k.lower(): v for k, v in value.items() if isinstance(k, str)}
        for key in _NAME_KEYS:
            name = lowered.get(key)
            if isinstance(name, bool) or not isinstance(name, str | int):
                continue
            text = str(name).strip()
            if text and len(text) <= _MAX_NAME and text.isprintable():
                return text
    return where


def _records(elements: list[Element]) -> bool:
    """Whether a list's elements are records: two or more, every one an object or a
    list (a list of numbers or strings is one value, not records)."""
    return len(elements) >= 2 and all(isinstance(v, dict | list) for _, _, v in elements)


def json_records(data: bytes, lines: int) -> list[tuple[int, int, str]] | None:
    """``(start, end, name)`` per record (1-indexed inclusive lines of ``data``, UTF-8
    of ``lines`` lines), covering every line; ``None`` when it has no JSON records.

    It has records when it is one JSON value spread over lines, a list or an
    object, with a list whose elements are objects or lists (``_records``), each
    starting on a line after the one the element before it ends on: for a list, its
    elements; for an object, the elements of its largest such list member (the most
    elements, the first of equals). A record runs from its element's first line to
    the line before the next element's; the first also holds the lines before it
    (the opening bracket, the object's other members before the list, the list's key)
    and the last the lines after it (the closing brackets and the members after)."""
    if len(data) > MAX_JSON_BYTES or not _OPENS.match(data):
        return None
    text = data.decode("utf-8")
    i = skip(text, 0)
    try:
        if text.startswith("[", i):
            elements, end = array(text, i)
            path = ""
        elif text.startswith("{", i):
            found, end = members(text, i, _elements_or_step)
            candidates = [(k, e) for k, _, e in found if e is not None and _records(e)]
            if not candidates:
                return None
            path, elements = max(candidates, key=lambda c: len(c[1]))
        else:
            return None
    except (ValueError, RecursionError):  # not JSON, or nested past the decoder's bound
        return None
    if skip(text, end) != len(text) or not _records(elements):
        return None
    newlines = [m.start() for m in re.finditer("\n", text)]

    def line(at: int) -> int:  # the 1-indexed line holding character ``at``
        return bisect_left(newlines, at) + 1

    firsts = [line(start) for start, _, _ in elements]
    lasts = [line(stop - 1) for _, stop, _ in elements]
    if any(firsts[k + 1] <= lasts[k] for k in range(len(elements) - 1)):
        return None  # two elements share a line: a line cut cannot part them
    starts = [1, *firsts[1:]]
    ends = [s - 1 for s in firsts[1:]] + [lines]
    names = [_name(v, f"{path}[{k}]") for k, (_, _, v) in enumerate(elements)]
    return list(zip(starts, ends, names, strict=True))
