"""``Reranker``: the reranker process, run like a provider, asked for one verdict.

The reranker is a child process on the JSON-RPC binding: it answers
``context/handshake`` like a provider (its name and version; the handshake is
its start deadline) and then ``rerank`` with ``{query, candidates: [{key, kind,
title, content}]}``, replying ``{order: [key, …], model}``. Its life is a
``ProviderPool`` of one slot, so it gets exactly a provider's lifecycle: lazy
or boot start in the pool's task group, restart with backoff after a crash or
a failed start (parked after the bounded attempts), restart when it misses its
deadline three times in a row answering nothing (a reranker whose verdicts come late
is slow, not hung: it keeps its process and its loaded model), the one teardown
ladder, no orphans, and a crash explained as a provider's is (its exit status and
the tail of its stderr, redacted: ``explain``).

This module does the I/O and reports what happened; it never reads the
verdict's keys itself (``hostd.compose.RerankRequest`` does) and never fails a
composition: every failure is a ``RerankOutcome`` with a reason code.
``rerank_order`` is the whole stage for any ``RerankService``: the request built by
``hostd.compose.rerank_request``, the service asked, its answer read back into a
``PrecomputedOrder``, so the pipeline makes one call for a verdict.
"""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

import anyio

from hostd._log import DEBUG, INFO, WARNING, get_logger
from hostd._log import level as log_level
from hostd.errors import HostdError, MalformedReply, ProviderCrashed, ProviderError
from hostd.protocol import ContextFrame, WireModel
from hostd.transport import JsonRpcCodec, PipeClient, ProviderConnection

from ._clock import now
from ._health import bounded_error
from ._launch import PoolSettings
from ._pool import ProviderPool
from ._run import Inbox
from ._spec import ProviderSpec

if TYPE_CHECKING:
    from hostd.compose import PrecomputedOrder, RerankRequest

__all__ = [
    "RERANKER_ID",
    "RerankOutcome",
    "RerankService",
    "RerankTally",
    "Reranker",
    "rerank_order",
]

log = get_logger("hostd.engine")

#: The reranker's id in the log (``provider.stderr``, ``provider.start.failed`` …).
RERANKER_ID = "reranker"


class _Reply(WireModel):
    # A peer's wire: unknown members are ignored (U1); the keys are read by the caller.
    order: list[Any]
    model: str | None = None


@dataclass(slots=True, frozen=True)
class RerankOutcome:
    """The reply's ``order`` and ``model``, or ``reason``/``detail`` when there is none.

    ``reason``: ``unavailable`` (not started: a failed start, its backoff, parked),
    ``starting`` (still starting at the deadline), ``timeout``, ``crashed`` (its
    output ended mid-call), ``bad_reply`` (a line or a result of the wrong shape),
    ``error`` (it answered with an error).
    """

    order: tuple[Any, ...] = ()
    model: str | None = None
    reason: str | None = None
    detail: str | None = None
    latency_ms: float = 0.0

    def timed(self, candidates: int, elapsed_s: float, *, quiet: bool = False) -> RerankOutcome:
        """This outcome with its latency (``elapsed_s``, read by the reranker on the clock
        it keeps its deadline by), logged as ``rerank.done`` or ``rerank.failed``: one
        end for every reranker. ``quiet``: a failure the log has told already (the same
        words as the one before, or a composition skipped while a server cools down),
        logged at debug: an outage is a few warnings, not one per composition."""
        ms = round(elapsed_s * 1000, 3)
        if self.reason is None:
            if log_level.at <= INFO:
                log.info("rerank.done", candidates=candidates, model=self.model, latency_ms=ms)
        elif log_level.at <= (DEBUG if quiet else WARNING):
            said = {"reason": self.reason, "detail": self.detail, "latency_ms": ms}
            if quiet:
                log.debug("rerank.failed", **said)
            else:
                log.warning("rerank.failed", **said)
        return RerankOutcome(self.order, self.model, self.reason, self.detail, ms)


def _late(ms: str, late: int) -> str:
    """A timeout's detail, naming the key that sets the deadline; when verdicts came after
    their deadline (``late``: so far), it says so: it works, slowly, and a longer
    deadline gets its verdicts, where a hung one it would not help."""
    if late:
        return (
            f"no verdict within {ms}; it answered {late} ask{'' if late == 1 else 's'} "
            "late: raise [reranker] timeout_ms"
        )
    return f"no verdict within {ms} (raise [reranker] timeout_ms)"


class RerankTally:
    """What became of the verdicts asked for since the daemon started: ``asks``, the
    ``fallbacks`` among them (no verdict: the composition used the policy's fallback),
    and why the latest ask fell back (``None`` when it got a verdict). Kept by each
    reranker beside its health: a provider's counters do not see an ask that never
    reached it (one skipped while a server cools down, a process not started yet)."""

    __slots__ = ("asks", "fallbacks", "last_fallback")

    def __init__(self) -> None:
        self.asks = 0
        self.fallbacks = 0
        self.last_fallback: str | None = None

    def count(self, outcome: RerankOutcome) -> RerankOutcome:
        """``outcome`` counted (two integer steps and a store on the request path)."""
        self.asks += 1
        if outcome.reason is None:
            self.last_fallback = None
        else:
            self.fallbacks += 1
            # Its reason and detail, in hostd's words (the audit's); bounded as an error is.
            self.last_fallback = bounded_error(f"{outcome.reason}: {outcome.detail}")
        return outcome

    def to_wire(self) -> dict[str, Any]:
        return {"asks": self.asks, "fallbacks": self.fallbacks, "last_fallback": self.last_fallback}


