"""reStructuredText read by a line scan: its section titles (where a chunk is cut and
what it is called, ``rst_sections``) and the directives that describe an object
(``.. confval:: html_sidebars``, ``.. py:function:: build(app)``: ``rst_directives``),
which define a name as a ``def`` does in code.

No parser, as for code (``_items``): a title is a line of text under a blank line (or
the file's first line) with an underline below it, and optionally an overline above
it, of one punctuation character repeated at least as far as the title reaches (the
overline and the underline the same), both at column 0; its level is the order in
which its style (the character, with or without an overline) first appears in the
file, as docutils reads it. A line of punctuation with a blank line above it and no
title under it (a transition), or one with spaces in it (a simple table's border), is
no title. An object directive holds the lines after it that are indented deeper than
its ``..``, as a directive's body is. What this cannot see (a title docutils would
reject for a reason of its own, a literal block written flush left after ``::``) moves
a cut or a label, never a chunk's bounds or bytes.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

__all__ = ["RST_SUFFIXES", "directive_heads", "rst_directives", "rst_sections", "rst_titles"]

#: The suffixes of reStructuredText files.
RST_SUFFIXES = frozenset({".rst", ".rest"})
#: A title is cut to this many characters: a label, not evidence.
_MAX_TITLE = 80
#: A parent title before a repeated one (``Options for HTML output › Example``) is cut
#: to this many characters.
_MAX_PARENT = 32
#: Between a repeated title's parent and itself, as between an item's levels.
_SEPARATOR = " › "
#: One printable ASCII punctuation character repeated, at column 0, alone on its line
#: (docutils' adornment characters); two at least, so a lone ``-`` (an empty list
#: item) is no underline.
_ADORNMENT_RE = re.compile(r"([!-/:-@\[-`{-~])\1+[ \t\r]*\n?\Z")
#: A hyperlink target (``.. _html-options:``): it names the title below it, so it
#: starts that title's section.
_TARGET_RE = re.compile(rb"\.\.[ \t]+_[^\n]*:[ \t\r]*\n?\Z")
#: The directives that describe an object, in any domain (``py:``, ``c:``, ``rst:``,
#: ``rst:directive:``): what they name is defined where they stand. Admonitions,
#: ``code-block``, ``versionadded`` and the like describe nothing.
_OBJECTS = (
    "confval option envvar describe object program function class method classmethod "
    "staticmethod attribute property data exception decorator decoratormethod type "
    "member macro struct union enum enumerator var directive role event setting"
).split()
_DIRECTIVE_RE = re.compile(
    r"(?P<indent>[ \t]*)\.\.[ \t]+"
    rf"(?P<name>(?:[A-Za-z][\w-]*:){{0,2}}(?:{'|'.join(_OBJECTS)}))[ \t]*::"
    r"[ \t]*(?P<argument>[^\r\n]*?)[ \t\r]*\n?\Z"
)
#: The candidate lines of ``directive_heads``, found in one pass over a text.
_DIRECTIVE_LINES = re.compile(
    rf"^[ \t]*\.\.[ \t]+(?:[A-Za-z][\w-]*:){{0,2}}(?:{'|'.join(_OBJECTS)})[ \t]*::[^\n]*",
    re.MULTILINE,
)
#: An option's own name in its signature: ``--jobs`` of ``--jobs=N``, ``-j N``.
_OPTION_NAME_RE = re.compile(r"[^\s=\[<]+")


def rst_titles(lines: Sequence[bytes]) -> list[tuple[int, int, int, str]]:
    """``(first, last, level, title)`` per section title of ``lines``, in text order:
    its lines (1-indexed, inclusive: overline or title to underline) and its level
    (1 for the style that appears first)."""
    text = [line.decode("utf-8", "replace") for line in lines]
    styles: dict[tuple[str, bool], int] = {}
    found: list[tuple[int, int, int, str]] = []
    i = 0  # from 0
    while i + 1 < len(text):
        if i > 0 and text[i - 1].strip():
            i += 1  # a title follows a blank line (or starts the file)
            continue
        over = _ADORNMENT_RE.match(text[i])
        if over is not None and i + 2 < len(text):
            title, under = text[i + 1].strip(), _ADORNMENT_RE.match(text[i + 2])
            if (
                under is not None
                and under.group(0).rstrip() == over.group(0).rstrip()
                and title
                and _ADORNMENT_RE.match(text[i + 1].lstrip()) is None
                and len(under.group(0).rstrip()) >= len(title)
            ):
                level = styles.setdefault((over.group(1), True), len(styles) + 1)
                found.append((i + 1, i + 3, level, title))
                i += 3
                continue
        under = _ADORNMENT_RE.match(text[i + 1])
        title = text[i].rstrip()
        if (
            under is not None
            and title
            and not title[0].isspace()
            and over is None
            and len(under.group(0).rstrip()) >= len(title)
        ):
            level = styles.setdefault((under.group(1), False), len(styles) + 1)
            found.append((i + 1, i + 2, level, title))
            i += 2
            continue
        i += 1
    return found


def rst_sections(lines: Sequence[bytes]) -> list[tuple[int, int, str | None]]:
    """``(start, end, heading)`` per section, 1-indexed inclusive, as markdown's: each
    from its title (the hyperlink targets right above it included) to the line before
    the next one. The heading is the title; one that names two sections or more
    (``Example`` under each of several options) carries the nearest title of a higher
    level before it (``Options for HTML output › Example``), so a citation tells them
    apart. A section that is its title alone (a page's title right before its first
    sub-title) is no evidence of its own: it opens the section after it, as a markdown
    record's heading does (``_heading_records``)."""
    if not lines:
        return []
    titles = rst_titles(lines)
    named: list[tuple[int, int, str]] = []  # (start, last line, heading) per title
    stack: list[tuple[int, str]] = []  # enclosing (level, title), levels rising
    counts: dict[str, int] = {}
    for _, _, _, title in titles:
        counts[title] = counts.get(title, 0) + 1
    for first, last, level, title in titles:
        while stack and stack[-1][0] >= level:
            stack.pop()
        heading = _clipped(title, _MAX_TITLE)
        if counts[title] > 1 and stack:
            parent = _clipped(stack[-1][1], _MAX_PARENT)
            heading = f"{parent}{_SEPARATOR}{_clipped(title, _MAX_TITLE - len(parent) - 3)}"
        stack.append((level, title))
        named.append((_targets_above(lines, first), last, heading))
    sections: list[tuple[int, int, str | None]] = []
    start, current, text_from = 1, None, 1  # where the current section's text starts
    for at, last, name in named:
        if at > start and any(line.strip() for line in lines[text_from - 1 : at - 1]):
            sections.append((start, at - 1, current))
            start = at
        current, text_from = name, last + 1
    sections.append((start, len(lines), current))
    return sections


