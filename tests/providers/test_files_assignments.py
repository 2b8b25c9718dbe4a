"""A module-level value over several lines (``extensions = [``) is an item of the
``files`` chunker as a function is: not cut from its items when it fits, and a chunk
inside it names it in its fence."""

from __future__ import annotations

import re
from pathlib import Path

from hostd.chunking import chunk_frame
from hostd.compose import render_frame
from providers import CorpusOptions
from providers.files import FileIndex

#: A build configuration's head, as sphinx's ``doc/conf.py`` has it: cut as lines of no
#: item, its chunk ended on ``extensions = [`` and the next one held the list's items,
#: which never say ``extensions``.
_CONF = """\
# Documentation build configuration file
from __future__ import annotations

import os
import re
from typing import TYPE_CHECKING

from sphinx import __display_version__

os.environ['SPHINX_AUTODOC_RELOAD_MODULES'] = '1'

extensions = [
    'sphinx.ext.autodoc',
    'sphinx.ext.doctest',
    'sphinx.ext.todo',
    'sphinx.ext.autosummary',
    'sphinx.ext.extlinks',
    'sphinx.ext.intersphinx',
    'sphinx.ext.viewcode',
    'sphinx.ext.inheritance_diagram',
    'sphinx.ext.coverage',
    'sphinx.ext.graphviz',
]
coverage_statistics_to_report = coverage_statistics_to_stdout = True
templates_path = ['_templates']
exclude_patterns = ['_build']

project = 'Sphinx'
copyright = '2007-%Y, the Sphinx developers'
release = version = __display_version__
show_authors = True
nitpicky = True
show_warning_types = True
"""


def _index(root: Path) -> FileIndex:
    ix = FileIndex(CorpusOptions(root=root), refresh_interval_s=0.0, refresh_wait_s=60)
    ix.refresh(force=True)
    return ix


def test_a_query_for_an_assignments_name_finds_the_chunk_with_its_items(tmp_path: Path) -> None:
    (tmp_path / "conf.py").write_text(_CONF)
    hits = _index(tmp_path).search("extensions")
    assert hits, "no chunk matched"
    found = hits[0].chunk
    assert "extensions = [" in found.text
    assert "'sphinx.ext.autodoc'," in found.text and "'sphinx.ext.graphviz'," in found.text
    assert found.text.rstrip().splitlines()[-1] != "extensions = ["


def test_a_chunk_inside_a_long_assignment_names_it_in_its_fence(tmp_path: Path) -> None:
    items = "".join(f"    'sphinx.ext.extension_number_{i}',\n" for i in range(80))
    (tmp_path / "conf.py").write_text(f"import os\n\nextensions = [\n{items}]\nproject = 'x'\n")
    chunks = _index(tmp_path).corpus.chunks
    inside = [c for c in chunks if c.start > 3 and c.end <= 84]
    assert len(inside) >= 2  # the list is longer than a chunk
    fences = [
        re.match(r"<frame [^\n]*>", render_frame("files", chunk_frame(c, 1.0))) for c in inside
    ]
    assert all(f is not None and f.group(0).endswith(' in="extensions">') for f in fences)