class RerankService(Protocol):
    """What composition asks for a verdict: the process ``Reranker`` or a rerank server
    (``HttpReranker``). Used as an async context for the daemon's life."""

    async def __aenter__(self) -> Any: ...

    async def __aexit__(self, *exc_info: Any) -> None: ...

    async def start_all(self) -> None:
        """Start what needs starting now (a booting daemon, once it serves)."""
        ...

    def row(self) -> dict[str, Any]:
        """Its state and health, as a ``providers/list`` row, with its ``kind``
        (``process`` or ``url``) and ``RerankTally``'s figures."""
        ...

    async def rerank(
        self, query: str, candidates: list[dict[str, Any]], timeout_s: float
    ) -> RerankOutcome:
        """One verdict over ``candidates`` within ``timeout_s``: never an exception."""
        ...


@functools.cache
def _rerank_request() -> Callable[[Iterable[tuple[str, ContextFrame]], int], RerankRequest]:
    """``hostd.compose.rerank_request``, imported at first use, as the plan imports
    ``budget_split``: the engine alone (check-provider, an embedded engine) loads nothing
    of the composition library until a request needs it; later calls find it cached
    (no import statement run per request)."""
    from hostd.compose import rerank_request

    return rerank_request


async def rerank_order(
    service: RerankService | None,
    query: str,
    frames: Iterable[tuple[str, ContextFrame]],
    max_candidates: int,
    timeout_s: float,
) -> PrecomputedOrder:
    """``service``'s order of ``frames`` (the best ``max_candidates`` of them shown to it)
    as a ``PrecomputedOrder``, never an error: with no service, or when it gives no
    verdict, the policy's fallback and why. The request is built and the answer read by
    ``hostd.compose`` (pure) on either side of the one ask."""
    request = _rerank_request()(frames, max_candidates)
    if service is None:
        return request.fallback("not_configured", "no [reranker] command or url in the config")
    if not request.candidates:
        return request.verdict((), None)
    outcome = await service.rerank(query, list(request.candidates), timeout_s)
    if outcome.reason is not None:
        return request.fallback(outcome.reason, outcome.detail)
    return request.verdict(outcome.order, outcome.model)


