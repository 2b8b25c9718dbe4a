"""Walking a JSON text one value at a time, keeping where each value is.

Both readers that cite a JSON text by its lines need positions the ``json`` module
does not give: the records of a tool's answer (``_json_records``: where each element
of its list starts and ends) and the cells of a notebook (``_notebook``: where each
string of a cell's source is). Both walk the same way, here: an array or an object
is stepped through by ``json.JSONDecoder.raw_decode``, one element or member value
at a time, so each value is decoded at C speed with its end index exact and nothing
recurses in Python (a value nested past the interpreter's recursion limit makes the
decoder raise ``RecursionError``, which the readers catch). Anything that is not the
expected array or object is ``ValueError`` (``JSONDecodeError`` is one).
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from typing import Any, TypeVar

__all__ = ["Element", "array", "decode", "members", "skip"]

_WS = re.compile(r"[ \t\n\r]*")
_DECODER = json.JSONDecoder()
_V = TypeVar("_V")

#: ``(start, end, value)``: an element's first and past-the-last character index.
Element = tuple[int, int, Any]


def skip(text: str, i: int) -> int:
    """The index of the first character at or after ``i`` that is not JSON whitespace."""
    match = _WS.match(text, i)
    return match.end() if match else i


def decode(text: str, i: int) -> tuple[Any, int]:
    """The JSON value starting at ``text[i]`` and the index past it."""
    return _DECODER.raw_decode(text, i)


def array(text: str, i: int) -> tuple[list[Element], int]:
    """The elements of the array opening at ``text[i]`` and the index past its ``]``."""
    if not text.startswith("[", i):
        raise ValueError("not an array")
    i = skip(text, i + 1)
    elements: list[Element] = []
    if text.startswith("]", i):
        return elements, i + 1
    closed = False
    while not closed:
        value, end = decode(text, i)
        elements.append((i, end, value))
        i, closed = _after(text, end, "]")
    return elements, i


def members(
    text: str, i: int, value: Callable[[str, int], tuple[_V, int]]
) -> tuple[list[tuple[str, int, _V]], int]:
    """The members of the object opening at ``text[i]``, each ``(key, where its value
    starts, value(text, there))``, in the text's order, and the index past its ``}``.

    ``value`` reads one member's value and returns what to keep of it and the index past
    it: ``decode`` keeps the value itself, a reader that wants an array's elements where
    they are walks it with ``array``."""
    if not text.startswith("{", i):
        raise ValueError("not an object")
    i = skip(text, i + 1)
    found: list[tuple[str, int, _V]] = []
    if text.startswith("}", i):
        return found, i + 1
    closed = False
    while not closed:
        key, i = decode(text, i)
        i = skip(text, i)
        if not isinstance(key, str) or not text.startswith(":", i):
            raise ValueError("not an object")
        at = skip(text, i + 1)
        kept, end = value(text, at)
        found.append((key, at, kept))
        i, closed = _after(text, end, "}")
    return found, i


def _after(text: str, i: int, close: str) -> tuple[int, bool]:
    """Past what follows a value that ends at ``i``: its ``,`` and the whitespace after
    (``False``: another value is next), or the container's ``close`` (``True``)."""
    i = skip(text, i)
    if text.startswith(",", i):
        return skip(text, i + 1), False
    if text.startswith(close, i):
        return i + 1, True
    raise ValueError(f"neither ',' nor {close!r} after a value")
