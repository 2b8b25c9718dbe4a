"""The binding's CPU work, off the event loop: cutting and scoring what a server served.

An MCP server may serve megabytes per query; cutting them into pieces and scoring
those is seconds of work. On the event loop it would stall every connection and no
deadline could fire, so it runs in a worker thread (one at a time per provider: a
second query of the same provider waits for the first, never two CPUs for one
server), in slices: one source (one resource read, one tool result) at a time, with
a check between slices. When the leg is cancelled (its deadline, the client's
cancel) the leg is let go at once (``abandon_on_cancel``) and the worker stops at
its next check, so a late leg costs only itself. Each source cut is handed to the
event loop to be cached as soon as it is cut, so work done for an abandoned leg is
not lost: the next query starts where it stopped.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import anyio
import anyio.from_thread
import anyio.to_thread

from hostd._log import get_logger
from hostd.errors import ProviderError
from hostd.protocol import ContextQuery, ContextQueryResult

from ._frames import Abandoned, Cut, Document, cut, rank

__all__ = ["Builder", "Source"]

log = get_logger("hostd.mcp")


@dataclass(slots=True, frozen=True)
class Source:
    """What one read or tool call served, not cut yet; ``key`` names its cache entry
    (``None``: not cached, e.g. a tool result, which answers one query only)."""

    docs: tuple[Document, ...]
    key: str | None = None
    ttl_ms: int | None = None
    last_modified: str | None = None

    @property
    def size(self) -> int:
        return sum(len(d.text) for d in self.docs)


#: Called on the event loop with each source and its documents' pieces, once cut.
Keep = Callable[[Source, list[Cut]], None]


class Builder:
    """One provider's cutting and scoring, in a worker thread."""

    def __init__(self, provider_id: str) -> None:
        self.provider_id = provider_id
        self._limiter = anyio.CapacityLimiter(1)

    async def build(
        self,
        held: Sequence[Sequence[Cut]],
        fresh: Sequence[Source],
        query: ContextQuery,
        *,
        kind: str,
        server: str,
        keep: Keep,
    ) -> ContextQueryResult:
        """The frames of ``held`` pieces (cut earlier) and ``fresh`` sources (cut now)."""
        stop = threading.Event()

        def check() -> None:
            if stop.is_set():
                raise Abandoned

        def job() -> ContextQueryResult:
            cuts = [c for group in held for c in group]
            for source in fresh:
                check()
                cut_now = [cut(d) for d in source.docs]
                if source.key is not None:
                    try:
                        anyio.from_thread.run_sync(keep, source, cut_now)
                    except RuntimeError:  # the event loop is closing: nothing to keep for
                        pass
                cuts.extend(cut_now)
            return rank(cuts, query, kind=kind, server=server, check=check)

        log.debug(
            "mcp.frames.building",
            provider=self.provider_id,
            sources=len(fresh),
            bytes=sum(s.size for s in fresh),
            held=sum(len(c) for g in held for c in g),
        )
        try:
            result = await anyio.to_thread.run_sync(
                job, abandon_on_cancel=True, limiter=self._limiter
            )
        except anyio.get_cancelled_exc_class():
            log.debug("mcp.frames.abandoned", provider=self.provider_id)
            raise
        except Exception as exc:
            # A fault of ours on what this server served costs its leg, never the fan-out;
            # the log names the exception's type only (its text may quote the served text).
            log.warning("mcp.frames.failed", provider=self.provider_id, error=type(exc).__name__)
            what = type(exc).__name__
            raise ProviderError(f"MCP: cutting what the server served failed: {what}") from None
        finally:
            stop.set()  # a worker let go of stops at its next check
        log.debug(
            "mcp.frames.built",
            provider=self.provider_id,
            frames=len(result.frames),
            truncated=result.truncated,
        )
        return result
