"""Running a fan-out plan: write every planned request, gather the raw replies.

The requests of ``send`` legs are written first, back to back, before any
await (so the last provider's clock starts nearly as early as the first's), each
with its leg's deadline: ``start_query`` writes it at once when the binding
pipelines and the pipe takes it whole, and from then on the leg is one call —
its reply read, matched and validated in the pipe's read callback, or its
deadline's timer failing it with ``TimeoutError`` (the id abandoned, so a late
reply is counted, not read as a fault) — that tells the fan-out's ``Inbox`` as
it lands. The fan-out's own task gathers them there, waking once per batch of
landed replies: no task, no cancel scope per leg. What cannot go that way runs in
one task group beside it: a ``start`` leg waits for its provider's start (the
pool's, bounded by this leg's deadline; for a request that named no ``timeout_ms``,
or named ``ready_wait_ms``, by the provider's start deadline and that wait, the
leg's own bound counting from its ready), passes the same ``gate`` and is written
the same way; a leg whose write must wait (a lock-step provider, a full pipe, an
HTTP or SDK binding) awaits ``query`` under its deadline; the planned
``context/verify`` calls, each ended by its provider's leg deadline (for a leg that
waits for its provider's start, counted from the same ready: ``waited``). Once every
reply is in, the caller's last step (the turn's source reads) runs. Consent is
decided once: by the plan for a provider live when it planned, else once after
its start (``ready``, shared by its leg and its verify). A provider in a crash loop
is not waited for (``behind``), whatever ``ready_wait_ms`` the request names (that
waits for starts and warm-ups, and a crash loop's restart fails again): its restart
runs in the pool and its leg is ``crashed``, code ``restarting``, at once: a fault, not
``warming`` (which says "ask again shortly"), yet no failure of its own in its health
(it never reached the provider: ``sent`` False, as for every failure told at once, the
query never sent: a parked provider's, one down whose next start is not waited for).
Every leg's failure becomes a ``LegReply`` value, so siblings are never cancelled; the
pool is told of broken connections.
"""

from __future__ import annotations

import asyncio
import math
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

import anyio

from hostd._hints import RESTARTING
from hostd.errors import (
    HostdError,
    ProtocolFault,
    ProviderCrashed,
    ProviderTimeout,
)
from hostd.protocol import (
    ContextQuery,
    ContextQueryResult,
    FrameIdentity,
    FrameVerdict,
)
from hostd.transport import (
    EmptyResult,
    PartialResult,
    ProviderLink,
    StartedCall,
    progress_figures,
)

from ._clock import now
from ._gate import ConsentGate, destination_of
from ._health import failures_in_a_row
from ._outcome import (
    WARMING_PARTIAL,
    LegReply,
    building,
    failure_of,
    progress_figure,
    stderr_tail_of,
    warming_note,
    warming_phase,
)
from ._plan import FanOutPlan, LegAction, LegPlan, gate, trim_representations
from ._pool import ProviderPool, Slot
from ._report import LegStatus
from .verify import VerifyReply, ask_one

__all__ = ["Inbox", "LegReply", "run_fan_out"]

#: Called with each leg's reply as it lands (outside the leg's deadline); it does not
#: wait: a caller's callback that awaits runs in a task of the caller's.
OnReply = Callable[["LegReply"], None]
#: What a ``send`` leg's early write left: the started call, nothing, or its failure.
Written = StartedCall | HostdError | None
#: A live connection and the scopes it still lacks consent for (C1, C2, C6).
Ready = tuple[ProviderLink, tuple[str, ...]]
T = TypeVar("T")


def no_consent_message(provider_id: str, missing: Sequence[str], destination: str = "") -> str:
    """Why a provider got no payload, and the command that records what it lacks; for a
    remote provider, the origin the consent must name."""
    scope = missing[0] if len(missing) == 1 else "SCOPE"
    each = "it" if len(missing) == 1 else "each"
    at = f" for {destination}" if destination else ""
    return (
        f"no consent recorded{at} for scope(s): {', '.join(missing)}; "
        f"`hostd consent grant {provider_id} {scope}` records {each}"
    )


