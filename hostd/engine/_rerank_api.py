"""The standard rerank servers' wire: a request body per batch, a reply read into scores.

Two APIs, chosen by ``[reranker] api`` (docs/eval.md):

- ``cohere`` (Cohere, Jina, Infinity, vLLM …): ``{"model"?, "query", "documents",
  "top_n"}``, answered ``{"results": [{"index", "relevance_score"}, …], "model"?}``;
  ``model`` is sent only when configured, ``top_n`` is the number of documents;
- ``tei`` (text-embeddings-inference): ``{"query", "texts", "truncate": true}``,
  answered ``[{"index", "score"}, …]``.

Both are ``POST`` to the configured URL with ``/rerank`` appended unless its path
already ends in ``/rerank`` (``https://api.cohere.com/v2`` → ``…/v2/rerank``;
``http://127.0.0.1:7997`` → ``…/rerank``): decided from the URL's text, never by
probing the server.

A reply is a verdict only when it scores every document of its request exactly once
with a finite number. A body that is not JSON or not that shape, an index missing,
repeated or out of range, a score that is no finite number: each is ``RemoteWire``
naming the position and the rule broken, never a value the server wrote (a body may
echo the query or a credential). ``order_by_scores`` puts the highest score first,
ties in the order shown (the fallback's), so the verdict is a pure function of
(candidates, scores). Plain synchronous code over bytes.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal
from urllib.parse import urlsplit, urlunsplit

import orjson

from hostd.errors import RemoteWire

__all__ = ["RerankApi", "Scored", "document_text", "order_by_scores", "rerank_url"]

#: A model name a server reports is recorded only when it looks like one (bounded, no
#: spaces or controls); anything else is not quoted.
_MODEL_NAME = re.compile(r"[A-Za-z0-9._:/@+\-]{1,200}")


def rerank_url(url: str) -> str:
    """The endpoint a rerank request is POSTed to: ``url`` with ``/rerank`` appended to
    its path unless the path already ends in it (a trailing ``/`` is dropped)."""
    parts = urlsplit(url)
    path = parts.path.rstrip("/")
    if not path.endswith("/rerank"):
        path += "/rerank"
    return urlunsplit((parts.scheme, parts.netloc, path, parts.query, ""))


def document_text(candidate: Mapping[str, Any]) -> str:
    """What a candidate is judged by: its title and content, as the bundled reranker reads
    them (``providers.rerank``)."""
    title, content = candidate.get("title") or "", candidate.get("content") or ""
    return f"{title}\n{content}" if title else str(content)


def order_by_scores(scores: Sequence[float]) -> list[int]:
    """Positions by score, highest first; equal scores keep the order shown."""
    return sorted(range(len(scores)), key=lambda i: (-scores[i], i))


@dataclass(frozen=True, slots=True)
class Scored:
    """One reply: ``scores[i]`` is document ``i``'s; ``model`` the server's own name for
    its model when it gave one that looks like a name."""

    scores: tuple[float, ...]
    model: str | None = None


def _number(value: object) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    number = float(value)
    return number if math.isfinite(number) else None


@dataclass(frozen=True, slots=True)
class RerankApi:
    """One server's API (``cohere`` | ``tei``) and the model it is asked for."""

    name: Literal["cohere", "tei"] = "cohere"
    model: str | None = None

    def body(self, query: str, documents: Sequence[str]) -> bytes:
        """The request body scoring ``documents`` against ``query``."""
        if self.name == "tei":
            return orjson.dumps({"query": query, "texts": list(documents), "truncate": True})
        payload: dict[str, Any] = {}
        if self.model is not None:
            payload["model"] = self.model
        payload.update(query=query, documents=list(documents), top_n=len(documents))
        return orjson.dumps(payload)

    def read(self, body: bytes, n: int) -> Scored:
        """The scores of the ``n`` documents a request sent, from its response body."""
        try:
            reply = orjson.loads(body)
        except orjson.JSONDecodeError:
            raise RemoteWire(f"rerank reply ({len(body)} bytes, not quoted) is not JSON") from None
        model: str | None = None
        if self.name == "tei":
            items, score_key, where = reply, "score", "reply"
        else:
            if not isinstance(reply, dict):
                raise RemoteWire("rerank reply: expected an object with results")
            items, score_key, where = reply.get("results"), "relevance_score", "results"
            named = reply.get("model")
            if isinstance(named, str) and _MODEL_NAME.fullmatch(named):
                model = named
        if not isinstance(items, list):
            raise RemoteWire(f"rerank reply: {where} must be a list")
        scores: list[float | None] = [None] * n
        for pos, item in enumerate(items):
            index = item.get("index") if isinstance(item, dict) else None
            if type(index) is not int or not 0 <= index < n:
                raise RemoteWire(f"rerank reply: {where}[{pos}].index is not one of 0..{n - 1}")
            if scores[index] is not None:
                raise RemoteWire(f"rerank reply: {where}[{pos}].index repeats an earlier one")
            score = _number(item.get(score_key))
            if score is None:
                raise RemoteWire(f"rerank reply: {where}[{pos}].{score_key} is not a finite number")
            scores[index] = score
        got = [s for s in scores if s is not None]
        if len(got) != n:
            raise RemoteWire(f"rerank reply: {n - len(got)} of {n} documents not scored")
        return Scored(tuple(got), model)
