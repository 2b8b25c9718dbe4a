"""``Host``: the parallel fan-out engine over provider connections.

Owns the life of every configured provider (lazy or boot start, restart with
bounded exponential backoff following ``_health``'s decisions, teardown with
no orphan left, also when cancelled) and one request's fan-out: split the
budget with ``budget_split`` before building each provider's query, check
consent before any payload (C1, C2, C6), run every leg concurrently in one
task group under its own timeout, audit each reply (``_audit``), then hand
the accepted frames to the verification stage. A leg's failure is a
``LegReport`` value, never an exception that cancels its siblings; results
are ordered by provider id and FrameId, never by arrival.
"""

from __future__ import annotations

import functools
import gc
import inspect
import math
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from contextlib import AsyncExitStack
from dataclasses import replace
from itertools import repeat
from operator import itemgetter
from pathlib import Path
from types import MappingProxyType
from typing import Any, NamedTuple

import anyio
import structlog
from anyio.abc import TaskGroup

from hostd import __version__
from hostd.errors import (
    BadRequest,
    HandshakeFailed,
    HostdError,
    ProtocolFault,
    ProviderCrashed,
    ProviderError,
    ProviderTimeout,
    ShuttingDown,
    UnknownProvider,
)
from hostd.protocol import (
    ContextQuery,
    FrameId,
    FrameIdentity,
    FrameVerdict,
    HostInfo,
    Violation,
    check_representation_preferences,
)
from hostd.transport import (
    DEFAULT_MAX_LINE_BYTES,
    ProviderConnection,
    StartedCall,
    StderrPolicy,
)

from ._audit import LegAudit, audit_leg
from ._gate import ConsentGate, missing_consent
from ._health import (
    Health,
    ProviderState,
    RestartPolicy,
    StartAction,
    decide_start,
    record_failure,
    record_leg,
    record_started,
)
from ._report import Excluded, FanOut, LegReport, LegStatus, report_map
from ._spec import ProviderSpec

__all__ = ["Host", "LegDone"]

log = structlog.get_logger("hostd.engine")

#: ``on_leg_done`` callback: called with each report as its leg finishes (sync or async).
LegDone = Callable[[LegReport], Any]

#: Whether this process's start-up objects were already moved out of the collector's view.
_GC_FROZEN = False


#: The young generation's threshold while a host runs (CPython's default is 700).
#: A fan-out allocates a few thousand tracked objects (frames, their dicts and lists)
#: that stay alive until the next request replaces them; at 700 that triggers about
#: three young and some older collections per fan-out, each walking every frame still
#: held (≈1 ms of a 50-frame × 8 fan-out). The count is allocations minus
#: deallocations, so at 10,000 a steady stream of requests, each freeing what the last
#: one held, rarely reaches it; cyclic garbage still gets collected, only later.
GC_YOUNG_THRESHOLD = 10_000


def _tune_gc() -> None:
    """Once per process: ``gc.freeze()`` the modules, schemas and provider state alive at
    start-up (never garbage, yet every full collection would walk them all again: tens of
    milliseconds in the middle of a fan-out) and raise the young generation's threshold
    to ``GC_YOUNG_THRESHOLD`` (never lowered)."""
    global _GC_FROZEN
    if not _GC_FROZEN:
        _GC_FROZEN = True
        gc.collect()
        gc.freeze()
        young, *older = gc.get_threshold()
        if young and young < GC_YOUNG_THRESHOLD:  # 0 means "disabled": leave it so
            gc.set_threshold(GC_YOUNG_THRESHOLD, *older)


#: The state of every accepted frame when verification is off: one shared mapping,
#: read-only, so 400 frames need no 400 dicts (readers copy what they keep).
_UNVERIFIED: Mapping[str, Any] = MappingProxyType({"state": "unverified"})

#: ``Host(verify_stage=...)`` default: a ``VerifyStage`` re-reading each provider's
#: sources under its spec's ``trusted_roots``. Pass ``None`` to turn verification off.
DEFAULT_VERIFY_STAGE: Any = object()


def _split(global_budget: int, weights: Sequence[float]) -> list[int]:
    try:
        return list(_split_cached(global_budget, tuple(weights)))
    except ValueError as exc:  # a negative budget, all weights zero, …
        raise BadRequest(f"cannot split the budget: {exc}", field="budget") from exc


