"""A bulk change (a formatter run, a branch switch) is embedded behind the queries: they
answer at once from the index as it was, and the new chunks come in once embedded.
A gated stand-in embedder holds the embedding open, so the order is decided by events."""

from __future__ import annotations

import os
import stat
import threading
from pathlib import Path

import numpy as np

from providers import CorpusOptions
from providers.semantic import EmbeddingCache, SemanticIndex
from tests.fixtures.bow_embedder import DIM, GatedEmbedder


def test_a_bulk_change_is_embedded_behind_queries_answered_meanwhile(tmp_path: Path) -> None:
    root = tmp_path / "p"
    root.mkdir()
    (root / "alpha.md").write_text("# Alpha\n\nalpha bravo charlie\n")
    embedder = GatedEmbedder()
    cache = EmbeddingCache(tmp_path / "cache.db", embedder.fingerprint, DIM)
    index = SemanticIndex(CorpusOptions(root=root), embedder, cache, refresh_interval_s=0.0)
    index.refresh(force=True)
    embedder.gate.clear()
    for i in range(100):  # more than one batch of new chunks
        (root / f"zebra{i}.md").write_text(f"# Zebra {i}\n\nzebra{i} stripes savanna\n")
    found: list[str] = []
    asked = threading.Thread(
        target=lambda: found.extend(h.chunk.rel for h in index.search("alpha"))
    )
    asked.start()
    asked.join(60)  # a hang guard: answered while the embedding waits, or not at all
    assert not asked.is_alive(), "a query waited for the bulk embedding"
    assert embedder.waiting.wait(60) and index.embedding
    assert found[0] == "alpha.md"
    (behind,) = [t for t in threading.enumerate() if t.name == "semantic-embed"]
    embedder.gate.set()
    behind.join(60)  # it ends once nothing is pending
    assert not behind.is_alive() and not index.embedding
    assert index.search("zebra7 stripes")[0].chunk.rel == "zebra7.md"
    assert index.chunk_count == 101


def test_the_embedding_cache_is_private_as_the_files_cache_is(tmp_path: Path) -> None:
    path = tmp_path / "cache" / "hostd" / "semantic" / "embeddings.db"
    old = os.umask(0o022)
    try:
        cache = EmbeddingCache(path, "gated-bow/64/l2", DIM)
        cache.put_many([("d", np.ones(DIM, dtype=np.float32))])
    finally:
        os.umask(old)
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    for folder in (path.parent, path.parent.parent, path.parent.parent.parent):
        assert stat.S_IMODE(folder.stat().st_mode) == 0o700, folder
    path.chmod(0o644)  # as an older version left it
    EmbeddingCache(path, "gated-bow/64/l2", DIM)
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
