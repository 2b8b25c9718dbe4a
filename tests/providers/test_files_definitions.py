"""The chunk that defines an identifier the query spells ranks above the chunks that
only mention it (``_lift_definitions``); a query naming none ranks by BM25 alone, a
plain word that some chunk defines included. The names each chunk defines are cached
with the chunks, so a start from the cache scans none of them again."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import orjson
import pytest

from hostd.chunking import defined_names, tokenize
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


def _scanned(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The chunks' texts the index scans for definitions (``defined_names``), one each."""
    texts: list[str] = []

    def counting(suffix: str, text: str) -> list[str]:
        texts.append(text)
        return defined_names(suffix, text)

    monkeypatch.setattr("providers.files._index.defined_names", counting)
    return texts


def _defines(index: FileIndex) -> dict[str, list[str]]:
    chunks = index._served.chunks
    return {
        name: [chunks[i].chunk_id for i in at.tolist()]
        for name, at in index._served.defines.items()
    }


def test_a_start_from_the_cache_scans_no_chunk_for_its_definitions(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = _tree(tmp_path / "tree")
    cache = tmp_path / "cache" / "corpus.json"
    cold = FileIndex(CorpusOptions(root=root), cache_path=cache)
    cold.build()
    assert "new0" in _defines(cold)
    scanned = _scanned(monkeypatch)

    warm = FileIndex(CorpusOptions(root=root), cache_path=cache)
    warm.build()
    assert warm.loaded_from_cache and scanned == [] and warm.named_last == 0
    assert _defines(warm) == _defines(cold)
    question = "what does the new0 macro expand to?"
    assert [h.chunk.chunk_id for h in warm.search(question)] == [
        h.chunk.chunk_id for h in cold.search(question)
    ]

    # A changed file: its chunks alone are scanned.
    (root / "src" / "expand.c").write_text("int expand_twice(int size)\n{\n\treturn size;\n}\n")
    changed = FileIndex(CorpusOptions(root=root), cache_path=cache)
    changed.build()
    assert scanned == [(root / "src" / "expand.c").read_text()]
    assert "expand_twice" in _defines(changed) and "expand" not in _defines(changed)


def test_a_cache_that_does_not_say_the_names_is_scanned_once_then_written_with_them(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = _tree(tmp_path / "tree")
    cache = tmp_path / "cache" / "corpus.json"
    cold = FileIndex(CorpusOptions(root=root), cache_path=cache)
    cold.build()
    # What the version before wrote: each chunk's row ends at its item; no names.
    body = orjson.loads(cache.read_bytes())
    assert body.pop("names") is True
    body["version"] = 3
    for _, _, _, rows in body["files"].values():
        for row in rows:
            del row[10:]
    cache.write_bytes(orjson.dumps(body))
    scanned = _scanned(monkeypatch)

    upgrade = FileIndex(CorpusOptions(root=root), cache_path=cache)
    upgrade.build()
    # Every chunk scanned again (none is taken to define nothing), and none read again.
    assert upgrade.loaded_from_cache and upgrade.corpus.reads == 0
    assert upgrade.named_last == upgrade.chunk_count == len(scanned) > 0
    assert _defines(upgrade) == _defines(cold)

    scanned.clear()
    after = FileIndex(CorpusOptions(root=root), cache_path=cache)
    after.build()
    assert scanned == [] and after.index_loaded
    assert _defines(after) == _defines(cold)


def test_a_confval_directive_defines_its_option_over_the_pages_that_mention_it(
    tmp_path: Path,
) -> None:
    """``.. confval:: html_sidebars`` defines ``html_sidebars`` as a ``def`` would: a
    question spelling it ranks the option's own text above the pages that only cite it."""
    (tmp_path / "doc").mkdir()
    body = "".join(f"   Line {i} of the option's description, plain words.\n" for i in range(4))
    (tmp_path / "doc" / "configuration.rst").write_text(
        "Options for HTML output\n-----------------------\n\n"
        f".. confval:: html_sidebars\n   :type: dict\n\n{body}\n"
        ".. confval:: html_title\n\n   The title of the pages.\n"
    )
    for i in range(6):
        (tmp_path / "doc" / f"theme{i}.rst").write_text(
            f"Theme {i}\n=======\n\nThe sidebars of theme {i} are set with "
            ":confval:`html_sidebars`; see :confval:`html_sidebars` for where "
            "html_sidebars is documented.\n"
        )
    hits = _index(tmp_path).search("where do we document html_sidebars")
    assert hits[0].chunk.rel == "doc/configuration.rst"
    assert "html_sidebars" in defined_names(".rst", hits[0].chunk.text)