class _Once(Generic[T]):
    """One provider's decision (its start and consent gate, its wait for its start),
    shared by its leg and its verify."""

    __slots__ = ("done", "error", "value")

    def __init__(self) -> None:
        self.done = anyio.Event()
        self.value: T | None = None
        self.error: HostdError | None = None


async def _decide_once(
    table: dict[str, _Once[T]],
    provider_id: str,
    decide: Callable[[], Awaitable[T]],
    lost: Callable[[], HostdError],
) -> T:
    """``decide()``'s value (or its ``HostdError``, raised) for ``provider_id``, run by
    whoever asks first, the others waiting for it; ``lost()``: the error they all get
    when that first asker was cancelled before it decided."""
    once = table.get(provider_id)
    if once is None:
        once = table[provider_id] = _Once()
        try:
            once.value = await decide()
        except HostdError as exc:
            once.error = exc
            raise
        finally:
            if once.value is None and once.error is None:
                once.error = lost()
            once.done.set()
    await once.done.wait()
    if once.error is not None:
        raise once.error
    assert once.value is not None
    return once.value


@dataclass(slots=True, frozen=True)
class _Waited:
    """A provider waited for (``_Runner.waited``): its connection once it answers
    queries, None when the request's ``ready_wait_ms`` ran out first; ``at``: when the
    wait ended (the engine's clock); ``again``: a restart, not a first start."""

    conn: ProviderLink | None
    at: float
    again: bool

    def deadline(self, leg: LegPlan) -> float:
        """The leg's deadline, its bound counted from this ready when that is later."""
        return max(leg.deadline, self.at + leg.limit_ms / 1000)


def _not_ready(leg: LegPlan) -> HostdError:
    """What a leg and its verify get when the one that waited first was cancelled."""
    return ProviderTimeout(f"{leg.provider_id}: provider not ready")


class Inbox:
    """Where written calls land, told from the pipe's read callback (or their deadline's
    timer) with the time they landed, on the engine's clock (``now``: the plan's start
    and every deadline are read on it): the fan-out's task wakes once per batch."""

    __slots__ = ("_loop", "_wake", "landed")

    def __init__(self, loop: asyncio.AbstractEventLoop | None = None) -> None:
        self.landed: list[tuple[StartedCall, float]] = []
        self._wake: asyncio.Future[None] | None = None
        self._loop = loop if loop is not None else asyncio.get_running_loop()

    def put(self, call: StartedCall) -> None:
        self.landed.append((call, now()))
        wake = self._wake
        if wake is not None and not wake.done():
            wake.set_result(None)

    async def take(self) -> list[tuple[StartedCall, float]]:
        while not self.landed:
            self._wake = self._loop.create_future()
            try:
                await self._wake
            finally:
                self._wake = None
        landed, self.landed = self.landed, []
        return landed


def _write(
    conn: ProviderLink, query: ContextQuery, wire: Mapping[str, Any] | None = None
) -> StartedCall | None:
    """The one send path's first step: write now if the connection can take it whole
    (``wire``: the query's wire form, when the plan already built it)."""
    return conn.start_query(dict(wire) if wire is not None else query)


async def _result(
    conn: ProviderLink, query: ContextQuery, call: StartedCall | None
) -> ContextQueryResult:
    """The one send path's second step: the reply (writing first if nothing was written)."""
    return await (call.result() if call is not None else conn.query(query))


def restarting_message(slot: Slot) -> str:
    """What a crash loop's leg (code ``restarting``) and ``warm_all`` say of ``slot``: its
    restart runs behind, not waited for, and its last failure (``hostd._hints`` reads
    the words after ``its last failure: ``)."""
    health = slot.health
    return (
        f"provider restarting after {failures_in_a_row(health.consecutive_failures)}, "
        "not waited for; its last failure: "
        f"{health.last_failure}"
    )


