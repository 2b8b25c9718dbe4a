"""A long first build of the semantic index, as a user meets it: a ``.hostdignore``
edited meanwhile is taken up between batches (its chunks leave the work and the total),
the project's code is embedded before its tests and docs, and queries meanwhile search
what is embedded so far. An in-process index with a gated stand-in embedder and a clock
of the test's own, so every step is decided by events."""

from __future__ import annotations

import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from hostd.protocol import ContextQuery
from providers import CorpusOptions
from providers._prior import is_test_chunk
from providers.semantic import EmbeddingCache, SemanticIndex, SemanticProvider
from providers.semantic._index import (
    RANK_DOC,
    RANK_FIXTURE,
    RANK_LATE,
    RANK_SOURCE,
    RANK_TEST,
    embed_order,
    embed_rank,
)
from tests.fixtures.bow_embedder import DIM, GatedEmbedder

HANG_GUARD_S = 60


class Recording(GatedEmbedder):
    """Notes the first line (the chunk's title: its path) of every text a batch embeds."""

    def __init__(self) -> None:
        super().__init__()
        self.embedded: list[str] = []

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        out = super().encode(texts)
        if len(texts) > 1:
            self.embedded.extend(t.split("\n", 1)[0] for t in texts)
        return out


def _write(root: Path, rel: str, lines: int, word: str) -> None:
    path = root / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(f"{word} line {i} of {rel}.\n" for i in range(lines)))


def _index(root: Path, tmp_path: Path, embedder: GatedEmbedder) -> SemanticIndex:
    # A clock that never moves: a walk is due after every batch (``refresh_interval_s``
    # 0), whatever the machine's speed.
    return SemanticIndex(
        CorpusOptions(root=root, window_lines=1, min_chunk_tokens=0),
        embedder,
        EmbeddingCache(tmp_path / "vectors.db", embedder.fingerprint, DIM),
        refresh_interval_s=0.0,
        clock=lambda: 0.0,
    )


def _building(index: SemanticIndex) -> tuple[threading.Thread, list[dict[str, Any]]]:
    notes: list[dict[str, Any]] = []

    def progress(done: int, total: int | None, *, phase: str, message: str | None = None) -> None:
        notes.append({"done": done, "total": total, "message": message})

    build = threading.Thread(target=lambda: index.refresh(force=True, progress=progress))
    build.start()
    return build, notes


def test_a_hostdignore_edited_mid_build_leaves_the_work_and_the_total(tmp_path: Path) -> None:
    root = tmp_path / "p"
    _write(root, "app.py", 100, "kiwi")
    _write(root, "tests/test_app.py", 200, "kiwi")
    embedder = Recording()
    embedder.gate.clear()
    index = _index(root, tmp_path, embedder)
    build, notes = _building(index)
    assert embedder.waiting.wait(HANG_GUARD_S)  # its first batch, held
    assert notes[0]["total"] == 300
    (root / ".hostdignore").write_text("tests/\n")
    embedder.gate.set()
    build.join(HANG_GUARD_S)
    assert not build.is_alive()
    # Taken up after the batch under way: its total is the tree's now, said in a note,
    # and not a chunk of tests/ was embedded.
    assert notes[-1] == {"done": 100, "total": 100, "message": None}
    assert {"done": 64, "total": 100, "message": "embedding 36 of 100 chunks (64 cached)"} in notes
    assert not [title for title in embedder.embedded if "tests/" in title]
    assert index.chunk_count == 100 and index.built
    assert {h.chunk.rel for h in index.search("kiwi line")} == {"app.py"}


def test_code_is_embedded_before_tests_fixtures_docs_and_translations(tmp_path: Path) -> None:
    root = tmp_path / "p"
    for rel in (
        "README.md",
        "docs/guide.py",
        "locale/de/formats.py",
        "pkg/core.py",
        "tests/fixtures/data.py",
        "tests/test_core.py",
        "zlib/util.py",
    ):
        _write(root, rel, 3, "kiwi")
    embedder = Recording()
    index = _index(root, tmp_path, embedder)
    index.refresh(force=True)
    order = list(dict.fromkeys(title.split(" ", 1)[0] for title in embedder.embedded))
    assert order == [
        "pkg/core.py",
        "zlib/util.py",
        "tests/test_core.py",
        "tests/fixtures/data.py",
        "README.md",
        "docs/guide.py",
        "locale/de/formats.py",
    ]


