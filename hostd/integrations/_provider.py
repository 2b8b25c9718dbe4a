"""A retriever served as a CGP provider: the framework-free half of the reverse adapters.

``RetrieverProvider`` runs on the provider runtime (``hostd.provider``): it answers
the handshake at once and loads the retriever in ``warm`` (building an index or
loading a model can take a while: queries meanwhile get ``unavailable``,
``warming``), asks it in a worker thread (a framework's own async path may run its
vector search on the event loop), turns what it returns into frames (``_frames``)
and packs them under the query's limits (Q1, B1, B4). The framework halves
(``hostd.integrations.langchain``, ``.llama_index``) only turn a retriever into a
``Search``: text in, ``Retrieved`` documents out, best first.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from functools import partial
from pathlib import Path

import anyio
import anyio.to_thread

from hostd.protocol import (
    Capabilities,
    ContextQuery,
    ContextQueryResult,
    DataFlow,
    FrameIdentity,
    FrameVerdict,
    ProviderInfo,
    QueryCapability,
)
from hostd.provider import Progress, Provider

from ._frames import Retrieved, SourceFiles, frames_of, pack_frames, verify_frame

__all__ = ["RetrieverProvider", "Search"]

VERSION = "0.1.0"

#: A loaded retriever: the query text in, its documents out, best first. Called in a
#: worker thread, one call at a time.
Search = Callable[[str], Sequence[Retrieved]]


class RetrieverProvider(Provider):
    """Serves the retriever ``load()`` returns a ``Search`` for, as ``kind`` frames.

    ``name`` is the handshake name. A retriever that sends the query off the machine
    (a hosted embedding or search API) must say where in ``egress_scopes``, so the
    host asks for consent before querying it (C1, C5).
    """

    def __init__(
        self,
        load: Callable[[], Search],
        *,
        name: str,
        kind: str = "doc",
        egress_scopes: Sequence[str] = (),
        version: str = VERSION,
    ) -> None:
        self.kind = kind
        self.info = ProviderInfo(
            name=name,
            version=version,
            data_flow=DataFlow(
                reads=True, egress=bool(egress_scopes), egress_scopes=list(egress_scopes)
            ),
        )
        self.capabilities = Capabilities(query=QueryCapability(kinds=[kind]), verify=True)
        self._load = load
        self._load_lock = threading.Lock()
        self._search: Search | None = None
        #: The files frames with ``file`` provenance were served from (verify's scope).
        self._served: set[Path] = set()
        self._limiter: anyio.CapacityLimiter | None = None

    def load(self) -> Search:
        """Load the retriever once (later calls return it); blocking, any thread."""
        with self._load_lock:
            if self._search is None:
                self._search = self._load()
            return self._search

    def warm(self, progress: Progress) -> None:
        progress(0, 1, phase="load")
        self.load()
        progress(1, 1, phase="load")

    async def query(self, query: ContextQuery) -> ContextQueryResult:
        if query.kinds and self.kind not in query.kinds:
            return ContextQueryResult(frames=[])  # Q1: nothing of the asked kinds here
        if query.max_frames == 0 or query.max_tokens == 0:
            return ContextQueryResult(frames=[])  # B1, B4: nothing could be returned
        if self._limiter is None:
            # One retriever call at a time: a framework's retriever is not promised to
            # be safe to call from two threads at once.
            self._limiter = anyio.CapacityLimiter(1)
        search = self._search
        if search is None:  # served without a warm-up (in memory, or over HTTPS)
            search = await anyio.to_thread.run_sync(self.load)
        text = (query.query_text or "").strip() or query.goal.strip()
        # One worker-thread trip: the retriever's call, reading the sources, packing.
        answer = partial(self._answer, search, text, query)
        return await anyio.to_thread.run_sync(answer, limiter=self._limiter)

    def _answer(self, search: Search, text: str, query: ContextQuery) -> ContextQueryResult:
        files = SourceFiles(self._served)
        frames = frames_of(search(text), name=self.info.name, kind=self.kind, files=files)
        return pack_frames(frames, query)

    async def verify(self, frames: list[FrameIdentity]) -> list[FrameVerdict]:
        served = self._served
        return await anyio.to_thread.run_sync(lambda: [verify_frame(f, served) for f in frames])
