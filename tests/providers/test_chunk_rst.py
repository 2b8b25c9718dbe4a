"""reStructuredText is chunked as a document: cut at its section titles, each chunk
named by its section, and an object directive (``.. confval::``, ``.. py:function::``)
a definition of its name, as a ``def`` is in code."""

from __future__ import annotations

from pathlib import Path

from hypothesis import given
from hypothesis import strategies as st

from hostd.chunking import (
    chunk_file,
    chunk_text,
    defined_names,
    file_sections,
    item_name,
    split_lines,
)
from hostd.chunking._rst import rst_sections, rst_titles
from hostd.protocol import address_line_range, sha256_digest
from providers._corpus_cache import _CHUNKER_SOURCES


def _titles(text: str) -> list[tuple[int, int, int, str]]:
    return rst_titles(split_lines(text.encode()))


def test_a_title_is_underlined_or_overlined_and_its_level_is_its_styles_first_place() -> None:
    text = (
        "=========\n"  # 1: overlined '=' first: level 1
        " Manual\n"  # an overlined title may be inset
        "=========\n"
        "\n"
        "Install\n"  # 5: underlined '=' is another style: level 2
        "=======\n"
        "\n"
        "Steps\n"  # 8: '-': level 3
        "-----\n"
        "\n"
        "Use\n"  # 11: '=' again: level 2, where it first appeared
        "===\n"
        "\n"
        "Tips\n"
        "~~~~~~~~~\n"  # longer than the title: still an underline
    )
    assert _titles(text) == [
        (1, 3, 1, "Manual"),
        (5, 6, 2, "Install"),
        (8, 9, 3, "Steps"),
        (11, 12, 2, "Use"),
        (14, 15, 4, "Tips"),
    ]


def test_a_line_of_punctuation_that_heads_nothing_is_no_title() -> None:
    text = (
        "A paragraph.\n"
        "\n"
        "----------\n"  # a transition: blank lines around it
        "\n"
        "=====  =====\n"  # a simple table's borders: spaces in them
        "Name   Value\n"
        "=====  =====\n"
        "\n"
        "+------+-----+\n"  # a grid table's: two characters
        "\n"
        "Too long a title\n"
        "-----\n"  # shorter than its title
        "\n"
        "   Indented\n"  # an indented line is no title without an overline
        "   --------\n"
        "\n"
        "A line of text\n"
        "right above\n"
        "===========\n"  # a paragraph's last line, not after a blank line
        "\n"
        "=======\n"
        "Mismatch\n"
        "--------\n"  # overline and underline differ
    )
    assert _titles(text) == []


#: A page in the shape of Sphinx's configuration reference.
PAGE = (
    ".. _config:\n"
    "\n"
    "=============\n"
    "Configuration\n"
    "=============\n"
    "\n"
    "The build reads ``conf.py``.\n"
    "\n"
    ".. _html-options:\n"
    "\n"
    "Options for HTML output\n"
    "-----------------------\n"
    "\n"
    ".. confval:: html_sidebars\n"
    "   :type: :code-py:`dict[str, Sequence[str]]`\n"
    "   :default: :code-py:`{}`\n"
    "\n"
    + "".join(
        f"   Sentence {i} about the templates a sidebar renders, and how globs match.\n"
        for i in range(30)
    )
    + "\n"
    "   .. deprecated:: 1.7\n"
    "      A single string value will be removed.\n"
    "\n"
    "Example\n"
    "~~~~~~~\n"
    "\n"
    "An example of the HTML options: a sidebar of the local table of contents, the\n"
    "relations between pages and the source link, then the quick search box.\n"
    "\n"
    "Options for LaTeX output\n"
    "------------------------\n"
    "\n"
    ".. confval:: latex_engine\n"
    "\n"
    "   The engine that builds the PDF: pdflatex, xelatex, lualatex, platex or\n"
    "   uplatex; xelatex and lualatex read Unicode, pdflatex needs packages for it.\n"
    "\n"
    "Example\n"
    "~~~~~~~\n"
    "\n"
    "An example of the LaTeX options: the engine set to xelatex, the paper size\n"
    "to a4, and a preamble that loads fonts for the languages of the project.\n"
)