def _targets_above(lines: Sequence[bytes], first: int) -> int:
    """Where the section whose title starts on line ``first`` starts: at the first of
    the hyperlink targets just above it (blank lines between them allowed)."""
    start = number = first
    while number > 1:
        number -= 1
        line = lines[number - 1]
        if not line.strip():
            continue
        if _TARGET_RE.match(line) is None:
            break
        start = number
    return start


def _clipped(text: str, most: int) -> str:
    return text if len(text) <= most else text[: max(most, 2) - 1] + "…"


def _head(directive: str, argument: str) -> str | None:
    """What an object directive's label shows: the directive and the object's name
    (``confval html_sidebars``, ``py:method Sphinx.connect``, ``option -j, --jobs``),
    without its signature's parameters; ``None`` when it names nothing."""
    if directive.rsplit(":", 1)[-1] == "option":
        names = [
            m.group(0) for part in argument.split(",") if (m := _OPTION_NAME_RE.match(part.strip()))
        ]
        name = ", ".join(names)
    else:
        name = " ".join(argument.split("(", 1)[0].split())
    return f"{directive} {name}" if name else None


def rst_directives(
    lines: Sequence[bytes],
) -> tuple[dict[int, int], dict[int, tuple[str, ...]]]:
    """Where object directives start and their ``..`` lines (``{start: line}``,
    1-indexed, ascending), and, for each line with text, the heads (``_head``) of the
    directives that hold it, outermost first: a directive's line is in those around
    it, not in itself (the text shows it). A directive starts at the hyperlink targets
    right above it, and at the section title right above it when it is the first thing
    of its section (``_lead_in``), so a cut before it keeps them with it, as a
    decorator stays with its function, and a title is never left at a chunk's end."""
    titles = {last: first for first, last, _, _ in rst_titles(lines)}
    starts: dict[int, int] = {}
    at: dict[int, tuple[str, ...]] = {}
    stack: list[tuple[int, str]] = []  # (indent, head) of the directives open
    for number, raw in enumerate(lines, start=1):
        line = raw.decode("utf-8", "replace")
        if not line.strip():
            continue
        indent = _indent(line)
        while stack and indent <= stack[-1][0]:
            stack.pop()
        at[number] = tuple(head for _, head in stack)
        found = _DIRECTIVE_RE.match(line)
        if found is not None and (head := _head(found.group("name"), found.group("argument"))):
            starts.setdefault(_lead_in(lines, titles, number, indent), number)
            stack.append((indent, head))
    return starts, at


def _lead_in(lines: Sequence[bytes], titles: dict[int, int], number: int, indent: int) -> int:
    """Where the directive on line ``number`` starts: at the first of the hyperlink
    targets above it (blank lines between), and, at column 0, at the title just above
    them and its own targets (``titles``: each title's first line by its last)."""
    start = line = number
    while line > 1:
        line -= 1
        if not lines[line - 1].strip():
            continue
        if _TARGET_RE.match(lines[line - 1].lstrip()) is not None:
            start = line
        elif indent == 0 and line in titles:
            # A title, and the titles above it with nothing between (a page's title
            # right before its first sub-title), and their targets.
            line = start = _targets_above(lines, titles[line])
        else:
            break
    return start


def directive_heads(text: str) -> list[str]:
    """The heads of the object directives that open on the lines of ``text``, in order."""
    heads: list[str] = []
    for line in _DIRECTIVE_LINES.finditer(text):
        found = _DIRECTIVE_RE.match(line.group(0))
        if found is not None and (head := _head(found.group("name"), found.group("argument"))):
            heads.append(head)
    return heads


def _indent(line: str) -> int:
    """A line's indent in columns (a tab to the next multiple of 8)."""
    return len(line[: len(line) - len(line.lstrip())].expandtabs(8))
