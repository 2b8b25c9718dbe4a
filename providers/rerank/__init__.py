"""``python -m providers.rerank --model PATH_OR_NAME``: a cross-encoder reranker for hostd.

A process hostd runs as its ``[reranker]`` (docs/eval.md): it answers
``context/handshake`` at once, loads the model in the background, and answers
``rerank`` with every key ordered by the model's score of (query, candidate),
ties broken by key. Needs the ``semantic`` extra (sentence-transformers).
"""

from ._judge import BiEncoderJudge, CrossEncoderJudge, Judge, model_identity, order_by_scores
from ._provider import RerankProvider, main

__all__ = [
    "BiEncoderJudge",
    "CrossEncoderJudge",
    "Judge",
    "RerankProvider",
    "main",
    "model_identity",
    "order_by_scores",
]
