"""Edits to a built semantic index: the re-plan keeps every unchanged chunk's vector
in its place, takes a vector the cache has, and embeds only what is new. A stand-in
embedder gives each distinct text a vector of its own (orthogonal to every other), so
a query by a text's vector finds exactly the chunks that hold that vector."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np

from providers import CorpusOptions
from providers.semantic import EmbeddingCache, SemanticIndex

DIM = 64


class Ledger:
    """Each distinct text embedded gets the next basis vector; every text encoded is
    noted in ``encoded``."""

    dim = DIM
    fingerprint = "ledger/64/l2"

    def __init__(self) -> None:
        self.basis: dict[str, int] = {}
        self.encoded: list[str] = []

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        self.encoded.extend(texts)
        out = np.zeros((len(texts), DIM), dtype=np.float32)
        for row, text in enumerate(texts):
            out[row, self.basis.setdefault(text, len(self.basis))] = 1.0
        return out

    def vector_of(self, line: str) -> list[float]:
        """The vector of the one chunk embedded whose text is ``line``."""
        (text,) = [t for t in self.basis if t.endswith(f"\n{line}\n")]
        vector = [0.0] * DIM
        vector[self.basis[text]] = 1.0
        return vector


def _lines(rel: str, count: int) -> list[str]:
    return [f"{rel} says {i}" for i in range(count)]


def _write(root: Path, rel: str, lines: list[str]) -> None:
    (root / rel).write_text("".join(f"{line}\n" for line in lines))


def _holding(index: SemanticIndex, embedder: Ledger, line: str) -> list[str]:
    """The chunks whose vector is that of the chunk ``line``: by a query of its vector."""
    return [h.chunk.chunk_id for h in index.search(None, embedder.vector_of(line))]


def test_an_edit_keeps_unchanged_vectors_and_embeds_only_the_changed_chunks(
    tmp_path: Path,
) -> None:
    root = tmp_path / "p"
    root.mkdir()
    for rel in ("a.py", "b.py", "c.py"):
        _write(root, rel, _lines(rel, 4))
    embedder = Ledger()
    index = SemanticIndex(
        CorpusOptions(root=root, window_lines=1, min_chunk_tokens=0),
        embedder,
        EmbeddingCache(tmp_path / "vectors.db", embedder.fingerprint, DIM),
        refresh_interval_s=0.0,
    )
    index.refresh(force=True)
    assert index.built and index.chunk_count == 12

    # A line in the middle of the tree changed, a file removed, a file added: every
    # row after the changed one moves in the matrix.
    b = _lines("b.py", 4)
    _write(root, "b.py", [*b[:2], "b.py was edited", *b[3:]])
    (root / "c.py").unlink()
    _write(root, "d.py", _lines("d.py", 3))
    embedder.encoded.clear()
    index.refresh()

    assert sorted(t.rsplit("\n", 2)[-2] for t in embedder.encoded) == sorted(
        ["b.py was edited", *_lines("d.py", 3)]
    )
    assert index.chunk_count == 4 + 4 + 3
    for rel, lines in (("a.py", _lines("a.py", 4)), ("d.py", _lines("d.py", 3))):
        for n, line in enumerate(lines, 1):
            assert _holding(index, embedder, line) == [f"{rel}#L{n}-{n}"]
    for n, line in enumerate([*b[:2], "b.py was edited", *b[3:]], 1):
        assert _holding(index, embedder, line) == [f"b.py#L{n}-{n}"]
    assert _holding(index, embedder, "c.py says 1") == []  # gone with its file

    # The edit undone: its old chunk's vector comes from the cache, nothing is embedded.
    _write(root, "b.py", b)
    embedder.encoded.clear()
    index.refresh()
    assert embedder.encoded == []
    for n, line in enumerate(b, 1):
        assert _holding(index, embedder, line) == [f"b.py#L{n}-{n}"]
    assert _holding(index, embedder, "a.py says 3") == ["a.py#L4-4"]
    assert _holding(index, embedder, "d.py says 0") == ["d.py#L1-1"]