def test_a_crate_embeds_its_rust_then_its_python_wrapper_then_its_manifests(
    tmp_path: Path,
) -> None:
    root = tmp_path / "p"
    for rel, lines in {
        "Cargo.toml": 2,
        "LICENSE": 2,
        "build.rs": 2,
        "python/pc/__init__.pyi": 2,
        "python/pc/core.py": 2,
        "src/lib.rs": 3,
        "src/validators/int.rs": 3,
        "tests/test_int.py": 2,
    }.items():
        _write(root, rel, lines, "kiwi")
    embedder = Recording()
    index = _index(root, tmp_path, embedder)
    index.refresh(force=True)
    order = list(dict.fromkeys(title.split(" ", 1)[0] for title in embedder.embedded))
    assert order == [
        "build.rs",
        "src/lib.rs",
        "src/validators/int.rs",
        "python/pc/__init__.pyi",
        "python/pc/core.py",
        "Cargo.toml",
        "LICENSE",
        "tests/test_int.py",
    ]


def test_embed_order_puts_the_language_of_most_source_chunks_first() -> None:
    class _Chunk:
        def __init__(self, rel: str) -> None:
            self.rel, self.kind, self.item = rel, "snippet", None

    def order(*rels: str) -> list[str]:
        chunks: Any = [_Chunk(rel) for rel in rels]
        return [rels[i] for i in embed_order(chunks, range(len(rels)))]

    # Most of the source is Go; the many Python test chunks do not count.
    assert order("a.py", "b.go", "c.go", "d.toml", "tests/t1.py", "tests/t2.py", "tests/t3.py") == [
        "b.go",
        "c.go",
        "a.py",
        "d.toml",
        "tests/t1.py",
        "tests/t2.py",
        "tests/t3.py",
    ]
    # A tie goes to the language named first, whichever file comes first.
    assert order("z.rs", "a.py") == ["a.py", "z.rs"]
    assert order("a.py", "z.rs") == ["a.py", "z.rs"]


def test_embed_rank_reads_what_a_path_is_for() -> None:
    class _Chunk:
        def __init__(self, rel: str, kind: str = "snippet", item: str | None = None) -> None:
            self.rel, self.kind, self.item = rel, kind, item

    ranks = {
        "django/db/models/query.py": RANK_SOURCE,
        "src/testing_utils_helper.py": RANK_SOURCE,
        "numpy/testing/utils.py": RANK_SOURCE,  # helpers a library ships (is_test_path)
        "tests/queries/models.py": RANK_TEST,
        "pkg/test_query.py": RANK_TEST,
        "cmd/server_test.go": RANK_TEST,
        "web/app.spec.ts": RANK_TEST,
        "conftest.py": RANK_TEST,
        "e2e/checkout.ts": RANK_TEST,
        "wdio/specs/login.js": RANK_TEST,
        "Tests/AppTests/Parser.swift": RANK_TEST,  # any case, as the prior reads it
        "tests/fixtures/rows.json": RANK_FIXTURE,
        "pkg/testdata/in.txt": RANK_FIXTURE,
        "docs/conf.py": RANK_DOC,
        "django/conf/locale/de/formats.py": RANK_LATE,
        "api/generated/client.py": RANK_LATE,
    }
    for rel, rank in ranks.items():
        assert embed_rank(_Chunk(rel)) == rank, rel  # type: ignore[arg-type] # rel, kind
    assert embed_rank(_Chunk("CHANGES.txt", kind="doc")) == RANK_DOC  # type: ignore[arg-type]
    rust_test = _Chunk("src/parse.rs", item="mod tests › fn nests")
    assert embed_rank(rust_test) == RANK_TEST  # type: ignore[arg-type] # a Rust unit test


