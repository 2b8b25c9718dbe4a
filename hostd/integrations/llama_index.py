"""hostd and LlamaIndex, both ways (the ``llama-index`` extra: ``llama-index-core`` only).

- ``HostdRetriever``: hostd as a LlamaIndex ``BaseRetriever``, so a
  ``RetrieverQueryEngine`` (or any pipeline that takes a retriever) composes its
  context with hostd. Each call is one ``context/compose``; the nodes are the
  composition's evidence best first (by its ``rank``, as LlamaIndex's retrievers
  return theirs), each a ``TextNode`` with the provider's own content and the same
  metadata as the LangChain adapter's documents; a composition short of what was
  asked is said as the LangChain adapter says it (``on_degraded``). A node's score is
  ``1/(1+rank)``, the composition's order under its named strategy
  (``metadata["score_basis"] == "rank"``), never a relevance comparable across
  providers (F10): a similarity cutoff applied to it cuts by rank.
- ``retriever_search``: an existing LlamaIndex retriever (or index) as the
  ``Search`` a ``RetrieverProvider`` serves: ``python -m providers.llama_index
  --retriever module:factory`` serves it as a CGP provider.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from hostd.client import ComposeResult
from hostd.config import DEFAULT_WAIT_S
from hostd.integrations._evidence import (
    OnDegraded,
    best_first,
    compose_params,
    evidence_metadata,
    on_degraded_value,
    report_shortfall,
)
from hostd.integrations._frames import Retrieved
from hostd.integrations._session import DaemonSession

try:
    from llama_index.core.base.base_retriever import BaseRetriever
    from llama_index.core.callbacks import CallbackManager
    from llama_index.core.indices.base import BaseIndex
    from llama_index.core.schema import MetadataMode, NodeWithScore, QueryBundle, TextNode
except ImportError as exc:  # pragma: no cover - depends on what is installed
    raise ImportError(
        "hostd.integrations.llama_index needs llama-index-core: install hostd with the "
        'llama-index extra (pip install "/path/to/hostd[llama-index]", a checkout or a wheel)'
    ) from exc

__all__ = ["SCORE_BASIS", "HostdRetriever", "retriever_search"]

#: ``metadata["score_basis"]`` of every node: its score is ``1/(1+rank)``.
SCORE_BASIS = "rank"
#: The metadata a language model sees with each node (the rest is for code).
_LLM_KEYS = frozenset({"citation_label"})

log = logging.getLogger(__name__)


class HostdRetriever(BaseRetriever):
    """hostd as a LlamaIndex retriever: ``HostdRetriever(connect=SOCKET)`` asks a running
    daemon (the default socket when neither is given), ``HostdRetriever(config=PATH)``
    spawns a private one on first use and keeps it until ``close()``.

    The arguments are the LangChain adapter's (``budget``, ``strategy``,
    ``compose_options``, ``spawn_options``, ``wait``, ``on_degraded``), and so is the
    order: best first; ``last_composition`` is the latest call's composition. Only
    ``citation_label`` of a node's metadata reaches the model's prompt (and none of it
    the embedding text).
    """

    def __init__(
        self,
        *,
        connect: str | Path | None = None,
        config: str | Path | None = None,
        budget: int | None = None,
        strategy: str | dict[str, Any] | None = None,
        compose_options: dict[str, Any] | None = None,
        spawn_options: dict[str, Any] | None = None,
        wait: float = DEFAULT_WAIT_S,
        on_degraded: OnDegraded = "warn",
        callback_manager: CallbackManager | None = None,
    ) -> None:
        super().__init__(callback_manager=callback_manager)
        self.on_degraded = on_degraded_value(on_degraded)
        self._session = DaemonSession(
            connect=connect, config=config, spawn_options=spawn_options, wait=wait, log=log
        )
        self.budget = budget
        self.strategy = strategy
        self.compose_options = dict(compose_options or {})
        self.last_composition: ComposeResult | None = None

    def _params(self) -> dict[str, Any]:
        return compose_params(self.budget, self.strategy, self.compose_options)

    def _nodes(self, result: ComposeResult) -> list[NodeWithScore]:
        self.last_composition = result
        report_shortfall(result, self.on_degraded, log)
        nodes: list[NodeWithScore] = []
        for place, (position, item) in enumerate(best_first(result)):
            rank = item.rank if item.rank is not None else place
            metadata = evidence_metadata(item, position, result)
            metadata["score_basis"] = SCORE_BASIS
            node = TextNode(
                id_=f"hostd:{item.provider_id}/{item.frame_id}",
                text=item.content or "",
                metadata=metadata,
                excluded_llm_metadata_keys=sorted(set(metadata) - _LLM_KEYS),
                excluded_embed_metadata_keys=sorted(metadata),
            )
            nodes.append(NodeWithScore(node=node, score=1.0 / (rank + 1)))
        return nodes

    def _retrieve(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
        return self._nodes(self._session.compose(query_bundle.query_str, self._params()))

    async def _aretrieve(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
        result = await self._session.acompose(query_bundle.query_str, self._params())
        return self._nodes(result)

    def close(self) -> None:
        """Close the connection; a daemon this retriever spawned stops."""
        self._session.close()

    def __enter__(self) -> HostdRetriever:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def retriever_search(target: Any) -> Callable[[str], Sequence[Retrieved]]:
    """The ``Search`` of a LlamaIndex retriever or index (its ``as_retriever()``);
    ``target`` may also be a function of no arguments that returns one (a
    ``module:factory``). A node's ``start_char_idx`` guides where its text is looked
    for in its source file."""
    if not isinstance(target, BaseRetriever | BaseIndex) and callable(target):
        target = target()
    if isinstance(target, BaseIndex):
        target = target.as_retriever()
    if not isinstance(target, BaseRetriever):
        raise TypeError(f"expected a LlamaIndex retriever or index, got {type(target).__name__}")
    retriever = target

    def search(text: str) -> list[Retrieved]:
        out: list[Retrieved] = []
        for scored in retriever.retrieve(text):
            node = scored.node
            hint = getattr(node, "start_char_idx", None)
            out.append(
                Retrieved(
                    node.get_content(metadata_mode=MetadataMode.NONE),
                    dict(node.metadata),
                    hint if isinstance(hint, int) else None,
                )
            )
        return out

    return search