@functools.lru_cache(maxsize=512)
def _split_cached(global_budget: int, weights: tuple[float, ...]) -> tuple[int, ...]:
    """``budget_split`` is exact (rational arithmetic) and pure: the same budget over the
    same weights, as every turn of an agent asks, is split once."""
    from hostd.compose import budget_split  # the engine's one import from compose

    return tuple(budget_split(global_budget, len(weights), list(weights)))


def _asked(share: int, global_budget: int, overfetch: float) -> int:
    """What a provider is asked for: its share times ``overfetch``, never over the whole
    budget. ``overfetch > 1`` lets honest providers together offer more than the budget,
    so the composer's ranking policy decides what gets in (B1 is judged on this figure)."""
    if share <= 0:
        return 0
    return min(global_budget, math.ceil(share * overfetch))


def _check_overfetch(overfetch: float) -> float:
    if not (isinstance(overfetch, int | float) and math.isfinite(overfetch) and overfetch >= 1):
        raise BadRequest(
            f"overfetch must be a finite number >= 1, got {overfetch!r}", field="overfetch"
        )
    return float(overfetch)


def _violations_of(exc: HostdError) -> tuple[Violation, ...]:
    raw = exc.data.get("violations") or []
    return tuple(Violation(v["rule"], v["field"], v["message"]) for v in raw if isinstance(v, dict))


class _Early(NamedTuple):
    """A leg whose request was written before any leg task started (``_send_early``)."""

    conn: ProviderConnection
    call: StartedCall


class _Slot:
    """One configured provider's runtime state inside the host."""

    __slots__ = ("conn", "health", "last_ack", "spec", "start_lock")

    def __init__(self, spec: ProviderSpec) -> None:
        self.spec = spec
        self.conn: ProviderConnection | None = None
        self.health = Health()
        self.last_ack: Any = None
        self.start_lock = anyio.Lock(fast_acquire=True)  # uncontended: no yield per leg


