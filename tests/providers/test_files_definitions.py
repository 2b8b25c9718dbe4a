"""The chunk that defines an identifier the query spells ranks above the chunks that
only mention it (``_lift_definitions``); a query naming none ranks by BM25 alone, a
plain word that some chunk defines included."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from hostd.chunking import tokenize
from providers import CorpusOptions
from providers.files import FileIndex

#: The definition: one line among many others, so BM25 alone ranks it below the users.
_UTIL = (
    "/* Sizes expand as the counts grow. */\n"
    "#define new0(type, count) \\\n"
    "\t(type *) (__extension__ ({ size_t __n = (size_t) (count); \\\n"
    "\t\tvoid *__p = calloc(__n, sizeof(type)); __p; }))\n"
    + "".join(
        f"static inline int helper_{i}(int value)\n{{\n\treturn value * {i} + other_{i};\n}}\n"
        for i in range(12)
    )
)


def _tree(root: Path) -> Path:
    (root / "src").mkdir(parents=True)
    (root / "src" / "util.h").write_text(_UTIL)
    for i in range(8):
        (root / "src" / f"user{i}.c").write_text(
            f"static void setup_{i}(void)\n{{\n"
            f"\tstruct foo *a = new0(struct foo, 1);\n"
            f"\tstruct bar *b = new0(struct bar, 1);\n"
            f"\tstruct baz *c = new0(struct baz, {i});\n"
            "}\n"
        )
    # A plain word is no identifier, though a chunk defines it.
    (root / "src" / "expand.c").write_text(
        "int expand(int size)\n{\n\treturn size * 2;\n}\n"
        "/* Callers expand a buffer before calloc: expand, then calloc. */\n"
    )
    return root


def _index(root: Path) -> FileIndex:
    ix = FileIndex(CorpusOptions(root=root), refresh_interval_s=0.0, refresh_wait_s=60)
    ix.refresh(force=True)
    return ix


def test_the_chunk_defining_a_name_the_query_spells_ranks_first(tmp_path: Path) -> None:
    ix = _index(_tree(tmp_path))
    hits = ix.search("what does the new0 macro expand to?")
    naming = [h.chunk.rel for h in hits if "new0" in h.chunk.text]
    assert naming[0] == "src/util.h"
    assert all(rel.startswith("src/user") for rel in naming[1:])
    assert len(naming) == 9


def test_a_query_naming_no_identifier_ranks_by_bm25_alone(tmp_path: Path) -> None:
    ix = _index(_tree(tmp_path))
    question = "what does the allocation macro calloc expand to?"
    hits = ix.search(question)
    bm25 = ix._served.bm25
    assert bm25 is not None
    scores = np.asarray(bm25.get_scores(tokenize(question)))
    by_id = {c.chunk_id: float(s) for c, s in zip(ix._served.chunks, scores, strict=True)}
    assert hits
    assert [h.raw for h in hits] == [by_id[h.chunk.chunk_id] for h in hits]
