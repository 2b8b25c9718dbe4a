"""``Host``: the fan-out engine over a pool of provider connections.

A request runs plan → run → judge: ``plan_fan_out`` (``_plan``) decides every
leg from the pool's state, the consent gate and the request (shares before any
query is built, one deadline per provider, C1/C2/C6 before any payload);
``run_fan_out`` (``_run``) writes every planned request and gathers the replies
as they land (each leg one call) and the planned ``context/verify`` answers, the frames
of legs already in checked while others are still out, ending with the verify stage's
one I/O step (verdicts judged, the other sources re-read); ``judge_leg``
and ``judge`` (``_judge``) turn it all into the ``FanOut``, built once. Provider lifecycle, health
and teardown are the pool's (``_pool``); a memory write to one provider is
``_write``'s. A leg's failure is a ``LegReport``
value, never an exception that cancels its siblings; results are ordered by
provider id and FrameId, never by arrival.
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
from collections.abc import Awaitable, Callable, Collection, Iterable, Sequence
from enum import Enum
from pathlib import Path
from typing import Any, TypeVar

import anyio
from anyio.abc import TaskGroup

from hostd._hints import RESTARTING
from hostd._log import INFO, WARNING, get_logger
from hostd._log import level as log_level
from hostd.errors import HostdError, ShuttingDown, UnknownProvider, unknown_provider
from hostd.protocol import (
    FORGET_METHOD,
    REMEMBER_METHOD,
    ContextQuery,
    ForgetRequest,
    ForgetResult,
    HostInfo,
    RememberRequest,
    RememberResult,
)
from hostd.transport import (
    DEFAULT_MAX_LINE_BYTES,
    OnProgress,
    ProviderConnection,
    ProviderLink,
    StderrPolicy,
)

from ._clock import now
from ._declared import HandshakeRecords
from ._gate import ConsentGate, missing_consent
from ._health import (
    Health,
    RestartPolicy,
    StartAction,
    awaits_start,
    decide_start,
    restarts_behind,
)
from ._judge import JudgedLeg, audited, judge, judge_leg, refused_all, refused_words
from ._launch import PoolSettings
from ._outcome import WARMING_PARTIAL
from ._plan import Expect, ProviderView, plan_fan_out
from ._pool import ProviderPool, Reconfigured, Slot
from ._report import FanOut, LegReport, LegStatus
from ._run import LegReply, restarting_message, run_fan_out
from ._spec import ProviderSpec
from ._write import choose_writer, declared_writers, retired_refusal, write_one
from .consent import ConsentStore, consent_destination
from .verify import StageResult, VerifyPlan, VerifyReply, VerifyStage

__all__ = ["Host", "LegDone", "ProgressDone"]

log = get_logger("hostd.engine")

#: ``on_leg_done`` callback: called with each report as its leg finishes (sync or async).
LegDone = Callable[[LegReport], Awaitable[None] | None]
#: ``on_progress`` callback: a provider's warm-up progress (sync or async).
ProgressDone = Callable[[str, dict[str, Any]], Awaitable[None] | None]
T = TypeVar("T")


class _Default(Enum):
    STAGE = "default"


#: ``Host(verify_stage=...)`` default: a ``VerifyStage`` re-reading each provider's
#: sources under its spec's ``trusted_roots`` and ``host_roots``. ``None``: off.
DEFAULT_VERIFY_STAGE = _Default.STAGE


class Host:
    """The fan-out engine. ``async with Host(specs, state_dir=...) as host: ...``.

    ``consent`` is the gate (default: a ``ConsentStore`` under ``state_dir``, each remote
    provider's receipts pinned to its origin;
    with neither, egress providers are always refused). ``verify_stage`` is
    the verification/reuse stage run after the leg audit (default: one built
    here from the specs' ``trusted_roots`` and ``untrusted``, ``host_roots`` and
    ``untrusted``; ``None``: frames are reported ``unverified``).
    ``health_clock`` is the clock restart and cool-down decisions read (default
    ``anyio.current_time``). ``config_file``: the file the specs came from, named in
    the commands hints give. ``restart_idle``: a provider that is down starts again on its
    own once its backoff has passed, with no request asking (a long-running host's).
    ``boot_only``: the providers a ``boot`` start starts (default: all; a one-shot
    request's providers); the others start when a request asks for them.
    """

    def __init__(
        self,
        specs: Iterable[ProviderSpec],
        *,
        state_dir: str | Path | None = None,
        consent: ConsentGate | None = None,
        verify_stage: VerifyStage | None | _Default = DEFAULT_VERIFY_STAGE,
        host_roots: Sequence[str | Path] = (),
        untrusted: str = "exclude",
        start: str = "lazy",
        host_info: HostInfo | None = None,
        start_timeout_s: float = 30.0,
        grace_period_s: float = 2.0,
        max_line_bytes: int = DEFAULT_MAX_LINE_BYTES,
        restart_policy: RestartPolicy | None = None,
        stderr_policy: StderrPolicy | None = None,
        health_clock: Callable[[], float] | None = None,
        config_file: str | None = None,
        restart_idle: bool = False,
        boot_only: Iterable[str] | None = None,
    ) -> None:
        settings = PoolSettings(
            start=start,
            host_info=host_info,
            start_timeout_s=start_timeout_s,
            grace_period_s=grace_period_s,
            max_line_bytes=max_line_bytes,
            restart_policy=restart_policy or RestartPolicy(),
            stderr_policy=stderr_policy,
            clock=health_clock,
            config_file=config_file,
            restart_idle=restart_idle,
            boot_only=None if boot_only is None else frozenset(boot_only),
        )
        self.pool = ProviderPool(specs, settings)
        self.state_dir = Path(state_dir) if state_dir is not None else None
        #: Each provider's last handshake, for ``hostd consent`` (C1, C6) without a start.
        self.handshakes = HandshakeRecords(self.state_dir) if self.state_dir else None
        if self.handshakes is not None:
            self.pool.handshake_listeners.append(self.handshakes.record)
        self._consent = consent
        self._owned_store: ConsentStore | None = None
        if verify_stage is DEFAULT_VERIFY_STAGE:
            verify_stage = VerifyStage(
                trusted_roots={pid: s.spec.trusted_roots for pid, s in self.pool.slots.items()},
                host_roots=[str(r) for r in host_roots],
                untrusted=untrusted,
                provider_untrusted={
                    pid: s.spec.untrusted
                    for pid, s in self.pool.slots.items()
                    if s.spec.untrusted is not None
                },
                remote=[pid for pid, s in self.pool.slots.items() if s.spec.remote],
            )
        self.verify_stage: VerifyStage | None = verify_stage
        #: The event loop the host runs in (its pool's task group lives there).
        self._loop: asyncio.AbstractEventLoop | None = None

    def __repr__(self) -> str:
        states = ", ".join(f"{pid}={s.health.state.value}" for pid, s in self.pool.slots.items())
        return f"<Host providers=[{states}] closing={self.pool.closing}>"

    # -- lifecycle -------------------------------------------------------------------

    async def __aenter__(self) -> Host:
        if self._consent is None and self.state_dir is not None:
            # Each remote provider's receipts name the origin its queries go to.
            where = {pid: s.spec.url for pid, s in self.pool.slots.items() if s.spec.url}
            self._owned_store = ConsentStore(
                self.state_dir,
                destinations={pid: consent_destination(url) for pid, url in where.items()},
            )
            self._consent = self._owned_store
        await self.pool.__aenter__()
        self._loop = asyncio.get_running_loop()
        return self

    async def __aexit__(self, *exc_info: Any) -> None:
        try:
            await self.pool.__aexit__(*exc_info)
        finally:
            if self._owned_store is not None:
                self._owned_store.close()

    @property
    def consent(self) -> ConsentGate | None:
        """The consent gate (a ``ConsentStore``: grant, revoke, list, missing_scopes)."""
        return self._consent

    async def start_all(self) -> None:
        await self.pool.start_all()

    async def warm_all(self, on_progress: ProgressDone | None = None) -> dict[str, str]:
        """Start every provider and wait until each is ready or failed (``hostd warm``,
        ``providers/warm``): a warm-up may outlast the start deadline (a cold embedding
        build), so only the provider's exit ends the wait early. One already started
        (a serving daemon's) is joined, not started again. One in a crash loop
        (``pool.restart_behind``, as a request finds it) is not waited for, nor its
        backoff: ``restarting: …`` with its last failure, its restart under way behind.
        The readiness of each, by provider id; ``on_progress`` hears each warm-up step
        meanwhile."""
        if on_progress is None:
            return await self._warm_all(None)
        return await self._with_progress(set(self.pool.slots), on_progress, self._warm_all)

    async def _warm_all(self, tell: OnProgress | None) -> dict[str, str]:
        """``warm_all``'s work; ``tell`` hears that a provider ready at its handshake is
        ready (it sends no note of its own), so a listener says so when it is, not when
        the slowest provider is."""
        states: dict[str, str] = {}

        async def one(slot: Slot) -> None:
            if self.pool.restart_behind(slot):  # failing at each start: no wait cures it
                states[slot.spec.id] = f"{RESTARTING}: {restarting_message(slot)}"
                return
            try:
                conn = await self.pool.ensure(slot)
            except HostdError as exc:
                states[slot.spec.id] = f"{exc.reason}: {exc.message}"
                return
            if not isinstance(conn, ProviderConnection):  # remote: ready at its handshake
                states[slot.spec.id] = conn.readiness.state
                return
            async with anyio.create_task_group() as tg:

                async def settle(event: anyio.Event) -> None:
                    await event.wait()
                    tg.cancel_scope.cancel()

                tg.start_soon(settle, conn.readiness.settled)
                tg.start_soon(settle, conn.child.exited)
            alive = conn.child.returncode is None
            states[slot.spec.id] = conn.readiness.state if alive else "crashed"
            if alive and tell is not None and not conn.readiness.notified:
                tell(slot.spec.id, dict(conn.readiness.progress))

        async with anyio.create_task_group() as tg:
            for slot in self.pool.slots.values():
                tg.start_soon(one, slot)
        return dict(sorted(states.items()))

    # -- fan-out -----------------------------------------------------------------------

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
        on_progress: ProgressDone | None = None,
        ready_wait_ms: float | None = None,
        on_fan_out: Callable[[list[str]], None] | None = None,
    ) -> FanOut:
        """Fan ``query`` out to every (or the selected) provider and audit the replies.

        The budget is split with ``budget_split`` first, over the providers expected to
        answer (``plan_fan_out``: one not ready or unable to answer keeps its nominal
        share apart); each provider's ``query.max_tokens`` is then
        ``min(global_budget, ceil(share * overfetch))`` and B1 is judged against that
        asked figure (``LegReport.max_tokens``).
        ``timeout_ms`` is every provider's deadline (its query and its verify) in place
        of its spec's, longer or shorter. ``ready_wait_ms`` bounds the wait for a
        provider that is not ready (starting, warming up) below its start deadline: one
        not ready by then is reported warming, and the others are not held up by it.
        ``on_progress(provider_id, progress)`` hears the selected providers' warm-up
        progress while this fan-out runs. ``on_fan_out(ids)`` is told the providers it
        asks, before any is: with none selected, the pool's set as it is now (a config
        reload may have changed it since the caller began).
        """
        if self.pool.closing:
            raise ShuttingDown("host is shutting down")
        if not self.pool.running:
            raise RuntimeError("Host used outside 'async with'")
        # A provider named here that a reload removed since the caller chose it gets its
        # retired slot: that leg fails saying so, the others are asked.
        slots = self.pool.select(providers, retired=True)
        if on_fan_out is not None:
            on_fan_out([slot.spec.id for slot in slots])
        stage = self.verify_stage
        verify: VerifyPlan | None = None
        if stage is not None:
            verify = stage.plan(
                session, can_verify=self._can_verify, providers=[s.spec.id for s in slots]
            )
        # Each live connection as the plan saw it: nothing runs between the plan and the
        # writes (no await), so the run takes the same ones without asking again.
        links: dict[str, ProviderLink] = {}
        plan = plan_fan_out(
            query,
            global_budget,
            [_view(slot, links, self.pool) for slot in slots],
            self._consent,
            now=now(),
            overfetch=overfetch,
            timeout_ms=timeout_ms,
            verify=verify,
            ready_wait_ms=ready_wait_ms,
        )
        judged: dict[str, JudgedLeg] = {}
        # The verify stage's checks of legs already in, run while others are still out.
        early = stage.early(verify) if stage is not None and verify is not None else None
        unchecked: list[str] = []
        # A callback that awaits runs in a task of its own, so none holds up another leg
        # (nor is cut short by one's deadline); without one, no task group at all.
        callbacks: TaskGroup | None = None

        credentials = self.pool.launcher.credentials
        # The slots planned: a reload meanwhile may drop or replace a provider's.
        by_id = {slot.spec.id: slot for slot in slots}

        def on_reply(reply: LegReply) -> None:
            leg = plan.leg(reply.provider_id)
            assert leg is not None
            # Asked per reply: a provider started by this very fan-out adds its own.
            done = judged[reply.provider_id] = judge_leg(leg, reply, credentials())
            if early is not None and done.audit is not None and done.audit.accepted:
                unchecked.append(reply.provider_id)
            report = done.report
            # The status itself (a StrEnum is its value): no enum property read per leg.
            # An answer partial only for a warm-up under way is no fault to count: the
            # provider is ``warming``, and says how far it got.
            faulty = any(cause != WARMING_PARTIAL for cause in report.partial)
            self.pool.record_leg(
                by_id[leg.provider_id],
                report.status,
                report.error_message,
                report.note if faulty else None,
                # Said apart from the note, which may also say what left frames out.
                reply.empty if not report.frames_offered else None,
                # With a verify stage, frames it offered may yet be dropped (a digest, a
                # source): whether it lost them all is told once the stage is done.
                None if stage is not None else refused_all(done),
                reply.sent_mark,
                refusals_later=stage is not None and report.status is LegStatus.OK,
                # A leg told at once (parked, a crash loop, a server down whose next
                # check is not waited for) never reached its provider: no failure of its.
                ran=report.sent,
            )
            _log_leg(report)
            if on_leg_done is not None:
                try:
                    out = on_leg_done(report)
                except Exception as exc:  # a callback never breaks the fan-out
                    log.warning("engine.on_leg_done.failed", error=repr(exc))
                    return
                if inspect.isawaitable(out):
                    assert callbacks is not None
                    callbacks.start_soon(_guarded, out)

        async def check_landed() -> None:
            """The landed legs' frames checked while other legs are still out."""
            assert stage is not None and early is not None
            got = audited({pid: judged[pid] for pid in unchecked})
            unchecked.clear()
            await stage.check_early(early, got.accepted, got.accepted_ids)

        async def check(replies: dict[str, VerifyReply]) -> StageResult | None:
            """The turn's one I/O step after the replies: verdicts judged, sources read."""
            if stage is None or verify is None:
                return None
            got = audited(judged)
            checked = await stage.check(
                verify,
                replies,
                got.accepted,
                upstream_excluded=[e[0] for e in got.excluded],
                distrusted=got.distrusted,
                fresh_ids=got.accepted_ids,
                early=early,
                answered=[p for p, j in judged.items() if j.report.status is LegStatus.OK],
            )
            result = stage.merge(checked)
            stage.record(result)
            return result

        work = run_fan_out(
            plan,
            self.pool,
            self._consent,
            on_reply,
            check,
            loop=self._loop,
            links=links,
            between=check_landed if early is not None else None,
            slots=by_id,
        )
        if on_progress is not None:
            fan_out = work
            work = self._with_progress(
                {s.spec.id for s in slots}, on_progress, lambda _tell: fan_out
            )
        if on_leg_done is None:
            verified = await work
        else:
            async with anyio.create_task_group() as callbacks:
                verified = await work
        fan = judge(plan, judged, verified)
        if stage is not None:  # each ok leg's refusals, now that verification dropped its
            for pid, done in judged.items():
                if done.report.status is LegStatus.OK and pid in by_id:
                    self.pool.record_refusals(by_id[pid], refused_words(done.report, fan.excluded))
        return fan

    async def _with_progress(
        self,
        chosen: set[str],
        on_progress: ProgressDone,
        work: Callable[[OnProgress], Awaitable[T]],
    ) -> T:
        """Run ``work(tell)`` while the chosen providers' progress goes to ``on_progress``:
        first the last step of each one warming now, then each step heard in a read
        callback (or told by the work through ``tell``), handed over through a small
        buffer (a full one drops a step, the next one says as much) to a task that may
        await the callback."""
        send, receive = anyio.create_memory_object_stream[tuple[str, dict[str, Any]]](64)

        def listener(provider_id: str, progress: dict[str, Any]) -> None:
            if provider_id in chosen:
                with contextlib.suppress(anyio.WouldBlock, anyio.BrokenResourceError):
                    send.send_nowait((provider_id, progress))

        async def forward() -> None:
            async with receive:
                async for provider_id, progress in receive:
                    try:
                        out = on_progress(provider_id, progress)
                        if inspect.isawaitable(out):
                            await out
                    except Exception as exc:  # a callback never breaks the fan-out
                        log.warning("engine.on_progress.failed", error=repr(exc))

        self.pool.progress_listeners.append(listener)
        # Where each chosen provider already warming stands, told first: its next step
        # may be long in coming (a model load reports once, then nothing until it is
        # loaded), and a request begun meanwhile would hear nothing of it until then.
        for provider_id in sorted(chosen):
            slot = self.pool.slots.get(provider_id)
            conn = slot.live() if slot is not None else None
            if conn is not None and conn.readiness.warming and conn.readiness.notified:
                listener(provider_id, dict(conn.readiness.progress))
        try:
            async with anyio.create_task_group() as tg:
                tg.start_soon(forward)
                async with send:
                    result = await work(listener)
        finally:
            self.pool.progress_listeners.remove(listener)
        return result

    # -- memory writes (one provider, never fanned out) -------------------------------------

    async def remember(
        self,
        request: RememberRequest,
        *,
        provider: str | None = None,
        timeout_ms: float | None = None,
        configured: Collection[str] | None = None,
    ) -> tuple[str, RememberResult]:
        """``memory/remember`` to ``provider`` (default: the one that stores memories,
        ``choose_writer``): the provider's id and its reply, sent once it committed.
        ``configured``: the provider ids the caller's request began with (the pipeline's
        config), by default the pool's as this call begins: a provider named among them
        that a reload removed since is refused in the reload's words; one not among
        them, and not configured now, is unknown."""
        slot = await self._writer(provider, configured)
        result = await write_one(
            self.pool,
            self._consent,
            slot,
            REMEMBER_METHOD,
            lambda conn, deadline: conn.remember(request, deadline=deadline),
            kind=request.kind,
            timeout_ms=timeout_ms,
        )
        log.info(
            "memory.remembered",
            provider=slot.spec.id,
            id=result.id,
            kind=request.kind,
            supersedes=result.supersedes,
        )
        return slot.spec.id, result

    async def forget(
        self,
        request: ForgetRequest,
        *,
        provider: str | None = None,
        timeout_ms: float | None = None,
        configured: Collection[str] | None = None,
    ) -> tuple[str, ForgetResult]:
        """``memory/forget`` to ``provider`` (default, and ``configured``, as
        ``remember``'s)."""
        slot = await self._writer(provider, configured)
        result = await write_one(
            self.pool,
            self._consent,
            slot,
            FORGET_METHOD,
            lambda conn, deadline: conn.forget(request, deadline=deadline),
            timeout_ms=timeout_ms,
        )
        log.info(
            "memory.forgotten",
            provider=slot.spec.id,
            id=result.forgotten,
            already=bool(result.already),
        )
        return slot.spec.id, result

    async def _writer(self, provider: str | None, configured: Collection[str] | None) -> Slot:
        if self.pool.closing:
            raise ShuttingDown("host is shutting down")
        if not self.pool.running:
            raise RuntimeError("Host used outside 'async with'")
        if provider is None:
            # Chosen among the providers configured now: no await between this and the
            # select below, so no reload can remove it in between.
            provider = choose_writer(await declared_writers(self.pool))
        elif provider not in self.pool.slots and (configured is None or provider not in configured):
            # Not configured when the request began: unknown, in the words the pipeline
            # gives, whether or not some reload before it removed a provider of that id
            # (the reload's words would say the request ran under a config it never saw).
            said = f"invalid params: provider: {unknown_provider(provider, self.pool.slots)}"
            raise UnknownProvider(said, provider=provider, field="provider")
        # One a reload removed since the request named it gets its retired slot: refused
        # in the reload's words, not as unknown.
        (slot,) = self.pool.select([provider], retired=True)  # else UnknownProvider
        reloaded = retired_refusal(slot)
        if reloaded is not None:
            raise reloaded
        return slot

    def _can_verify(self, provider_id: str) -> bool:
        slot = self.pool.slots.get(provider_id)
        ack = slot.last_ack if slot is not None else None
        return bool(ack is not None and ack.capabilities.verify)

    # -- introspection ------------------------------------------------------------------

    def providers_list(self) -> list[dict[str, Any]]:
        """``providers/list``: id, binding, info, capabilities, state, health counters."""
        out = []
        for pid in sorted(self.pool.slots):
            slot = self.pool.slots[pid]
            row = self.pool.row(slot)
            # The scopes its last handshake requires with no live receipt: a provider
            # "ready" that no request will ask until the operator grants them.
            ack = slot.last_ack
            row["consent_missing"] = (
                missing_consent(self.consent, pid, ack.provider) if ack is not None else []
            )
            if self.verify_stage is not None:
                # digest_mismatch, source_mismatch, rubber_stamp, verify_failed, ...
                row["health"]["verification"] = self.verify_stage.health(pid)
            out.append(row)
        return out

    def reconfigure(self, specs: Iterable[ProviderSpec], *, start: bool) -> Reconfigured:
        """Serve the providers of a reloaded config from now on (``ProviderPool.reconfigure``;
        sync: no request plans between the old set and the new): the unchanged keep
        running; the removed, and the old slots of the changed, are retired (their
        processes are stopped by ``stop_retired``); the added and changed are registered
        and, with ``start``, their starts begun (not waited for: they warm as a booting
        daemon's do, and a request that asks meanwhile joins the start); the updated
        (``IN_PLACE`` keys alone) keep running with their new spec. The verify stage's
        roots and the consent ledger's destinations follow the new specs."""
        if self.pool.closing or not self.pool.running:
            raise ShuttingDown("host is shutting down")
        done = self.pool.reconfigure(specs)
        fresh = [self.pool.slots[pid] for pid in (*done.added, *done.changed)]
        stage = self.verify_stage
        if stage is not None:
            for pid in (*done.removed, *done.changed, *done.updated):
                stage.trusted_roots.pop(pid, None)
                stage.provider_untrusted.pop(pid, None)
            for slot in (*fresh, *(self.pool.slots[pid] for pid in done.updated)):
                spec = slot.spec
                stage.trusted_roots[spec.id] = tuple(spec.trusted_roots)
                if spec.untrusted is not None:
                    stage.provider_untrusted[spec.id] = spec.untrusted
            stage.remote = frozenset(pid for pid, s in self.pool.slots.items() if s.spec.remote)
        if self._owned_store is not None:
            where = self._owned_store.destinations
            for pid in (*done.removed, *done.changed):
                where.pop(pid, None)
            for slot in fresh:
                if slot.spec.url:
                    where[slot.spec.id] = consent_destination(slot.spec.url)
        if start:
            for slot in fresh:
                self.pool.begin_start(slot)
        return done

    async def stop_retired(self, done: Reconfigured) -> None:
        """Stop the processes ``reconfigure`` took out, as at shutdown; returns once each
        has exited (a leg still on one fails: ``provider connection closed``)."""
        await self.pool.stop_retired(done.retired)

    async def restart_provider(self, provider_id: str) -> dict[str, Any]:
        """``providers/restart``: the provider stopped if running, its failures forgotten
        and started now (``ProviderPool.restart``); its ``providers/list`` row after."""
        if self.pool.closing:
            raise ShuttingDown("host is shutting down")
        (slot,) = self.pool.select([provider_id])  # UnknownProvider when not configured
        await self.pool.restart(slot)
        (row,) = (r for r in self.providers_list() if r["id"] == provider_id)
        return row

    def health(self, provider_id: str) -> Health:
        return self.pool.slots[provider_id].health

    def session_stats(self) -> dict[str, Any]:
        """Reuse-cache and verification figures for ``host/status`` (empty when off)."""
        return self.verify_stage.figures() if self.verify_stage is not None else {}

    def connection(self, provider_id: str) -> ProviderLink | None:
        return self.pool.slots[provider_id].conn


def _view(slot: Slot, links: dict[str, ProviderLink], pool: ProviderPool) -> ProviderView:
    """What the plan knows of ``slot``; its live connection, if any, kept in ``links``."""
    conn = slot.live()
    if conn is None:
        return ProviderView(slot.spec, expect=_expect_down(slot, pool))
    links[slot.spec.id] = conn
    if conn.info is None or conn.capabilities is None:
        return ProviderView(slot.spec, expect=Expect.STARTING)
    readiness = conn.readiness
    if readiness.warming:
        # A ``start`` leg: it waits for readiness first.
        return ProviderView(slot.spec, expect=Expect.WARMING)
    if readiness.failed is not None:  # it refuses every query, saying why
        return ProviderView(slot.spec, conn.info, conn.capabilities, Expect.FAILED)
    return ProviderView(slot.spec, conn.info, conn.capabilities)


def _expect_down(slot: Slot, pool: ProviderPool) -> Expect:
    """Whether a provider that is not running may answer a request planned now, as the
    pool will decide its leg (``ensure``, ``restart_behind``): a start its leg waits for
    (``starting``), a crash loop's restart that none does (``restarting``), or a leg
    that fails at once (``down``: removed by a reload, parked, its next start not
    waited for). Sync, no I/O but a refused credential's source, as ``ensure`` reads it."""
    if slot.retired is not None:
        return Expect.DOWN
    health = slot.health
    policy = pool.settings.restart_policy
    if not awaits_start(health):
        return Expect.DOWN
    if restarts_behind(health, policy):
        return Expect.RESTARTING
    if slot.starting is not None:
        return Expect.STARTING
    changed = health.refused and pool.launcher.credential_changed(slot.spec)
    decision = decide_start(
        health, alive=False, now=pool.now(), policy=policy, credential_changed=changed
    )
    return Expect.DOWN if decision.action is StartAction.GIVE_UP else Expect.STARTING


#: Legs that are a provider's fault: logged ``provider.leg.failed`` at warning.
_FAULTS = frozenset({LegStatus.TIMEOUT, LegStatus.CRASHED, LegStatus.ERROR, LegStatus.UNAUTHORIZED})


async def _guarded(out: Awaitable[Any]) -> None:
    try:
        await out
    except Exception as exc:  # a callback never breaks the fan-out
        log.warning("engine.on_leg_done.failed", error=repr(exc))


def _log_leg(report: LegReport) -> None:
    """The one log event of a leg, as it is judged: ``provider.leg`` (info) for a leg
    that is no fault (ok, or not asked: warming, no consent, no budget share) or no
    news (never sent, ``LegReport.sent``), ``provider.leg.failed`` or
    ``provider.leg.quarantined`` (warning) otherwise; every one with the same fields.
    Its ``message`` is hostd's own (never a provider's text)."""
    status = report.status
    # A leg failed at once, its query never sent (a parked provider, a crash loop, a
    # remote server down whose next check is not waited for, a backoff not waited for,
    # a provider a reload removed), is no news: the failure that put its provider there
    # was told as it came (``provider.start.failed``, ``provider.parked``,
    # ``provider.exited``). A warning per request would fill the log of an agent that
    # composes every turn.
    fault = status is LegStatus.QUARANTINED or (status in _FAULTS and report.sent)
    if log_level.at > (WARNING if fault else INFO):
        return  # dropped at this level: not built (once per leg, every request)
    fields = {
        "provider": report.provider_id,
        "status": status.value,
        "latency_ms": round(report.latency_ms, 3),  # as the wire's leg report has it
        "frames_offered": report.frames_offered,
        "frames_accepted": report.frames_accepted,
        "max_tokens": report.max_tokens,
        "error_code": report.error_code,
        "message": report.error_message,
        "stderr_tail": report.stderr_tail,
        "violations": [
            {"rule": v.rule, "field": v.field, "severity": v.severity.value}
            for v in report.violations
        ],
    }
    if report.share_apart is not None:
        # Why it was asked for its nominal share, not a part of the others' split; only
        # when set, so the common leg's event is the bytes it always was.
        fields["share_apart"] = report.share_apart
    if status is LegStatus.QUARANTINED:
        log.warning("provider.leg.quarantined", **fields)
    elif fault:
        log.warning("provider.leg.failed", **fields)
    else:
        log.info("provider.leg", **fields)
