"""What a semantic build says of itself as it embeds: how many chunks of the index, a
resumed build standing where the last one stopped (its cached chunks counted done),
and on a large tree what shortens it. An in-process index with a stand-in embedder."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from hostd.protocol import MAX_PROGRESS_TEXT
from providers import CorpusOptions
from providers.semantic import EmbeddingCache, SemanticIndex, SemanticProvider
from providers.semantic._index import LARGE_BUILD, embed_note
from tests.fixtures.bow_embedder import DIM, GatedEmbedder, Stopped

CHUNKS = 200  # four batches of 64


def _index(root: Path, cache: Path, embedder: GatedEmbedder) -> SemanticIndex:
    options = CorpusOptions(root=root, window_lines=1, min_chunk_tokens=0)
    return SemanticIndex(options, embedder, EmbeddingCache(cache, embedder.fingerprint, DIM))


class _Progress:
    """What a warm-up is given (``hostd.provider.Progress``), noting each step."""

    def __init__(self) -> None:
        self.notes: list[dict[str, Any]] = []
        self.answering = False

    def __call__(
        self, done: int, total: int | None, *, phase: str, message: str | None = None
    ) -> None:
        self.notes.append({"done": done, "total": total, "phase": phase, "message": message})

    def answer_meanwhile(self) -> None:
        self.answering = True


def _notes() -> tuple[list[dict[str, Any]], Any]:
    progress = _Progress()
    return progress.notes, progress


def test_a_resumed_build_reports_progress_over_the_whole_index(tmp_path: Path) -> None:
    root = tmp_path / "tree"
    root.mkdir()
    lines = [f"Entry {i}: item {i % 53} rests on rack {i % 17}.\n" for i in range(CHUNKS)]
    (root / "notes.txt").write_text("".join(lines))
    cache = tmp_path / "vectors.db"
    first, progress = _notes()
    with pytest.raises(Stopped):  # cut short after its first batch, as a Ctrl-C does
        _index(root, cache, GatedEmbedder(fail_after=1)).refresh(force=True, progress=progress)
    assert first[0] == {
        "done": 0,
        "total": CHUNKS,
        "phase": "embed",
        "message": f"embedding {CHUNKS} of {CHUNKS} chunks",
    }

    again, progress = _notes()
    index = _index(root, cache, GatedEmbedder())
    index.refresh(force=True, progress=progress)
    # It starts where the first stopped: the batch it committed counts done.
    assert again[0] == {
        "done": 64,
        "total": CHUNKS,
        "phase": "embed",
        "message": f"embedding {CHUNKS - 64} of {CHUNKS} chunks (64 cached)",
    }
    assert [n["done"] for n in again] == [64, 128, 192, CHUNKS]
    assert {n["total"] for n in again} == {CHUNKS}
    assert all(n["message"] is None for n in again[1:])  # said once
    assert (index.chunk_count, index.embedded_last) == (CHUNKS, CHUNKS - 64)


def test_a_large_build_says_what_shortens_it() -> None:
    small = embed_note(LARGE_BUILD, 20_991)
    assert small == f"embedding {LARGE_BUILD:,} of 20,991 chunks (15,991 cached)"
    large = embed_note(16_639, 20_991)
    assert large.startswith("embedding 16,639 of 20,991 chunks (4,352 cached); ")
    assert ".hostdignore" in large and "tests, fixtures" in large
    assert len(large) <= MAX_PROGRESS_TEXT  # the host keeps it whole


def test_the_ready_message_names_the_parts_that_hold_most(tmp_path: Path) -> None:
    # As the files provider's does: the two walk the same tree, and a user deciding what
    # a .hostdignore should hold reads either one.
    root = tmp_path / "tree"
    for rel, n in (("tests/t.txt", 700), ("src/s.txt", 300)):
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text("".join(f"Entry {i} of {rel}.\n" for i in range(n)))
    provider = SemanticProvider(_index(root, tmp_path / "vectors.db", GatedEmbedder()))
    _, progress = _notes()
    said = provider.warm(progress)
    assert said.startswith("1000 chunks from 2 files (1000 embedded)"), said
    assert said.endswith("; most chunks: tests/ 70%, src/ 30%; largest file: tests/t.txt 70%"), said


def test_a_warm_up_says_how_many_files_it_has_read_before_it_embeds(tmp_path: Path) -> None:
    root = tmp_path / "tree"
    for name in ("a.txt", "b.txt", "c.txt"):
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(f"Entry of {name}: it rests on a rack.\n")
    provider = SemanticProvider(_index(root, tmp_path / "vectors.db", GatedEmbedder()))
    notes, progress = _notes()
    provider.warm(progress)
    phases = [n["phase"] for n in notes]
    # Its model, then the files it reads (a count, not a bare ``warming``), then embedding.
    assert phases.index("load model") < phases.index("read files") < phases.index("embed")
    reads = [(n["done"], n["total"]) for n in notes if n["phase"] == "read files"]
    assert reads[0] == (0, 3) and reads[-1] == (3, 3)


def test_a_ready_message_of_one_chunk_says_chunk_not_chunks(tmp_path: Path) -> None:
    root = tmp_path / "tree"
    root.mkdir()
    (root / "one.txt").write_text("Entry 0: item 0 rests on rack 0.\n")
    provider = SemanticProvider(_index(root, tmp_path / "vectors.db", GatedEmbedder()))
    _, progress = _notes()
    said = provider.warm(progress)
    assert said.startswith("1 chunk from 1 file (1 embedded)"), said