class _Runner:
    __slots__ = (
        "behind_ids",
        "clock",
        "consent",
        "on_reply",
        "plan",
        "pool",
        "ready_by",
        "ready_links",
        "sent",
        "slots",
        "starts",
        "waits",
    )

    def __init__(
        self,
        plan: FanOutPlan,
        pool: ProviderPool,
        consent: ConsentGate | None,
        on_reply: OnReply,
        slots: Mapping[str, Slot] | None = None,
    ) -> None:
        self.plan = plan
        self.pool = pool
        #: The slots as the plan saw them (``slots``, else the pool's now): a reload that
        #: removes or replaces a provider meanwhile leaves this request its old slot,
        #: whose legs fail once it is stopped (or at once, when it was retired already).
        self.slots = dict(slots if slots is not None else pool.slots)
        self.consent = consent
        self.on_reply = on_reply
        #: The fan-out's start (the loop's clock), as the plan read it: every latency
        #: counts from it, as every deadline does.
        self.clock = plan.started
        #: When the request stops waiting for providers that are not ready (anyio time).
        wait = plan.ready_wait_ms
        self.ready_by = math.inf if wait is None else plan.started + wait / 1000
        #: Consent as the plan decided it, for providers live at planning time.
        self.ready_links: dict[str, Ready] = {}
        #: Consent decided once after a start, for the others.
        self.starts: dict[str, _Once[Ready]] = {}
        #: A ``wait_ready`` leg's wait for its provider's start, once for its leg and its
        #: verify: both bounds count from the ready it found (``_Waited``).
        self.waits: dict[str, _Once[_Waited]] = {}
        #: Each sent leg's provider's ``Health.timeout_mark`` as it was sent: legs out
        #: together that time out together are one miss (``record_leg``).
        self.sent: dict[str, int] = {}
        #: Whether each provider met is left restarting behind this request (``behind``):
        #: decided once, for its leg and its verify alike.
        self.behind_ids: dict[str, bool] = {}

    async def ready(self, leg: LegPlan) -> Ready:
        """The provider's live connection and its missing scopes: as the plan decided
        them for a connection live when it planned, else decided once after its
        start (by ``gate``), whoever asks first — its leg or its verify."""
        slot = self.slots[leg.provider_id]
        planned = self.ready_links.get(leg.provider_id)
        if planned is not None and planned[0].alive:
            return planned

        async def start() -> Ready:
            if self.behind(slot):  # its verify too: no wait for a restart it is not owed
                raise ProviderCrashed(self.restarting_message(slot), stage="restart")
            return await self._start(slot, leg)

        return await _decide_once(self.starts, leg.provider_id, start, lambda: _not_ready(leg))

    def behind(self, slot: Slot) -> bool:
        """Whether this request leaves ``slot``'s restart behind it: a provider in a crash
        loop (``pool.restart_behind``, which begins that restart if none is under way),
        even when the request names a ``ready_wait_ms``: that wait is for a start or a
        warm-up, and ``hostd mcp`` names one with every call, so a provider failing at
        each start would cost every call its wait and be told as one still starting.
        Decided once per provider, when its leg or verify first asks."""
        pid = slot.spec.id
        behind = self.behind_ids.get(pid)
        if behind is None:
            behind = self.pool.restart_behind(slot)
            self.behind_ids[pid] = behind
        return behind

    @staticmethod
    def restarting_message(slot: Slot) -> str:
        return restarting_message(slot)

    async def _start(self, slot: Slot, leg: LegPlan) -> Ready:
        # Ready (or failed its warm-up) within the caller's bound, else warming at its end.
        conn = await self.pool.ready(slot, leg.deadline)
        assert conn.info is not None and conn.capabilities is not None
        _, missing = gate(leg.query, leg.provider_id, conn.info, conn.capabilities, self.consent)
        return conn, missing

    def reply(
        self, leg: LegPlan, query: ContextQuery, at: float | None = None, **fields: Any
    ) -> LegReply:
        """The leg's reply, its latency up to ``at`` (when it landed), else now (both on
        the event loop's clock)."""
        latency = ((now() if at is None else at) - self.clock) * 1000
        return LegReply(
            leg.provider_id,
            query,
            latency_ms=latency,
            sent_mark=self.sent.get(leg.provider_id),
            **fields,
        )

    async def gather(
        self,
        calls: dict[StartedCall, tuple[LegPlan, ProviderLink]],
        inbox: Inbox,
        between: Callable[[], Awaitable[None]] | None = None,
    ) -> None:
        """Every written leg's reply, as it lands in ``inbox``, judged and handed to
        ``on_reply``; after each batch, while calls are still out, ``between()`` (work
        that can overlap the wait: replies landing meanwhile wait in ``inbox``, each
        deadline is its own timer). Given up (cancelled), the calls still out are
        abandoned."""
        left = len(calls)
        try:
            while left:
                for call, at in await inbox.take():
                    leg, conn = calls[call]
                    left -= 1
                    self.on_reply(await self._landed(leg, conn, call, at))
                if left and between is not None:
                    await between()
        finally:
            for call in calls:
                if call.open:  # given up: its id abandoned, a late reply counted
                    call.abandon()

    async def _landed(
        self, leg: LegPlan, conn: ProviderLink, call: StartedCall, at: float
    ) -> LegReply:
        exc = call.error
        if exc is None:
            return self._answered(leg, leg.query, conn, call.value, at)
        if isinstance(exc, TimeoutError):
            return self._timed_out(leg, leg.query, conn, at)
        if isinstance(exc, HostdError):
            return await self._failed(leg, leg.query, conn, exc, leg.deadline, at)
        raise exc  # a bug of ours, not the provider's: it is not a leg's failure

    def _answered(
        self,
        leg: LegPlan,
        query: ContextQuery,
        conn: ProviderLink | None,
        result: ContextQueryResult,
        at: float | None = None,
    ) -> LegReply:
        caps = conn.capabilities if conn is not None else None
        kinds = tuple(caps.query.kinds) if caps is not None else ()
        lost: list[str] = []
        causes: tuple[str, ...] = ()
        if isinstance(result, PartialResult):
            lost, causes = [result.lost], result.causes
        built: tuple[int, int] | None = None
        if isinstance(result.warming, dict) or result.warming is True:
            # Answered while it warmed, as it says: from what it had built when the query
            # came (its ready note may have come between), as far as it says.
            figures = progress_figures(result.warming)
            lost.append(warming_note(figures))
            causes, built = (*causes, WARMING_PARTIAL), building(figures)
        elif conn is not None and conn.readiness.warming:
            # Answered before it said ready, by a provider that does not say so in its
            # reply: from what it has built so far (an index embedded in part), as far as
            # its last progress says.
            lost.append(warming_note(conn.readiness.progress))
            causes = (*causes, WARMING_PARTIAL)
            built = building(conn.readiness.progress)
        return self.reply(
            leg,
            query,
            at,
            frames=result.frames,
            declared_kinds=kinds,
            truncated=result.truncated,
            dropped=result.dropped_estimate,
            behind=result.unindexed_changes,
            lost="; ".join(lost) or None,
            lost_causes=causes,
            building=built,
            empty=result.why if isinstance(result, EmptyResult) else None,
        )

    def _timed_out(
        self,
        leg: LegPlan,
        query: ContextQuery,
        conn: ProviderLink | None,
        at: float | None = None,
        waited: str = "",
    ) -> LegReply:
        """Past the leg's deadline: warming, starting, or a timeout (a lock-step stream
        abandoned mid-request is discarded). ``waited``: what the leg waited for before
        its own bound began (``_waited``), said after it, so the message accounts for
        the time its latency shows."""
        slot = self.slots[leg.provider_id]
        if conn is None:
            conn = slot.live()  # handshaken while we waited for its readiness?
            if conn is None:  # still starting: the start (in the pool) goes on without us
                return self.warming(leg, query, "starting", "provider starting")
        if conn.readiness.warming:
            return self.warming(leg, query, "warming", "provider warming", at)
        if not conn.alive and slot.conn is conn:
            self.pool.discard(slot)  # a lock-step stream abandoned mid-request
        return self.reply(
            leg,
            query,
            at,
            status=LegStatus.TIMEOUT,
            error_code="timeout",
            error_message=f"no reply within {leg.limit_ms:.0f} ms{waited}",
        )

    async def _failed(
        self,
        leg: LegPlan,
        query: ContextQuery,
        conn: ProviderLink | None,
        exc: HostdError,
        deadline: float,
        at: float | None = None,
    ) -> LegReply:
        """A typed failure, with what the process said of it (no later than
        ``deadline``); a crash, or a protocol fault that leaves the stream in an unknown
        state, breaks the connection. A malformed reply fails this leg alone: its
        connection, and every other call on it, goes on (``breaks_connection``). A
        failure told at once, the query never sent (``HostdError.unsent``: its provider
        parked, or down with its next start not waited for), says so (``sent``)."""
        sent = not exc.unsent  # read before a reload's words replace it
        retired = self.slots[leg.provider_id].retired
        if retired is not None:  # stopped by a config reload under this leg: say so
            exc = retired
        elif conn is not None:
            exc = await conn.explain(exc, deadline)
        if isinstance(exc, ProviderCrashed) or (
            isinstance(exc, ProtocolFault) and exc.breaks_connection
        ):
            slot = self.slots[leg.provider_id]
            self.pool.broken(slot, conn, exc)
            if conn is not None:  # it ran, then broke: in a crash loop, started again now
                self.pool.restart_behind(slot)
        progress = conn.readiness.progress if conn is not None else None
        status, code, message, violations = failure_of(exc, progress)
        return self.reply(
            leg,
            query,
            at,
            status=status,
            error_code=code,
            error_message=message,
            phase=warming_phase(progress) if status is LegStatus.WARMING else None,
            stderr_tail=stderr_tail_of(exc),
            violations=violations,
            sent=sent,
        )

    async def leg(
        self,
        leg: LegPlan,
        written: StartedCall | HostdError | None,
        conn: ProviderLink | None,
    ) -> None:
        self.on_reply(await self._exchange(leg, written, conn))

    async def _exchange(
        self,
        leg: LegPlan,
        written: StartedCall | HostdError | None,
        conn: ProviderLink | None,
    ) -> LegReply:
        slot = self.slots[leg.provider_id]
        query = leg.query
        deadline = leg.deadline
        waited = ""
        if conn is None and not isinstance(written, HostdError) and self.behind(slot):
            # In a crash loop: its restart runs behind us, and the other providers'
            # frames come back now. Said with no await before ``on_reply`` counts it,
            # so the restart cannot end first and have this leg read as its answer.
            return self.reply(
                leg,
                query,
                # A fault, not ``warming``: asking again shortly will not help (``_hints``).
                status=LegStatus.CRASHED,
                error_code=RESTARTING,
                error_message=self.restarting_message(slot),
                sent=False,
            )
        try:
            if conn is None and leg.wait_ready and not isinstance(written, HostdError):
                # Wait for a cold provider up to its start deadline (or the request's
                # ready_wait_ms, when sooner), then give the leg its own bound from there.
                ready = await self.waited(leg)
                if ready.conn is None:
                    return self._not_ready(leg, query)
                conn = ready.conn
                waited = self._waited(leg, ready)
                deadline = ready.deadline(leg)
                written = None
                started = True
            else:
                started = conn is None
            with anyio.CancelScope(deadline=deadline) as scope:
                if isinstance(written, HostdError):
                    raise written
                call = written
                if started:  # a ``start`` leg: not running, or not ready yet; consent is
                    # judged once, after the start (ready within this leg's bound)
                    conn, missing = await self.ready(leg)
                    if missing:
                        return self.no_consent(leg, query, missing)
                    assert conn.capabilities is not None
                    query = trim_representations(query, conn.capabilities)
                    call = _write(conn, query)
                assert conn is not None
                if leg.provider_id not in self.sent:  # written now, or when its turn comes
                    self.sent[leg.provider_id] = slot.health.timeout_mark
                result = await _result(conn, query, call)
            if scope.cancelled_caught:
                raise TimeoutError
        except TimeoutError:
            return self._timed_out(leg, query, conn, waited=waited)
        except HostdError as exc:
            return await self._failed(leg, query, conn, exc, deadline)
        return self._answered(leg, query, conn, result)

    async def waited(self, leg: LegPlan) -> _Waited:
        """A ``wait_ready`` leg's provider once ready (``_wait_ready``), and when it was:
        waited for once, by its leg or its verify, whichever asks first."""
        slot = self.slots[leg.provider_id]

        async def wait() -> _Waited:
            again = slot.health.starts > 0  # a restart (after a crash, a hang), not a first
            conn = await self._wait_ready(slot)
            return _Waited(conn, now(), again)

        return await _decide_once(self.waits, leg.provider_id, wait, lambda: _not_ready(leg))

    def _waited(self, leg: LegPlan, ready: _Waited) -> str:
        """What a leg that waited for its provider's start says after its timeout, when
        that wait ran past the leg's own bound: its bound then began late, and "no reply
        within 2000 ms" alone would not account for a leg that took 7 s. Empty when the
        wait ended within the bound."""
        waited_ms = (ready.at - self.clock) * 1000
        if waited_ms <= leg.limit_ms:
            return ""
        what = "restart" if ready.again else "start"
        return f", after waiting {waited_ms:.0f} ms for its {what}"

    async def _wait_ready(self, slot: Slot) -> ProviderLink | None:
        """The connection once the provider answers queries (``pool.ready``: no later
        than its start deadline), or None when the request's ``ready_wait_ms`` ran out
        first and it still does not (its start and warm-up go on in the pool)."""
        with anyio.move_on_at(self.ready_by):
            return await self.pool.ready(slot)
        conn = slot.live()  # it may have become ready as the wait ran out
        return conn if conn is not None and conn.readiness.answers.is_set() else None

    def _not_ready(self, leg: LegPlan, query: ContextQuery) -> LegReply:
        """Not ready within the request's ``ready_wait_ms``: ``starting`` before its
        handshake, else ``warming``; nothing was written to it."""
        within = self.plan.ready_wait_ms
        if self.slots[leg.provider_id].live() is None:
            return self.warming(leg, query, "starting", "provider starting", within_ms=within)
        return self.warming(leg, query, "warming", "provider warming", within_ms=within)

    def warming(
        self,
        leg: LegPlan,
        query: ContextQuery,
        code: str,
        what: str,
        at: float | None = None,
        within_ms: float | None = None,
    ) -> LegReply:
        """A leg whose provider is not ready within the leg's bound (``warming``), or
        within ``within_ms`` when that was the bound it was waited for by."""
        slot = self.slots[leg.provider_id]
        conn = slot.conn
        progress = conn.readiness.progress if conn is not None else {}
        figure = progress_figure(progress)
        bound = leg.limit_ms if within_ms is None else within_ms
        return self.reply(
            leg,
            query,
            at,
            status=LegStatus.WARMING,
            error_code=code,
            error_message=f"{what}, not ready within {bound:.0f} ms{figure}",
            phase=warming_phase(progress),
        )

    def no_consent(self, leg: LegPlan, query: ContextQuery, missing: Sequence[str]) -> LegReply:
        return self.reply(
            leg,
            query,
            status=LegStatus.NO_CONSENT,
            error_code="no_consent",
            error_message=no_consent_message(
                leg.provider_id, missing, destination_of(self.consent, leg.provider_id)
            ),
            missing_scopes=tuple(missing),
        )

    async def send_verify(
        self, provider_id: str, identities: list[FrameIdentity]
    ) -> list[FrameVerdict]:
        """``context/verify`` to one provider (V1: identities only), on the consent its
        leg was planned or started with: nothing is sent without it."""
        leg = self.plan.leg(provider_id)
        assert leg is not None, "verify is planned only for the fan-out's providers"
        conn, missing = await self.ready(leg)
        if missing:
            where = destination_of(self.consent, provider_id)
            raise HostdError(no_consent_message(provider_id, missing, where))
        response = await conn.verify(identities)
        return list(response.verdicts)

    async def verify(self, provider_id: str, replies: dict[str, VerifyReply]) -> None:
        plan = self.plan
        assert plan.verify is not None
        entry = plan.verify.asks[provider_id]
        leg = plan.leg(provider_id)
        limit = leg.limit_ms if leg is not None else None
        deadline = leg.deadline if leg is not None else now()
        if (
            leg is not None
            and leg.action is LegAction.START
            and leg.wait_ready
            and not self.behind(self.slots[provider_id])
        ):
            # Its leg waits for the provider's start and counts its bound from its ready:
            # so does its verify, from the same ready, or it would time out (and fail the
            # start its leg shares) while the provider starts.
            try:
                ready = await self.waited(leg)
                if ready.conn is None:  # not within the request's ready_wait_ms, as its leg
                    raise _not_ready(leg)
            except HostdError as exc:  # not asked: a start it failed is not tried again
                error = f"{type(exc).__name__}: {exc}"  # as ``ask_one`` says a failure
                replies[provider_id] = VerifyReply(provider_id, None, error, limit_ms=limit)
                return
            deadline = ready.deadline(leg)
        replies[provider_id] = await ask_one(
            provider_id, entry, self.send_verify, deadline=deadline, limit_ms=limit
        )


