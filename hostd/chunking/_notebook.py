"""Where a Jupyter notebook's cells are: their text, and the lines of the file that hold it.

A notebook (``.ipynb``) is JSON: read as text, its chunks would quote ``"source": [``,
escaped quotes and ``\\n``, and its outputs' base64 images, which no model can use as
evidence. ``read_notebook`` finds each cell's source instead, as the strings of its
``source`` member, and the lines of the file each string is written on (Jupyter writes
one line of a cell per line of the file), so a chunk of a cell (``_chunk``) can quote
the cell's text and still cite lines of the file: its range addresses the JSON lines
that hold exactly its strings, whose digest a re-read checks (F5, F17), and
``range_text`` derives the text of any range again, so a provider's verify judges it
(V3). Outputs are never read: they are what the code printed when it last ran, not
the project's text, and they are where the images and the long logs are.

Only nbformat 4 (every notebook Jupyter has written since 2015) is read. Anything else
(not JSON, an older format, a cell that is no object, two cells' sources on one line of
the file, as no Jupyter writes them) is ``None``: its cells cannot be cited by lines.
Like ``_json_records``, the JSON is walked one value at a time (``_json_walk``:
positions exact, nothing recursing in Python).
"""

from __future__ import annotations

import re
from bisect import bisect_left
from dataclasses import dataclass
from typing import Any

from hostd.protocol import line_number

from ._json_walk import array, decode, members, skip

__all__ = ["NOTEBOOK_SUFFIX", "Cell", "Notebook", "Part", "range_text", "read_notebook"]

NOTEBOOK_SUFFIX = ".ipynb"
#: The language of a notebook that does not say: Jupyter's own default kernel's.
DEFAULT_LANGUAGE = "python"
#: A language name longer than this, or not a plain name, is not used (it is shown in
#: a citation label): the default is.
_MAX_LANGUAGE = 32
_LANGUAGE_RE = re.compile(r"[A-Za-z][A-Za-z0-9_+#.-]*")
_CELL_KINDS = frozenset({"code", "markdown", "raw"})
_RANGE_RE = re.compile(r"L([1-9][0-9]*)(?:-([1-9][0-9]*))?")


@dataclass(slots=True, frozen=True)
class Part:
    """One string of a cell's ``source``: where it is in the cell's text and the lines
    of the file (1-indexed, inclusive) that hold it."""

    start: int  # character offsets in ``Cell.text``
    end: int
    first_line: int
    last_line: int


@dataclass(slots=True, frozen=True)
class Cell:
    """A cell with text: its place among all the notebook's cells (from 1, as a reader
    counts them down the notebook), its type, and its source joined."""

    number: int
    kind: str  # "code", "markdown" or "raw"
    text: str
    parts: tuple[Part, ...]

    def within(self, first: int, last: int) -> tuple[Part, ...]:
        """Its strings that lines ``first``-``last`` of the file hold whole."""
        return tuple(p for p in self.parts if p.first_line >= first and p.last_line <= last)


@dataclass(slots=True, frozen=True)
class Notebook:
    #: Its code cells' language (``metadata.kernelspec.language``, else
    #: ``metadata.language_info.name``, else ``DEFAULT_LANGUAGE``).
    language: str
    #: The cells with any source, in order.
    cells: tuple[Cell, ...]


def _object(text: str, i: int) -> tuple[dict[str, tuple[int, Any]], int]:
    """The members of the object opening at ``text[i]``, each as ``(where its value
    starts, the value)``, and the index past its ``}``; ``ValueError`` when it is none."""
    found, end = members(text, i, decode)
    return {key: (at, value) for key, at, value in found}, end


def _language(metadata: object) -> str:
    if not isinstance(metadata, dict):
        return DEFAULT_LANGUAGE
    for key, name in (("kernelspec", "language"), ("language_info", "name")):
        section = metadata.get(key)
        said = section.get(name) if isinstance(section, dict) else None
        if isinstance(said, str) and len(said) <= _MAX_LANGUAGE and _LANGUAGE_RE.fullmatch(said):
            return said.lower()
    return DEFAULT_LANGUAGE


def read_notebook(data: bytes) -> Notebook | None:
    """The cells of an nbformat 4 notebook's bytes, or ``None`` when they are not one
    whose cells can be cited by the lines of the file (the module's docstring)."""
    try:
        text = data.decode("utf-8")
        top, end = _object(text, skip(text, 0))
        if skip(text, end) != len(text):
            return None
        version = top["nbformat"][1] if "nbformat" in top else None
        if isinstance(version, bool) or version != 4 or "cells" not in top:
            return None
        cells_at, _ = top["cells"]
        elements, _ = array(text, cells_at)
        newlines = [m.start() for m in re.finditer("\n", text)]

        def line(at: int) -> int:  # the 1-indexed line holding character ``at``
            return bisect_left(newlines, at) + 1

        cells: list[Cell] = []
        for number, (at, _stop, value) in enumerate(elements, 1):
            if not isinstance(value, dict):
                return None
            kind, source = value.get("cell_type"), value.get("source")
            if kind not in _CELL_KINDS:
                continue  # a type of a later minor version: nothing known to quote
            if isinstance(source, str):
                source = [source]
            if not isinstance(source, list) or not all(isinstance(s, str) for s in source):
                return None
            if not "".join(source).strip():
                continue
            fields, _ = _object(text, at)
            source_at = fields["source"][0]
            if text.startswith("[", source_at):
                spans = [(a, b) for a, b, _v in array(text, source_at)[0]]
            else:
                spans = [(source_at, decode(text, source_at)[1])]
            parts, offset = [], 0
            for s, (a, b) in zip(source, spans, strict=True):
                parts.append(Part(offset, offset + len(s), line(a), line(b - 1)))
                offset += len(s)
            if cells and cells[-1].parts[-1].last_line >= parts[0].first_line:
                return None  # two cells on one line: neither can be cited alone
            cells.append(Cell(number, kind, "".join(source), tuple(parts)))
        metadata = top["metadata"][1] if "metadata" in top else None
        return Notebook(_language(metadata), tuple(cells))
    except (UnicodeDecodeError, ValueError, RecursionError):  # not JSON, or nested past bound
        return None


def range_text(notebook: Notebook, range_: str) -> tuple[Cell, str] | None:
    """The cell a chunk's range (``L<a>-<b>`` of the file) quotes and the text it quotes:
    the strings of its source that those lines hold whole, joined; ``None`` when the
    lines hold none. A chunk's text is this text of its range (``_chunk``), so a verify
    that finds it again has found the same chunk."""
    m = _RANGE_RE.fullmatch(range_)
    if m is None:
        return None
    first = line_number(m.group(1))
    last = line_number(m.group(2)) if m.group(2) is not None else first
    for cell in notebook.cells:
        held = cell.within(first, last)
        if held:
            return cell, cell.text[held[0].start : held[-1].end]
    return None
