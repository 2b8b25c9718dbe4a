"""hostd and LangChain, both ways (the ``langchain`` extra: ``langchain-core`` only).

- ``HostdRetriever``: hostd as a LangChain ``BaseRetriever`` (sync and async). Each
  call is one ``context/compose``; the documents are the composition's evidence best
  first (by its ``rank``, as LangChain's retrievers return theirs), ``page_content``
  the provider's own content (not the fenced text of the prompt), ``metadata`` where
  it came from and how it was checked (``citation_label``, ``provider_id``,
  ``vouched_by``, ``frame_id``, ``uri``, ``range``, ``verification``, ``request_id``,
  …) and whether the composition was whole (``degraded``, ``degraded_reasons``); a
  composition short of what was asked is a warning on this module's logger
  (``on_degraded``); see docs/integrations.md.
- ``retriever_search``: an existing LangChain retriever (or vector store) as the
  ``Search`` a ``RetrieverProvider`` serves: ``python -m providers.langchain
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
    report_shortfall,
)
from hostd.integrations._frames import Retrieved
from hostd.integrations._session import DaemonSession

try:
    from langchain_core.callbacks import (
        AsyncCallbackManagerForRetrieverRun,
        CallbackManagerForRetrieverRun,
    )
    from langchain_core.documents import Document
    from langchain_core.retrievers import BaseRetriever
    from langchain_core.runnables import Runnable
    from langchain_core.vectorstores import VectorStore
except ImportError as exc:  # pragma: no cover - depends on what is installed
    raise ImportError(
        "hostd.integrations.langchain needs langchain-core: install hostd with the langchain "
        'extra (pip install "/path/to/hostd[langchain]", a checkout or a wheel)'
    ) from exc
from pydantic import ConfigDict, Field, PrivateAttr, model_validator

__all__ = ["HostdRetriever", "retriever_search"]

log = logging.getLogger(__name__)


class HostdRetriever(BaseRetriever):
    """hostd as a LangChain retriever: ``HostdRetriever(connect=SOCKET)`` asks a running
    daemon (the default socket when neither is given), ``HostdRetriever(config=PATH)``
    spawns a private one on first use and keeps it until ``close()``.

    ``budget`` and ``strategy`` are ``context/compose``'s; ``compose_options`` takes
    its other params (``providers``, ``kinds``, ``placement``, ``caps``,
    ``timeout_ms``…); ``spawn_options`` goes to ``hostd.client.spawn``; ``wait`` is
    how long opening the socket waits for a daemon that is starting (the CLI's
    ``--wait``). Documents come best first, whatever the placement (which orders the
    prompt only: ``metadata["prompt_position"]``). A composition short of what was
    asked is a warning on this module's logger (``on_degraded="warn"``), a
    ``DegradedComposition`` (``"raise"``) or nothing (``"ignore"``);
    ``last_composition`` is the latest call's composition (its ``degraded_reasons``
    also when it returned no document).
    """

    model_config = ConfigDict(extra="forbid", arbitrary_types_allowed=True)

    connect: str | Path | None = None
    config: str | Path | None = None
    budget: int | None = None
    strategy: str | dict[str, Any] | None = None
    compose_options: dict[str, Any] = {}
    spawn_options: dict[str, Any] = {}
    wait: float = Field(default=DEFAULT_WAIT_S, ge=0, allow_inf_nan=False)
    on_degraded: OnDegraded = "warn"

    _session: DaemonSession | None = PrivateAttr(default=None)
    _last: ComposeResult | None = PrivateAttr(default=None)

    @model_validator(mode="after")
    def _one_daemon(self) -> HostdRetriever:
        if self.connect is not None and self.config is not None:
            raise ValueError("give connect (a daemon's socket) or config (spawn one), not both")
        return self

    @property
    def last_composition(self) -> ComposeResult | None:
        """The composition of the latest call (with concurrent calls, whichever ended last)."""
        return self._last

    def _daemon(self) -> DaemonSession:
        if self._session is None:
            self._session = DaemonSession(
                connect=self.connect,
                config=self.config,
                spawn_options=self.spawn_options,
                wait=self.wait,
                log=log,
            )
        return self._session

    def _documents(self, result: ComposeResult) -> list[Document]:
        self._last = result
        report_shortfall(result, self.on_degraded, log)
        return [
            Document(
                page_content=item.content or "",
                metadata=evidence_metadata(item, position, result),
            )
            for position, item in best_first(result)
        ]

    def _get_relevant_documents(
        self, query: str, *, run_manager: CallbackManagerForRetrieverRun
    ) -> list[Document]:
        params = compose_params(self.budget, self.strategy, self.compose_options)
        return self._documents(self._daemon().compose(query, params))

    async def _aget_relevant_documents(
        self, query: str, *, run_manager: AsyncCallbackManagerForRetrieverRun
    ) -> list[Document]:
        params = compose_params(self.budget, self.strategy, self.compose_options)
        return self._documents(await self._daemon().acompose(query, params))

    def close(self) -> None:
        """Close the connection; a daemon this retriever spawned stops."""
        if self._session is not None:
            self._session.close()
            self._session = None

    def __enter__(self) -> HostdRetriever:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _as_retriever(target: Any) -> Runnable[str, list[Document]]:
    if isinstance(target, VectorStore):
        return target.as_retriever()
    if isinstance(target, Runnable):
        return target
    raise TypeError(
        f"expected a LangChain retriever, vector store or runnable, got {type(target).__name__}"
    )


def retriever_search(target: Any) -> Callable[[str], Sequence[Retrieved]]:
    """The ``Search`` of a LangChain retriever, a vector store (its ``as_retriever()``)
    or any runnable from query text to documents; ``target`` may also be a function
    of no arguments that returns one (a ``module:factory``)."""
    if not isinstance(target, VectorStore | Runnable) and callable(target):
        target = target()
    retriever = _as_retriever(target)

    def search(text: str) -> list[Retrieved]:
        documents = retriever.invoke(text)
        out: list[Retrieved] = []
        for doc in documents:
            if not isinstance(doc, Document):
                raise TypeError(f"the retriever returned a {type(doc).__name__}, not a Document")
            out.append(Retrieved(doc.page_content, dict(doc.metadata)))
        return out

    return search