def _line(text: str, needle: str) -> int:
    return text[: text.index(needle)].count("\n") + 1


def test_sections_start_at_their_titles_and_their_targets() -> None:
    sections = rst_sections(split_lines(PAGE.encode()))
    assert [(a, heading) for a, _, heading in sections] == [
        (1, "Configuration"),
        (_line(PAGE, ".. _html-options:"), "Options for HTML output"),
        (_line(PAGE, "Example\n"), "Options for HTML output › Example"),
        (_line(PAGE, "Options for LaTeX"), "Options for LaTeX output"),
        (PAGE[: PAGE.rindex("Example\n")].count("\n") + 1, "Options for LaTeX output › Example"),
    ]


def test_a_section_that_is_its_title_alone_opens_the_next() -> None:
    text = "Configuration\n=============\n\nSidebars\n--------\n\nThe sidebar text.\n"
    assert rst_sections(split_lines(text.encode())) == [(1, 7, "Sidebars")]
    directive = "Configuration\n=============\n\n.. _side:\n\nSidebars\n--------\n\n"
    directive += ".. confval:: html_sidebars\n\n" + "   Text of the option.\n" * 30
    chunks = chunk_file(Path("/r/c.rst"), "c.rst", directive.encode())
    # Both titles go with the directive they open: no chunk is a title alone.
    assert chunks[0].start == 1 and ".. confval:: html_sidebars" in chunks[0].text
    assert chunks[0].heading == "Sidebars"


def test_an_rst_chunk_stops_at_the_next_title_and_names_its_section() -> None:
    path, rel, data = Path("/r/doc/configuration.rst"), "doc/configuration.rst", PAGE.encode()
    lines = PAGE.splitlines()
    starts = [a for a, _, _ in rst_sections(split_lines(data))]

    def last_text(line: int) -> int:  # a chunk ends at its last line of text
        while line > 0 and not lines[line - 1].strip():
            line -= 1
        return line

    ends = {last_text(a - 1) for a in starts[1:]} | {last_text(len(lines))}
    for c in chunk_file(path, rel, data, min_tokens=0):
        # No chunk runs past a title into the section after it.
        assert not any(c.start < t <= c.end for t in starts), (c.range, c.heading)
    chunks = chunk_file(path, rel, data)
    for c in chunks:
        # A small section joins its neighbour whole (as markdown's do): a chunk that
        # holds a title holds its section to its end, never the title alone.
        assert all(c.end in ends or c.end < t for t in starts if c.start < t <= c.end)
    latex = [c for c in chunks if "latex_engine" in c.text]
    assert [c.heading for c in latex] == ["Options for LaTeX output"]
    assert lines[latex[0].start - 1] == "Options for LaTeX output"
    assert all(c.kind == "doc" for c in chunks)
    assert chunks[-1].title == "doc/configuration.rst § Options for LaTeX output › Example"


def test_a_chunk_inside_an_option_names_it_and_the_one_opening_it_defines_it() -> None:
    chunks = chunk_file(Path("/r/doc/configuration.rst"), "doc/configuration.rst", PAGE.encode())
    opening = [c for c in chunks if ".. confval:: html_sidebars" in c.text]
    assert len(opening) == 1
    assert defined_names(".rst", opening[0].text) == ["html_sidebars"]
    # A chunk is cut before the directive, as code is before a definition; the title
    # it opens the section under, and that title's target, go with it, so no chunk
    # ends with a title (or the target naming it).
    assert PAGE.splitlines()[opening[0].start - 1] == ".. _html-options:"
    assert "Options for HTML output\n---" in opening[0].text
    inside = [c for c in chunks if "Sentence 29" in c.text or "deprecated" in c.text]
    assert inside and all(c.item == "confval html_sidebars" for c in inside)
    assert all(c.heading == "Options for HTML output" for c in inside)
    assert inside[-1].title.endswith("§ Options for HTML output · in confval html_sidebars")
    assert item_name("confval html_sidebars") == "html_sidebars"


