"""Where a Jupyter notebook's cells are: their text, and the lines of the file that hold it.

A notebook (``.ipynb``) is JSON: read as text, its chunks would quote ``"source": [``,
escaped quotes and ``\\n``, and its outputs' base64 images, which no model can use as
evidence. ``read_notebook`` finds each cell's source instead, as the strings of its
``source`` member, and the lines of the file each string is written on (Jupyter writes
one line of a cell per line of the file), so a chunk of a cell (``_chunk``) can quote
the cell's text and still cite lines of the file: its range addresses the JSON lines
that hold exactly its strings, whose digest a re-read checks (F5, F17), and
``range_text`` derives the text of any range again, so a provider's verify judges it
(V3). A chunk of several small cells (``_chunk``) cites the lines from its first
cell's strings to its last's, and quotes the cells' texts joined (``cells_text``), as
``range_text`` derives them from those lines. Outputs are never read: they are what
the code printed when it last ran, not the project's text, and they are where the
images and the long logs are.

nbformat 4 (every notebook Jupyter has written since 2015) is read, and nbformat 3 (what
IPython 1 and 2 wrote): its cells are in ``worksheets``, a code cell's text is in
``input``, and it too is written one line of a cell per line of the file, so its cells
are cited the same way. Anything else (not JSON, an older format, a cell that is no
object, two cells' sources on one line of the file, as no Jupyter writes them) is
``None``: its cells cannot be cited by lines.
Like ``_json_records``, the JSON is walked one value at a time (``_json_walk``:
positions exact, nothing recursing in Python).
"""

from __future__ import annotations

import re
from bisect import bisect_left
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from hostd.protocol import line_number

from ._json_walk import Element, array, decode, members, skip

__all__ = [
    "NOTEBOOK_SUFFIX",
    "Cell",
    "Notebook",
    "Part",
    "cells_text",
    "range_text",
    "read_notebook",
]

NOTEBOOK_SUFFIX = ".ipynb"
#: The language of a notebook that does not say: Jupyter's own default kernel's.
DEFAULT_LANGUAGE = "python"
#: A language name longer than this, or not a plain name, is not used (it is shown in
#: a citation label): the default is.
_MAX_LANGUAGE = 32
_LANGUAGE_RE = re.compile(r"[A-Za-z][A-Za-z0-9_+#.-]*")
#: The cell types whose text is read, by format: ``{type: (kind, member holding its
#: text)}``. nbformat 3 keeps a code cell's text in ``input``, and has heading cells,
#: which nbformat 4 made markdown (as its upgrade does; the ``#`` marks it adds are not
#: in the file, so the heading's own text is quoted).
_CELL_TYPES: dict[int, dict[str, tuple[str, str]]] = {
    4: {"code": ("code", "source"), "markdown": ("markdown", "source"), "raw": ("raw", "source")},
    3: {
        "code": ("code", "input"),
        "markdown": ("markdown", "source"),
        "raw": ("raw", "source"),
        "heading": ("markdown", "source"),
    },
}
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
    #: ``metadata.language_info.name``, else the first code cell's ``language``, as
    #: nbformat 3 says it, else ``DEFAULT_LANGUAGE``).
    language: str
    #: The cells with any source, in order.
    cells: tuple[Cell, ...]


def _object(text: str, i: int) -> tuple[dict[str, tuple[int, Any]], int]:
    """The members of the object opening at ``text[i]``, each as ``(where its value
    starts, the value)``, and the index past its ``}``; ``ValueError`` when it is none."""
    found, end = members(text, i, decode)
    return {key: (at, value) for key, at, value in found}, end


