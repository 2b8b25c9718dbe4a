"""The index caches on disk are bounded: the corpus caches of a provider's folder
(``files``, ``semantic``'s chunks) and ``semantic``'s embeddings database. Past the
bound the least recently used go, never the one a running provider uses: a real
provider process holding its cache keeps it, and keeps answering."""

from __future__ import annotations

import argparse
import os
import sqlite3
import time
from pathlib import Path

import anyio
import numpy as np
import pytest

from providers._cli import byte_size
from providers._corpus import Corpus, CorpusOptions
from providers._corpus_cache import STALE_AFTER_S, corpus_key, save_corpus
from providers.semantic import EmbeddingCache
from tests.fixtures.bow_embedder import DIM
from tests.providers._stdio import StdioPeer


def _project(root: Path, word: str, files: int = 20) -> Path:
    for i in range(files):
        path = root / "src" / f"m{i}.py"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("".join(f"def {word}_{i}_{n}():\n    return {n}\n" for n in range(30)))
    return root


def _saved(root: Path, folder: Path, max_bytes: int, at: float | None = None) -> Path:
    """``root``'s corpus saved into ``folder`` under ``max_bytes``, as a provider does;
    ``at``: its mtime afterwards (when it was last used)."""
    corpus = Corpus(CorpusOptions(root=root))
    corpus.refresh()
    path = folder / f"{corpus_key(corpus)}.json"
    save_corpus(corpus, path, max_bytes=max_bytes)
    if at is not None:
        os.utime(path, (at, at))
    return path


def _caches(folder: Path) -> dict[str, int]:
    return {p.name: p.stat().st_size for p in folder.iterdir() if p.suffix == ".json"}


def test_writing_a_cache_keeps_the_folder_within_its_bound_least_recently_used_first(
    tmp_path: Path,
) -> None:
    folder = tmp_path / "cache"
    hour_ago = time.time() - 3600  # used in order, lately (none stale)
    unbounded = [
        _saved(_project(tmp_path / f"p{i}", f"w{i}"), folder, 0, at=hour_ago + i) for i in range(4)
    ]
    sizes = _caches(folder)
    assert len(sizes) == 4  # 0: no bound
    bound = sizes[unbounded[2].name] + sizes[unbounded[3].name] + 4096
    newest = _saved(_project(tmp_path / "p4", "w4"), folder, bound)
    left = _caches(folder)
    assert sum(left.values()) <= bound
    # The most recently used stay (and the one just written); the oldest went first.
    assert set(left) == {newest.name, unbounded[3].name}


def test_a_cache_a_running_provider_uses_is_never_pruned(tmp_path: Path) -> None:
    folder = tmp_path / "cache"
    root = _project(tmp_path / "served", "served")
    args = ["-m", "providers.files", "--root", str(root), "--cache", str(folder)]

    async def run() -> None:
        async with StdioPeer(args) as peer:
            await peer.handshake()  # built, its cache written and held
            (served,) = folder.glob("*.json")
            long_ago = time.time() - STALE_AFTER_S - 3600
            os.utime(served, (long_ago, long_ago))  # stale, and the least recently used
            # Another project's cache written with a bound the two do not fit in.
            other = _saved(_project(tmp_path / "other", "other"), folder, 1)
            assert {p.name for p in folder.glob("*.json")} == {served.name, other.name}
            result = await peer.call(
                "context/query",
                {"query": {"goal": "served_3_7", "max_frames": 1, "max_tokens": 500}},
            )
            assert result["frames"][0]["citation_label"].startswith("src/m3.py")
        # Its provider gone, it is in use no more: the next write removes it.
        _saved(_project(tmp_path / "third", "third"), folder, 1)
        assert not served.exists()

    anyio.run(run)


def _vectors(cache: EmbeddingCache, tag: str, n: int) -> list[str]:
    digests = [f"{tag}-{i}" for i in range(n)]
    for start in range(0, n, 64):  # as a build commits them: a batch at a time
        cache.put_many([(d, np.ones(DIM, dtype=np.float32)) for d in digests[start : start + 64]])
    return digests


def test_the_embedding_cache_keeps_within_its_bound_and_keeps_what_its_index_uses(
    tmp_path: Path,
) -> None:
    path = tmp_path / "embeddings.db"
    bound = 256 * 1024
    older = EmbeddingCache(path, "gated-bow/64/l2", DIM, max_bytes=bound)
    first = _vectors(older, "first", 300)
    older.close()
    later = EmbeddingCache(path, "gated-bow/64/l2", DIM, max_bytes=bound)
    assert later.generation > older.generation
    used = later.get_many(first[:50])  # what this process's index reads: in use
    assert len(used) == 50
    mine = _vectors(later, "later", 600)
    assert later.live_bytes() <= bound
    later._db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    assert path.stat().st_size <= bound + 64 * 1024  # freed pages are reused
    kept = later.get_many(first)
    assert set(first[:50]) <= set(kept)  # read by this process: never removed
    assert len(kept) < len(first)  # the least recently used went
    assert later.get_many(mine[-64:]).keys() == set(mine[-64:])
    later.close()


def test_an_embedding_cache_smaller_than_its_index_keeps_the_index_whole(
    tmp_path: Path,
) -> None:
    cache = EmbeddingCache(tmp_path / "e.db", "gated-bow/64/l2", DIM, max_bytes=1)
    digests = _vectors(cache, "own", 200)
    assert len(cache.get_many(digests)) == 200
    cache.close()


def test_an_embedding_cache_an_older_version_wrote_is_bounded_its_rows_first(
    tmp_path: Path,
) -> None:
    path = tmp_path / "e.db"
    db = sqlite3.connect(path)
    db.execute(
        "CREATE TABLE vectors (fingerprint TEXT NOT NULL, digest TEXT NOT NULL, "
        "vector BLOB NOT NULL, PRIMARY KEY (fingerprint, digest))"
    )
    blob = np.ones(DIM, dtype=np.float32).tobytes()
    db.executemany(
        "INSERT INTO vectors VALUES (?, ?, ?)",
        [("gated-bow/64/l2", f"old-{i}", blob) for i in range(400)],
    )
    db.commit()
    db.close()
    cache = EmbeddingCache(path, "gated-bow/64/l2", DIM, max_bytes=128 * 1024)
    mine = _vectors(cache, "new", 100)
    assert cache.live_bytes() <= 128 * 1024
    assert len(cache.get_many(mine)) == 100
    assert len(cache.get_many([f"old-{i}" for i in range(400)])) < 400
    cache.close()


@pytest.mark.parametrize(
    ("said", "size"),
    [
        ("0", 0),
        ("4096", 4096),
        ("512M", 512 * 1024**2),
        ("2G", 2 * 1024**3),
        ("1.5GiB", 1536 * 1024**2),
        ("64k", 65536),
    ],
)
def test_a_cache_bound_reads_bytes_or_a_binary_unit(said: str, size: int) -> None:
    assert byte_size(said) == size


@pytest.mark.parametrize("said", ["", "big", "-1", "1X", "nan"])
def test_a_cache_bound_that_is_no_size_is_refused(said: str) -> None:
    with pytest.raises(argparse.ArgumentTypeError):
        byte_size(said)