def test_object_directives_define_their_names_and_others_none() -> None:
    text = (
        ".. py:function:: build_main(argv: list[str]) -> int\n"
        "\n"
        "   Build.\n"
        "\n"
        ".. py:class:: Sphinx(srcdir, confdir)\n"
        "\n"
        "   .. py:method:: add_config_value(name, default, rebuild)\n"
        "\n"
        ".. option:: -j N, --jobs N\n"
        ".. envvar:: SPHINX_TEST_TEMPDIR\n"
        ".. rst:directive:option:: maxdepth\n"
        ".. note:: A note names nothing.\n"
        ".. versionadded:: 1.7\n"
        ".. code-block:: python\n"
        ".. confval::\n"  # no argument: nothing
    )
    assert defined_names(".rst", text) == [
        "build_main",
        "Sphinx",
        "add_config_value",
        "jobs",
        "SPHINX_TEST_TEMPDIR",
        "maxdepth",
    ]
    assert defined_names(".REST", text)[:1] == ["build_main"]
    assert defined_names(".txt", text) == []  # only .rst and .rest are read as reST
    nested = text.split(".. option::")[0] + "".join(f"      Line {i}.\n" for i in range(40))
    cut = chunk_text(nested.encode(), "api.rst", 8, min_tokens=0, code_suffix=".rst")
    assert cut[-1].item == "py:class Sphinx › py:method add_config_value"
    assert cut[0].item is None  # a directive's own line is not in it: the text shows it


def test_a_file_is_cut_as_chunk_file_cuts_it() -> None:
    raw = PAGE.encode()
    by_file = chunk_file(Path("/r/conf.rst"), "conf.rst", raw)
    by_text = chunk_text(raw, "conf.rst", sections=file_sections("conf.rst"), code_suffix=".rst")
    assert [(c.start, c.end, c.digest, c.heading, c.item) for c in by_file] == [
        (c.start, c.end, c.digest, c.heading, c.item) for c in by_text
    ]
    assert file_sections("x.rest") == "rst" and file_sections("x.txt") == "none"


def test_a_cache_of_chunks_cut_before_rst_was_read_is_not_served() -> None:
    # The cache's key hashes the chunker's sources: the reST reader is one of them.
    assert any(p.name == "_rst.py" for p in _CHUNKER_SOURCES)


@given(
    st.text(alphabet=st.sampled_from("ab =-~.:_\n"), max_size=600),
    st.integers(1, 9),
    st.integers(8, 80),
    st.integers(0, 40),
)
def test_rst_chunks_cover_its_lines_in_order_without_overlap(
    text: str, window: int, max_tokens: int, min_tokens: int
) -> None:
    data = text.encode("utf-8")
    lines = split_lines(data)
    chunks = chunk_file(
        Path("/r/x.rst"), "x.rst", data, window, max_tokens=max_tokens, min_tokens=min_tokens
    )
    covered: set[int] = set()
    last = 0
    for c in chunks:
        addressed = address_line_range(data, c.range)
        assert c.text.encode("utf-8") == addressed and c.digest == sha256_digest(addressed)
        assert c.end - c.start + 1 <= window
        assert c.start > last  # in order, no overlap
        last = c.end
        covered |= set(range(c.start, c.end + 1))
    assert {i for i, ln in enumerate(lines, 1) if ln.strip()} <= covered
    sections = rst_sections(lines)
    assert [a for a, _, _ in sections][:1] == ([1] if lines else [])
    assert all(b + 1 == a for (_, b, _), (a, _, _) in zip(sections, sections[1:], strict=False))