def _language(metadata: object, cells: list[Element]) -> str:
    """The notebook's language (``Notebook.language``); an nbformat 3 notebook's metadata
    seldom says, its code cells do (``language``), and the first that does is taken."""
    said: list[object] = []
    if isinstance(metadata, dict):
        for key, name in (("kernelspec", "language"), ("language_info", "name")):
            section = metadata.get(key)
            said.append(section.get(name) if isinstance(section, dict) else None)
    said.extend(c.get("language") for _, _, c in cells if c.get("cell_type") == "code")
    for language in said:
        if (
            isinstance(language, str)
            and len(language) <= _MAX_LANGUAGE
            and _LANGUAGE_RE.fullmatch(language)
        ):
            return language.lower()
    return DEFAULT_LANGUAGE


def _cell_elements(text: str, top: dict[str, tuple[int, Any]]) -> tuple[int, list[Element]] | None:
    """The notebook's format and its cells, each where it is in ``text``; ``None`` when
    it is not nbformat 4 (``cells``) or 3 (``worksheets``, each with its ``cells``, read
    in order as one list, as nbformat's upgrade to 4 joins them)."""
    version = top["nbformat"][1] if "nbformat" in top else None
    if version == 4 and "cells" in top:
        return 4, array(text, top["cells"][0])[0]
    if version == 3 and "worksheets" in top:
        cells: list[Element] = []
        for at, _end, sheet in array(text, top["worksheets"][0])[0]:
            if not isinstance(sheet, dict) or "cells" not in sheet:
                return None
            cells.extend(array(text, _object(text, at)[0]["cells"][0])[0])
        return 3, cells
    return None


def read_notebook(data: bytes) -> Notebook | None:
    """The cells of an nbformat 4 or 3 notebook's bytes, or ``None`` when they are not
    one whose cells can be cited by the lines of the file (the module's docstring)."""
    try:
        text = data.decode("utf-8")
        top, end = _object(text, skip(text, 0))
        if skip(text, end) != len(text):
            return None
        found = _cell_elements(text, top)
        if found is None:
            return None
        version, elements = found
        if not all(isinstance(value, dict) for _, _, value in elements):
            return None
        newlines = [m.start() for m in re.finditer("\n", text)]

        def line(at: int) -> int:  # the 1-indexed line holding character ``at``
            return bisect_left(newlines, at) + 1

        cells: list[Cell] = []
        for number, (at, _stop, value) in enumerate(elements, 1):
            kind, member = _CELL_TYPES[version].get(value.get("cell_type"), ("", ""))
            if not kind:
                continue  # a type of a later minor version: nothing known to quote
            source = value.get(member)
            if isinstance(source, str):
                source = [source]
            if not isinstance(source, list) or not all(isinstance(s, str) for s in source):
                return None
            if not "".join(source).strip():
                continue
            fields, _ = _object(text, at)
            source_at = fields[member][0]
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
        return Notebook(_language(metadata, elements), tuple(cells))
    except (UnicodeDecodeError, ValueError, RecursionError):  # not JSON, or nested past bound
        return None


def cells_text(texts: Sequence[str]) -> str:
    """The texts of adjacent cells as one chunk quotes them: each from a line of its
    own, with a blank line between two (a cell's text seldom ends with its newline),
    so code reads as code and markdown paragraphs stay apart."""
    ended = [t if t.endswith("\n") else t + "\n" for t in texts[:-1]]
    return "\n".join([*ended, texts[-1]])


def range_text(notebook: Notebook, range_: str) -> str | None:
    """The text a chunk's range (``L<a>-<b>`` of the file) quotes: of each cell, the
    strings of its source that those lines hold whole, joined, and the cells' texts
    joined as ``cells_text`` joins them; ``None`` when the lines hold none. A chunk's
    text is this text of its range (``_chunk``), so a verify that finds it again has
    found the same chunk."""
    m = _RANGE_RE.fullmatch(range_)
    if m is None:
        return None
    first = line_number(m.group(1))
    last = line_number(m.group(2)) if m.group(2) is not None else first
    held = [(cell, parts) for cell in notebook.cells if (parts := cell.within(first, last))]
    if not held:
        return None
    return cells_text([cell.text[parts[0].start : parts[-1].end] for cell, parts in held])