class Reranker:
    """``async with Reranker(spec, settings) as r: await r.rerank(query, cands, timeout_s)``."""

    def __init__(self, spec: ProviderSpec, settings: PoolSettings) -> None:
        self.pool = ProviderPool([spec], settings, noun="reranker")
        self.slot = self.pool.slots[spec.id]
        self.tally = RerankTally()
        #: What the latest ask's failure was (``_failure``), ``None`` after a verdict: a
        #: failure that repeats it is logged at debug (``rerank.failed``), as a
        #: ``[reranker] url`` server's is, so a parked reranker costs its log one warning,
        #: not one per composition.
        self._failed: tuple[Any, ...] | None = None
        #: The event loop it runs in (a verdict lands in an ``Inbox`` on it).
        self._loop: asyncio.AbstractEventLoop | None = None

    async def __aenter__(self) -> Reranker:
        self._loop = asyncio.get_running_loop()
        await self.pool.__aenter__()
        return self

    async def __aexit__(self, *exc_info: Any) -> None:
        await self.pool.__aexit__(*exc_info)

    async def start_all(self) -> None:
        """Start the reranker now (a booting daemon, once it serves); a failure is in its
        health, as a provider's is."""
        await self.pool.start_all()

    def row(self) -> dict[str, Any]:
        """Its state and health, as a ``providers/list`` row (``RerankService.row``)."""
        row = self.pool.row(self.slot)
        return {"id": row.pop("id"), "kind": "process", **row, **self.tally.to_wire()}

    async def rerank(
        self, query: str, candidates: list[dict[str, Any]], timeout_s: float
    ) -> RerankOutcome:
        """One ``rerank`` call within ``timeout_s``, its start included."""
        # One clock, the event loop's: the deadline the transport's timer keeps and the
        # latency reported are read on it (not a second clock read for the latency).
        started = now()
        outcome = await self._rerank(query, candidates, timeout_s, started + timeout_s)
        failed, self._failed = self._failed, self._failure(outcome)
        quiet = failed is not None and failed == self._failed  # told already
        return self.tally.count(outcome.timed(len(candidates), now() - started, quiet=quiet))

    def _failure(self, outcome: RerankOutcome) -> tuple[Any, ...] | None:
        """What ``outcome``'s failure is, to tell a repeat from a change: its words, or,
        for a reranker not asked (``unavailable``: its start failed, its backoff, parked),
        its state and last failure, as its detail counts down to its next start (``next
        retry in 41 s``). A failure in new words, or one that parks it, is told again.
        ``None`` for a verdict."""
        if outcome.reason is None:
            return None
        if outcome.reason == "unavailable":
            health = self.slot.health
            return (outcome.reason, health.state, health.last_failure)
        return (outcome.reason, outcome.detail)

    async def _ask(self, client: PipeClient, params: dict[str, Any], deadline: float) -> _Reply:
        """The ``rerank`` call's result: written at once and settled (validated) in the
        pipe's read callback into an ``Inbox``, as a fan-out's leg is (no future, no wake
        of its own), or, when the pipe cannot take it whole now, written in turn and
        awaited. An error reply, a bad shape (``MalformedReply``), a broken stream or the
        deadline raises."""
        inbox = Inbox(self._loop)
        call = client.start_call(
            "rerank", params, deadline=deadline, on_settled=inbox.put, model=_Reply
        )
        if call is None:
            waited: _Reply = await client.call("rerank", params, deadline=deadline, model=_Reply)
            return waited
        try:
            await inbox.take()
        finally:
            if call.open:  # given up (cancelled): its id abandoned, a late reply counted
                call.abandon()
        if call.error is not None:
            raise call.error
        reply: _Reply = call.value
        return reply

    async def _rerank(
        self, query: str, candidates: list[dict[str, Any]], timeout_s: float, deadline: float
    ) -> RerankOutcome:
        pool, slot = self.pool, self.slot
        ms = f"{timeout_s * 1000:.0f} ms"
        conn = slot.live()  # running: asked at once, with no scope to wait in
        died = None
        if conn is None:
            # It died between asks (killed, out of memory): explained and counted as a
            # crash mid-call is (its exit status or signal, its stderr's tail), by its
            # watcher as it exited or here, so this ask says why it restarts.
            dead = slot.conn
            if isinstance(dead, ProviderConnection):
                await pool.exited(slot, dead, deadline)
            crash = pool.take_crash(slot)
            died = f"{crash.reason}: {crash.message}" if crash is not None else None
        if conn is None:
            with anyio.move_on_after(max(0.0, deadline - now())):
                try:
                    conn = await pool.ensure(slot, deadline)
                except HostdError as exc:
                    detail = f"{exc.reason}: {exc.message}"
                    if died is not None:
                        return RerankOutcome(reason="crashed", detail=f"{died}; {detail}")
                    return RerankOutcome(reason="unavailable", detail=detail)
        if conn is None:  # the start goes on in the pool's task group
            detail = f"not started within {ms}"
            if died is not None:
                return RerankOutcome(reason="crashed", detail=f"{died}; restarting: {detail}")
            return RerankOutcome(reason="starting", detail=detail)
        client = getattr(conn, "client", None)
        if not (isinstance(client, PipeClient) and isinstance(client.codec, JsonRpcCodec)):
            return RerankOutcome(reason="unavailable", detail="a reranker speaks JSON-RPC")
        params = {"query": query, "candidates": candidates}
        reply: _Reply | None = None
        broke: HostdError | None = None
        timed_out = False
        sent_mark = slot.health.timeout_mark  # asks out together time out as one miss
        try:  # one call, its deadline the transport's timer (its id abandoned then)
            reply = await self._ask(client, params, deadline)
        except MalformedReply as exc:  # answered, in the wrong shape: alive and in sync
            pool.record_leg(slot, "error", "bad rerank result")
            # Where and what was expected, never the value it held.
            return RerankOutcome(reason="bad_reply", detail=exc.message)
        except ProviderError as exc:  # it answered, with an error: alive and in sync
            pool.record_leg(slot, "error", exc.message)
            return RerankOutcome(reason="error", detail=exc.message)
        except HostdError as exc:  # its stream ended or broke: restarted with backoff
            broke = exc
        except TimeoutError:
            timed_out = True
        if broke is not None:
            # What the process says of it, as a provider's leg gets (its exit status, the
            # tail of its stderr, redacted: C8), no later than the verdict's deadline;
            # out of the exchange's scope, so that deadline cannot turn a crash into a
            # timeout. Then counted, so its health quotes the same words.
            broke = await conn.explain(broke, deadline)
            pool.broken(slot, conn, broke)
            reason = "crashed" if isinstance(broke, ProviderCrashed) else "bad_reply"
            return RerankOutcome(reason=reason, detail=f"{broke.reason}: {broke.message}")
        if timed_out:
            # Counted like a provider's missed deadline: three in a row, each asked after
            # the one before it timed out, with no verdict in between, not even a late
            # one, and it is restarted (``is_hung``).
            pool.record_leg(slot, "timeout", f"no verdict within {ms}", sent_mark=sent_mark)
            return RerankOutcome(reason="timeout", detail=_late(ms, slot.health.late_replies))
        assert reply is not None  # every other way out returned above
        pool.record_leg(slot, "ok", None)
        info = conn.info
        model = reply.model or (f"{info.name}@{info.version}" if info is not None else None)
        return RerankOutcome(tuple(reply.order), model)