class Host:
    """The fan-out engine. ``async with Host(specs, state_dir=...) as host: ...``.

    ``consent`` is the gate (default: a ``ConsentStore`` under ``state_dir``;
    with neither, egress providers are always refused). ``verify_stage`` is
    the verification/reuse stage run after the leg audit (default: a
    ``hostd.engine.verify.VerifyStage`` over the specs' ``trusted_roots``;
    ``None``: frames are reported ``unverified``). ``freeze_gc`` tunes the cyclic
    collector once per process: what is alive once the host has started is
    moved out of its reach (``gc.freeze()``) and the young generation's
    threshold is raised to ``GC_YOUNG_THRESHOLD``, so a fan-out rarely pauses
    for a collection (both are process-wide; pass ``False`` to leave the
    collector alone).
    """

    def __init__(
        self,
        specs: Iterable[ProviderSpec],
        *,
        state_dir: str | Path | None = None,
        consent: ConsentGate | None = None,
        verify_stage: Any = DEFAULT_VERIFY_STAGE,
        host_roots: Sequence[str | Path] = (),
        start: str = "lazy",
        host_info: HostInfo | None = None,
        handshake_timeout_s: float = 5.0,
        grace_period_s: float = 2.0,
        max_line_bytes: int = DEFAULT_MAX_LINE_BYTES,
        restart_policy: RestartPolicy | None = None,
        stderr_policy: StderrPolicy | None = None,
        freeze_gc: bool = True,
    ) -> None:
        self._slots: dict[str, _Slot] = {}
        for spec in specs:
            if spec.id in self._slots:
                raise ValueError(f"duplicate provider id {spec.id!r}")
            self._slots[spec.id] = _Slot(spec)
        if start not in ("lazy", "boot"):
            raise ValueError("start must be 'lazy' or 'boot'")
        self.state_dir = Path(state_dir) if state_dir is not None else None
        self._consent = consent
        self._owns_consent = False
        if verify_stage is DEFAULT_VERIFY_STAGE:
            from .verify import VerifyStage

            verify_stage = VerifyStage(
                trusted_roots={pid: s.spec.trusted_roots for pid, s in self._slots.items()},
                host_roots=[str(r) for r in host_roots],
            )
        self.verify_stage = verify_stage
        self.start_mode = start
        self.host_info = host_info or HostInfo(name="hostd", version=__version__)
        self.handshake_timeout_s = handshake_timeout_s
        self.grace_period_s = grace_period_s
        self.max_line_bytes = max_line_bytes
        self.restart_policy = restart_policy or RestartPolicy()
        self.stderr_policy = stderr_policy
        self.freeze_gc = freeze_gc
        self._stack: AsyncExitStack | None = None
        self._tg: TaskGroup | None = None
        self._closing = False

    def __repr__(self) -> str:
        states = ", ".join(f"{pid}={s.health.state.value}" for pid, s in self._slots.items())
        return f"<Host providers=[{states}] closing={self._closing}>"

    # -- lifecycle -------------------------------------------------------------------

    async def __aenter__(self) -> Host:
        if self._consent is None and self.state_dir is not None:
            from .consent import ConsentStore

            self._consent = ConsentStore(self.state_dir)
            self._owns_consent = True
        stack = AsyncExitStack()
        self._tg = await stack.enter_async_context(anyio.create_task_group())
        self._stack = stack
        if self.start_mode == "boot":
            await self.start_all()
        if self.freeze_gc:
            _tune_gc()
        return self

    async def __aexit__(self, *exc_info: Any) -> bool | None:
        self._closing = True
        with anyio.CancelScope(shield=True):
            await self.stop_all()
        assert self._stack is not None and self._tg is not None
        self._tg.cancel_scope.cancel()
        try:
            # The body's own exception is not fed to the task group (it would come back
            # wrapped in an ExceptionGroup); returning None lets it propagate as it is.
            await self._stack.__aexit__(None, None, None)
            return None
        finally:
            if self._owns_consent and hasattr(self._consent, "close"):
                self._consent.close()  # type: ignore[union-attr]  # a ConsentStore has close()

    @property
    def consent(self) -> Any:
        """The consent gate/store (``ConsentStore``: grant, revoke, list, missing_scopes)."""
        return self._consent

    @property
    def specs(self) -> list[ProviderSpec]:
        return [s.spec for s in self._slots.values()]

    async def start_all(self) -> None:
        """Start every provider now (boot mode); a failure is recorded in its health."""

        async def one(slot: _Slot) -> None:
            try:
                with anyio.fail_after(self.handshake_timeout_s + self.grace_period_s):
                    await self._ensure(slot)
            except (HostdError, TimeoutError) as exc:
                log.warning("provider.start.failed", provider=slot.spec.id, error=str(exc))

        async with anyio.create_task_group() as tg:
            for slot in self._slots.values():
                tg.start_soon(one, slot)

    async def stop_all(self) -> None:
        """Tear every running provider down, concurrently (shielded by the caller)."""
        async with anyio.create_task_group() as tg:
            for slot in self._slots.values():
                if slot.conn is not None:
                    tg.start_soon(slot.conn.aclose)
                if slot.health.state is ProviderState.READY:
                    slot.health = _with_state(slot.health, ProviderState.STOPPED)

    # -- starting and restarting -----------------------------------------------------

    async def _ensure(self, slot: _Slot, deadline: float | None = None) -> ProviderConnection:
        """The live connection, (re)started per the health decisions (``_health``)."""
        conn = slot.conn
        if conn is not None and conn.alive:  # the steady state: no lock, no decision
            return conn
        async with slot.start_lock:
            while True:
                conn = slot.conn
                now = anyio.current_time()
                decision = decide_start(
                    slot.health,
                    alive=conn is not None and conn.alive,
                    now=now,
                    policy=self.restart_policy,
                )
                if decision.action is StartAction.USE:
                    assert conn is not None
                    return conn
                if decision.action is StartAction.GIVE_UP:
                    raise ProviderCrashed(
                        f"restart attempts exhausted ({slot.health.consecutive_failures}); "
                        f"last error: {slot.health.last_error}",
                        stage="restart",
                    )
                if decision.action is StartAction.WAIT:
                    if deadline is not None and now + decision.delay_s > deadline:
                        raise ProviderCrashed(
                            f"provider is down; next restart in {decision.delay_s * 1000:.0f} ms",
                            stage="backoff",
                        )
                    await anyio.sleep(decision.delay_s)
                    continue
                if self._closing:
                    raise ShuttingDown("host is shutting down")
                if conn is not None:
                    self._discard(slot)
                return await self._start(slot, deadline)

    async def _start(self, slot: _Slot, deadline: float | None) -> ProviderConnection:
        assert self._tg is not None, "Host used outside 'async with'"
        spec = slot.spec
        timeout = self.handshake_timeout_s
        if deadline is not None:
            timeout = max(0.001, min(timeout, deadline - anyio.current_time()))
        try:
            conn = await ProviderConnection.open(
                spec.id,
                spec.command,
                task_group=self._tg,
                binding=spec.binding,  # type: ignore[arg-type]  # ProviderSpec validated it
                env=spec.env,
                cwd=spec.cwd,
                host=self.host_info,
                handshake_timeout=timeout,
                grace=self.grace_period_s,
                max_line_bytes=self.max_line_bytes,
                stderr_policy=self.stderr_policy,
            )
        except HostdError as exc:
            slot.health = record_failure(
                slot.health,
                now=anyio.current_time(),
                error=f"{exc.reason}: {exc.message}",
                policy=self.restart_policy,
            )
            log.warning(
                "provider.start.failed", provider=spec.id, reason=exc.reason, error=exc.message
            )
            raise
        except anyio.get_cancelled_exc_class():
            # The leg's deadline fell inside the handshake: a failed start all the same.
            slot.health = record_failure(
                slot.health,
                now=anyio.current_time(),
                error="timeout: no handshake reply before the leg's deadline",
                policy=self.restart_policy,
            )
            raise
        slot.conn = conn
        slot.last_ack = conn.ack
        slot.health = record_started(slot.health)
        return conn

    def _discard(self, slot: _Slot) -> None:
        """Drop a broken connection; its teardown runs in the background (shielded)."""
        conn, slot.conn = slot.conn, None
        if conn is not None and not conn.closed and self._tg is not None:
            self._tg.start_soon(conn.aclose)

    def _broken(self, slot: _Slot, conn: ProviderConnection | None, exc: HostdError) -> None:
        """The process died or broke its stream: count a failure, schedule teardown."""
        if conn is None or slot.conn is not conn:
            return  # another leg already handled this connection
        slot.health = record_failure(
            slot.health,
            now=anyio.current_time(),
            error=f"{exc.reason}: {exc.message}",
            policy=self.restart_policy,
        )
        self._discard(slot)

    # -- fan-out -----------------------------------------------------------------------

    def _select(self, providers: Iterable[str] | None) -> list[_Slot]:
        if providers is None:
            return sorted(self._slots.values(), key=lambda s: s.spec.id)
        wanted = list(dict.fromkeys(providers))
        unknown = [p for p in wanted if p not in self._slots]
        if unknown:
            raise UnknownProvider(f"unknown provider(s): {', '.join(unknown)}", providers=unknown)
        return sorted((self._slots[p] for p in wanted), key=lambda s: s.spec.id)

    async def query_all(
        self,
        query: ContextQuery,
        global_budget: int,
        *,
        providers: Iterable[str] | None = None,
        session: str | None = None,
        timeout_ms: float | None = None,
        on_leg_done: LegDone | None = None,
        overfetch: float = 1.0,
    ) -> FanOut:
        """Fan ``query`` out to every (or the selected) provider and audit the replies.

        The budget is split with ``budget_split`` first; each provider's
        ``query.max_tokens`` is then ``min(global_budget, ceil(share * overfetch))``
        and B1 is judged against that asked figure (``LegReport.max_tokens``).
        With ``overfetch == 1`` nobody can offer more than the global budget
        together; above 1 the budget is contested and the composer's ranking
        policy decides what gets in. ``timeout_ms`` caps every leg's own timeout.
        """
        overfetch = _check_overfetch(overfetch)
        if self._closing:
            raise ShuttingDown("host is shutting down")
        if self._tg is None:
            raise RuntimeError("Host used outside 'async with'")
        slots = self._select(providers)
        shares = _split(global_budget, [s.spec.weight for s in slots]) if slots else []
        fan = FanOut(query=query, global_budget=global_budget, overfetch=overfetch)
        fan.shares = {s.spec.id: share for s, share in zip(slots, shares, strict=True)}
        fan.asked = {
            pid: _asked(share, global_budget, overfetch) for pid, share in fan.shares.items()
        }
        reports: list[LegReport] = []
        audits: dict[str, LegAudit] = {}
        stage = self.verify_stage
        plan = self._plan(stage, session, slots)
        replies: dict[str, Any] = {}

        clock = (time.perf_counter(), anyio.current_time())
        # Every request that can go out without waiting goes out now, back to back,
        # before any leg task starts: the last provider's clock starts nearly as early
        # as the first's, and the legs' own set-up runs while the providers work.
        early: dict[str, _Early] = {}
        wire = query.to_wire()
        for slot in slots:
            sent = self._send_early(slot, query, wire, fan.asked[slot.spec.id])
            if sent is not None:
                early[slot.spec.id] = sent

        async def run_leg(slot: _Slot, share: int) -> None:
            pid = slot.spec.id
            report, audit = await self._leg(
                slot, query, share, fan.asked[pid], timeout_ms, clock, early.get(pid)
            )
            reports.append(report)
            if audit is not None:
                audits[slot.spec.id] = audit
            if on_leg_done is not None:
                try:
                    out = on_leg_done(report)
                    if inspect.isawaitable(out):
                        await out
                except Exception as exc:  # a callback never breaks the fan-out
                    log.warning("engine.on_leg_done.failed", error=repr(exc))

        # One deadline per provider, from the fan-out's start, for its query and its verify.
        limits = {s.spec.id: _limit_ms(s.spec, timeout_ms) for s in slots}

        async def ask() -> None:
            replies.update(
                await stage.ask(plan, self._send_verify, limits_ms=limits, started=clock[1])
            )

        async with anyio.create_task_group() as tg:
            for slot, share in zip(slots, shares, strict=True):
                tg.start_soon(run_leg, slot, share)
            if plan is not None and not plan.empty:
                tg.start_soon(ask)

        fan.reports = report_map(reports)
        excluded: list[Excluded] = []
        fresh: list[tuple[str, Any]] = []
        fresh_ids: list[FrameId] = []
        for pid in sorted(audits):
            audit = audits[pid]
            excluded.extend(audit.excluded)
            fresh.extend(zip(repeat(pid), audit.accepted))
            fresh_ids.extend(audit.accepted_ids)
        # Already in (provider id, FrameId) order: providers sorted, each audit's frames sorted.
        await self._after_audit(fan, fresh, excluded, plan, replies, fresh_ids)
        return fan

    # -- the verification hook (after the leg audit) ----------------------------------

    def _plan(self, stage: Any, session: str | None, slots: list[_Slot]) -> Any:
        if stage is None:
            return None
        return stage.plan(
            session, can_verify=self._can_verify, providers=[s.spec.id for s in slots]
        )

    def _can_verify(self, provider_id: str) -> bool:
        slot = self._slots.get(provider_id)
        ack = slot.last_ack if slot is not None else None
        return bool(ack is not None and ack.capabilities.verify)

    async def _send_verify(
        self, provider_id: str, identities: list[FrameIdentity]
    ) -> list[FrameVerdict]:
        """``context/verify`` to one provider (V1: identities only), after the consent gate."""
        slot = self._slots[provider_id]
        conn = await self._ensure(slot)
        missing = missing_consent(self._consent, provider_id, conn.info) if conn.info else []
        if missing:
            raise HostdError(f"no consent for scopes {missing}")
        response = await conn.verify(identities)
        return list(response.verdicts)

    async def _after_audit(
        self,
        fan: FanOut,
        fresh: list[Any],
        excluded: list[Excluded],
        plan: Any,
        replies: Mapping[str, Any],
        fresh_ids: Sequence[FrameId] = (),
    ) -> None:
        """Run the verify stage over the audited frames, or mark them ``unverified``."""
        stage = self.verify_stage
        if stage is None:
            fan.accepted = fresh
            fan.excluded = sorted(excluded, key=itemgetter(0))
            if len(fresh_ids) != len(fresh):
                fresh_ids = [FrameId.of(p, f) for p, f in fresh]
            fan.verification = dict.fromkeys(fresh_ids, _UNVERIFIED)
            return
        # One audit entry per FrameId: the stage never reuses nor re-reports what the
        # leg audit dropped, and a quarantined provider's held frames stay out (B2).
        result = await stage.finish(
            fresh,
            plan=plan,
            replies=replies,
            upstream_excluded=[e[0] for e in excluded],
            distrusted=[pid for pid, r in fan.reports.items() if r.status is LegStatus.QUARANTINED],
        )
        fan.accepted = list(result.accepted)
        fan.excluded = sorted([*excluded, *result.excluded], key=itemgetter(0))
        fan.verification = dict(result.verification)
        fan.figures = dict(result.figures)

    # -- one leg ------------------------------------------------------------------------

    def _gate(
        self, provider_id: str, conn: ProviderConnection, query: ContextQuery
    ) -> tuple[ContextQuery, list[str]]:
        """The consent gate (C1, C2, C6) and P5, before any payload is written: the
        scopes still missing consent, and the query trimmed to the representations
        the provider advertised."""
        assert conn.info is not None and conn.capabilities is not None
        missing = missing_consent(self._consent, provider_id, conn.info)
        if missing:
            return query, missing
        if check_representation_preferences(query, conn.capabilities):
            advertised = {"full", *conn.capabilities.representations}
            query = query.model_copy(
                update={
                    "representation_preferences": [
                        r for r in query.representation_preferences or () if r in advertised
                    ]
                }
            )
        return query, []

    def _send_early(
        self, slot: _Slot, template: ContextQuery, wire: dict[str, Any], asked: int
    ) -> _Early | None:
        """Write this leg's request at once when nothing has to be awaited first: a live
        connection, consent in order, nothing to trim (P5), a pipelining binding and a
        pipe that takes the line whole. ``wire`` is the template's wire form, shared by
        every leg (only ``max_tokens`` differs), so a leg costs one dict copy before its
        write. ``None`` (nothing written) leaves all of it to the leg's task, which then
        also reports whatever stopped it here."""
        conn = slot.conn
        if asked <= 0 or conn is None or not conn.alive:
            return None
        if conn.info is None or conn.capabilities is None:
            return None
        # The leg's own gate (C1, C2, C6 before any payload): missing consent, or a query
        # that P5 would trim, is left to the leg's own path, which reports or trims it.
        gated, missing = self._gate(slot.spec.id, conn, template)
        if missing or gated is not template:
            return None
        try:
            call = conn.start_query({**wire, "max_tokens": asked})
        except HostdError:  # the leg's own path meets the same failure and reports it
            return None
        return None if call is None else _Early(conn, call)

    async def _leg(
        self,
        slot: _Slot,
        template: ContextQuery,
        share: int,
        asked: int,
        timeout_ms: float | None,
        clock: tuple[float, float],
        early: _Early | None = None,
    ) -> tuple[LegReport, LegAudit | None]:
        """One provider's leg. ``clock`` is the fan-out's start (``perf_counter``, anyio
        time): latency and the deadline count from it, as the request may already have
        been written then (``early``)."""
        spec = slot.spec
        limit_ms = _limit_ms(spec, timeout_ms)
        started, now = clock
        deadline = now + limit_ms / 1000
        # Built here, in the leg's task: an early leg's request was already written from
        # the template's wire form with the same max_tokens.
        query = template.model_copy(update={"max_tokens": asked})
        conn: ProviderConnection | None = None
        audit: LegAudit | None = None
        fields: dict[str, Any] = {"max_tokens": asked, "share": share}

        def done(status: LegStatus, **more: Any) -> tuple[LegReport, LegAudit | None]:
            report = LegReport(
                spec.id,
                status,
                latency_ms=(time.perf_counter() - started) * 1000,
                **{**fields, **more},
            )
            slot.health = record_leg(slot.health, status.value, error=report.error_message)
            self._log_leg(report)
            return report, audit

        if asked <= 0:
            return done(LegStatus.SKIPPED, error_code="no_budget", error_message="budget share 0")
        try:
            # The leg's own deadline (anyio.fail_after without its context-manager layers).
            with anyio.CancelScope(deadline=deadline) as scope:
                if early is not None:
                    conn = early.conn
                    result = await early.call.result()
                else:
                    conn = await self._ensure(slot, deadline)
                    query, missing = self._gate(spec.id, conn, query)
                    if missing:
                        return done(
                            LegStatus.NO_CONSENT,
                            error_code="no_consent",
                            error_message="no consent recorded for scope(s): " + ", ".join(missing),
                            missing_scopes=tuple(missing),
                        )
                    result = await conn.query(query)
            if scope.cancelled_caught:
                raise TimeoutError
        except TimeoutError:
            if conn is None:  # still starting: the handshake (or a restart) ate the leg's time
                return done(
                    LegStatus.TIMEOUT,
                    error_code="handshake_timeout",
                    error_message=f"provider not ready within {limit_ms:.0f} ms",
                )
            if not conn.alive and slot.conn is conn:
                self._discard(slot)  # a lock-step stream with a request abandoned mid-flight
            return done(
                LegStatus.TIMEOUT,
                error_code="timeout",
                error_message=f"no reply within {limit_ms:.0f} ms",
            )
        except ProviderTimeout as exc:  # the handshake's own timeout
            return done(
                LegStatus.TIMEOUT, error_code="handshake_timeout", error_message=exc.message
            )
        except ProviderCrashed as exc:
            self._broken(slot, conn, exc)
            return done(LegStatus.CRASHED, error_code=exc.reason, error_message=exc.message)
        except HandshakeFailed as exc:  # IncompatibleVersion included (H1–H3, H2, C5)
            return done(
                LegStatus.ERROR,
                error_code=exc.reason,
                error_message=exc.message,
                violations=_violations_of(exc),
            )
        except ProtocolFault as exc:  # garbage, over-long line, correlation mismatch (H4)
            self._broken(slot, conn, exc)
            return done(LegStatus.ERROR, error_code=exc.reason, error_message=exc.message)
        except ProviderError as exc:
            return done(LegStatus.ERROR, error_code=exc.cgp_code.value, error_message=exc.message)
        except ShuttingDown as exc:
            return done(LegStatus.ERROR, error_code=exc.reason, error_message=exc.message)
        except HostdError as exc:
            return done(LegStatus.ERROR, error_code=exc.reason, error_message=exc.message)

        audit = audit_leg(spec.id, query, result.frames)
        fields["violations"] = audit.violations
        fields["frames_offered"] = audit.offered
        if audit.quarantined:
            rules = sorted({v.rule for v in audit.quarantine})
            return done(
                LegStatus.QUARANTINED,
                error_code="quarantined",
                error_message=f"{', '.join(rules)}: "
                + "; ".join(f"{v.rule} {v.field}: {v.message}" for v in audit.quarantine[:5]),
            )
        return done(
            LegStatus.OK,
            frames_accepted=len(audit.accepted),
            tokens_accepted=audit.accepted_cost,
        )

    def _log_leg(self, report: LegReport) -> None:
        if report.status is LegStatus.QUARANTINED:
            log.warning(
                "provider.leg.quarantined",
                provider=report.provider_id,
                message=report.error_message,
                frames_offered=report.frames_offered,
                max_tokens=report.max_tokens,
            )
        elif report.status is not LegStatus.OK:
            log.info(
                "provider.leg.failed",
                provider=report.provider_id,
                status=report.status.value,
                code=report.error_code,
                message=report.error_message,
            )

    # -- introspection ------------------------------------------------------------------

    def providers_list(self) -> list[dict[str, Any]]:
        """``providers/list``: id, binding, info, capabilities, state, health counters."""
        out = []
        for pid in sorted(self._slots):
            slot = self._slots[pid]
            ack = slot.last_ack
            conn = slot.conn
            health = slot.health.to_wire()
            stage = self.verify_stage
            if stage is not None and hasattr(stage, "health"):
                # digest_mismatch, source_mismatch, rubber_stamp, verify_failed, ...
                health["verification"] = stage.health(pid)
            if conn is not None:
                health["pid"] = conn.child.pid
                health["stderr_lines"] = conn.child.stderr_lines
                health["stderr_suppressed"] = conn.child.stderr_suppressed
            out.append(
                {
                    "id": pid,
                    "binding": slot.spec.binding,
                    "info": ack.provider.to_wire() if ack is not None else None,
                    "capabilities": ack.capabilities.to_wire() if ack is not None else None,
                    "state": _state_of(slot).value,
                    "health": health,
                }
            )
        return out

    def health(self, provider_id: str) -> Health:
        return self._slots[provider_id].health

    def session_stats(self) -> dict[str, Any]:
        """Reuse-cache and verification figures for ``host/status`` (empty when off)."""
        stage = self.verify_stage
        return stage.figures() if stage is not None and hasattr(stage, "figures") else {}

    def connection(self, provider_id: str) -> ProviderConnection | None:
        return self._slots[provider_id].conn


def _limit_ms(spec: ProviderSpec, timeout_ms: float | None) -> float:
    """A leg's bound: its spec's timeout, capped by the request's ``timeout_ms``."""
    return spec.timeout_ms if timeout_ms is None else min(spec.timeout_ms, timeout_ms)


def _with_state(health: Health, state: ProviderState) -> Health:
    return replace(health, state=state)


def _state_of(slot: _Slot) -> ProviderState:
    """The recorded state, or ``crashed`` for a process that died since its last leg."""
    state = slot.health.state
    if state is ProviderState.READY and (slot.conn is None or not slot.conn.alive):
        return ProviderState.CRASHED
    return state