_PART = st.sampled_from(
    ["src", "pkg", "tests", "Test", "testing", "spec", "specs", "e2e", "__tests__", "lib"]
)
_NAME = st.sampled_from(
    ["app.py", "test_app.py", "app_test.go", "app.spec.ts", "conftest.py", "App.java"]
)


@given(st.lists(_PART, max_size=4), _NAME, st.sampled_from([None, "fn run", "mod tests › fn a"]))
def test_the_build_order_calls_a_file_a_test_as_the_test_prior_does(
    folders: list[str], name: str, item: str | None
) -> None:
    # Past fixtures, docs and generated code, a chunk is embedded with the tests exactly
    # when the test prior lowers it: one definition of a test, read by both.
    class _Chunk:
        rel, kind = "/".join([*folders, name]), "snippet"

    _Chunk.item = item  # type: ignore[attr-defined]
    rank = embed_rank(_Chunk())  # type: ignore[arg-type] # rel, kind, item
    assert (rank == RANK_TEST) == is_test_chunk(_Chunk.rel, item), _Chunk.rel


def test_queries_during_the_first_build_search_what_is_embedded(tmp_path: Path) -> None:
    root = tmp_path / "p"
    _write(root, "app.py", 64, "kiwi")
    _write(root, "notes.md", 100, "mango")
    embedder = Recording()
    embedder.gate.clear()
    index = _index(root, tmp_path, embedder)
    build, _ = _building(index)
    assert embedder.waiting.wait(HANG_GUARD_S)
    assert index.search("kiwi line") == []  # nothing embedded yet: nothing searched
    embedder.waiting.clear()
    embedder.gate.set()  # lets the first batch (app.py, code first) through …
    embedder.gate.clear()  # … and holds the next
    assert embedder.waiting.wait(HANG_GUARD_S)
    assert index.searched == (64, 164) and not index.built
    hits = index.search("kiwi line 7")
    assert hits and {h.chunk.rel for h in hits} == {"app.py"}
    assert "notes.md" not in {h.chunk.rel for h in index.search("mango line")}  # not yet
    embedder.gate.set()
    build.join(HANG_GUARD_S)
    assert not build.is_alive() and index.built and index.searched == (164, 164)
    assert index.search("mango line 7")[0].chunk.rel == "notes.md"


class _Progress:
    """What a warm-up is given (``hostd.provider.Progress``): its steps and whether it
    answers meanwhile."""

    def __init__(self) -> None:
        self.done: list[int] = []
        self.answering = threading.Event()

    def __call__(
        self, done: int, total: int | None, *, phase: str, message: str | None = None
    ) -> None:
        self.done.append(done)

    def answer_meanwhile(self) -> None:
        self.answering.set()


@pytest.mark.anyio
async def test_the_provider_answers_from_its_first_embedded_batch_on(tmp_path: Path) -> None:
    root = tmp_path / "p"
    _write(root, "app.py", 64, "kiwi")
    _write(root, "tests/test_app.py", 100, "kiwi")
    embedder = Recording()
    embedder.gate.clear()
    provider = SemanticProvider(_index(root, tmp_path, embedder))
    progress = _Progress()
    warm = threading.Thread(target=provider.warm, args=(progress,))
    warm.start()
    try:
        assert embedder.waiting.wait(HANG_GUARD_S)
        assert not progress.answering.is_set()  # nothing to search yet: it still refuses
        embedder.waiting.clear()
        embedder.gate.set()
        embedder.gate.clear()  # the first batch (the code) through, the next held
        assert embedder.waiting.wait(HANG_GUARD_S) and progress.answering.is_set()
        query = ContextQuery(goal="kiwi line 7", max_frames=8, max_tokens=2000)
        result = await provider.query(query)
        assert progress.done[-1] == 64  # the figure the host says it searched
    finally:
        embedder.gate.set()
    assert result.frames and {f["uri"].rsplit("/", 1)[1] for f in result.frames} == {"app.py"}
    warm.join(HANG_GUARD_S)
    assert not warm.is_alive()