async def run_fan_out(
    plan: FanOutPlan,
    pool: ProviderPool,
    consent: ConsentGate | None,
    on_reply: OnReply,
    then: Callable[[dict[str, VerifyReply]], Awaitable[T]],
    *,
    loop: asyncio.AbstractEventLoop | None = None,
    links: Mapping[str, ProviderLink] | None = None,
    between: Callable[[], Awaitable[None]] | None = None,
    slots: Mapping[str, Slot] | None = None,
) -> T:
    """Write every planned request and gather the replies (each handed to ``on_reply``
    as it lands) and the planned verify replies; once all are in, ``then(verify_replies)``
    runs (the turn's source reads) and its value is returned. ``loop``: the running
    event loop, when the caller knows it (else looked up). ``links``: the live
    connections the plan was made from, by provider id, when called with no await since
    (else each is asked for again). ``between``: awaited after each batch of written
    legs lands while others are still out (the verify stage's early checks). ``slots``:
    the slots the plan was made from, by provider id (else the pool's as they are)."""
    runner = _Runner(plan, pool, consent, on_reply, slots)
    inbox = Inbox(loop)
    settled: list[LegReply] = []
    written: dict[StartedCall, tuple[LegPlan, ProviderLink]] = {}
    waiting: list[tuple[LegPlan, Written, ProviderLink | None]] = []
    for leg in plan.legs:
        if not leg.judged:
            live = None
        elif links is not None:
            live = links.get(leg.provider_id)
        else:
            live = runner.slots[leg.provider_id].live()
        if live is not None:
            runner.ready_links[leg.provider_id] = (live, leg.missing_scopes)
        if leg.action is LegAction.SKIP:
            settled.append(
                runner.reply(
                    leg,
                    leg.query,
                    status=LegStatus.SKIPPED,
                    error_code="no_budget",
                    error_message="budget share 0",
                )
            )
        elif leg.action is LegAction.NO_CONSENT:
            settled.append(runner.no_consent(leg, leg.query, leg.missing_scopes))
        elif leg.action is LegAction.SEND:
            assert live is not None, "a send leg is planned only on a live connection"
            runner.sent[leg.provider_id] = runner.slots[leg.provider_id].health.timeout_mark
            try:
                call = live.start_query(
                    dict(leg.wire) if leg.wire is not None else leg.query,
                    deadline=leg.deadline,
                    on_settled=inbox.put,
                )
            except HostdError as exc:  # the leg's task reports it like any other failure
                waiting.append((leg, exc, live))
                continue
            if call is not None:
                written[call] = (leg, live)
            else:  # written by the leg's task, which awaits room or the binding's turn
                waiting.append((leg, None, live))
        else:
            waiting.append((leg, None, None))
    replies: dict[str, VerifyReply] = {}
    asks = list(plan.verify.asks) if plan.verify is not None else []
    try:
        for reply in settled:
            on_reply(reply)
        if waiting or asks:
            async with anyio.create_task_group() as tg:
                for leg, w, conn in waiting:
                    tg.start_soon(runner.leg, leg, w, conn)
                for pid in asks:
                    tg.start_soon(runner.verify, pid, replies)
                await runner.gather(written, inbox, between)
        else:  # every leg written at once: gathered here, no task, no scope
            await runner.gather(written, inbox, between)
    finally:
        for call in written:
            if call.open:  # given up before the gather began
                call.abandon()
    return await then(replies)
