"""``ProviderPool``: the life of every configured provider, apart from any one request.

Owns start (lazy or at boot), restart with bounded exponential backoff
following ``_health``'s decisions, health records, and teardown with no
orphan left, also when cancelled. A start runs in the pool's own task group,
not in the leg that asked for it: a leg waits for it only until its own
deadline, and a handshake that never completes is torn down off the request's
path (the pool's task group walks the ladder). Broken connections are dropped
at once and closed in the background too. The fan-out (``_fanout``) reads the
pool; it never spawns or closes a process itself.
"""

from __future__ import annotations

from collections.abc import Iterable
from contextlib import AsyncExitStack
from dataclasses import dataclass, replace
from typing import Any

import anyio
import structlog
from anyio.abc import TaskGroup

from hostd import __version__
from hostd.errors import HostdError, ProviderCrashed, ShuttingDown, UnknownProvider
from hostd.protocol import HandshakeAck, HostInfo
from hostd.transport import DEFAULT_MAX_LINE_BYTES, OnProgress, ProviderConnection, StderrPolicy

from ._health import (
    Health,
    ProviderState,
    RestartPolicy,
    StartAction,
    decide_start,
    is_hung,
    record_failure,
    record_leg,
    record_started,
)
from ._spec import ProviderSpec

__all__ = ["PoolSettings", "ProviderPool", "Slot"]

log = structlog.get_logger("hostd.engine")


@dataclass(slots=True, frozen=True)
class PoolSettings:
    """How the pool starts and stops providers."""

    start: str = "lazy"
    host_info: HostInfo | None = None
    #: A start's deadline (spawn and handshake), unless the provider's spec names its own;
    #: a request naming no timeout also waits up to it for the provider to be ready.
    start_timeout_s: float = 30.0
    grace_period_s: float = 2.0
    max_line_bytes: int = DEFAULT_MAX_LINE_BYTES
    restart_policy: RestartPolicy = RestartPolicy()
    stderr_policy: StderrPolicy | None = None


class _Start:
    """One start in flight, shared by every leg that waits for it."""

    __slots__ = ("conn", "done", "error")

    def __init__(self) -> None:
        self.done = anyio.Event()
        self.conn: ProviderConnection | None = None
        self.error: HostdError | None = None


class Slot:
    """One configured provider's runtime state inside the pool."""

    __slots__ = ("conn", "health", "last_ack", "spec", "start_deadline", "starting")

    def __init__(self, spec: ProviderSpec) -> None:
        self.spec = spec
        self.conn: ProviderConnection | None = None
        self.health = Health()
        self.last_ack: HandshakeAck | None = None
        self.starting: _Start | None = None
        #: When the last start's deadline ends (anyio time): up to then it is never killed,
        #: and a request naming no timeout waits for its readiness.
        self.start_deadline: float | None = None

    @property
    def state(self) -> ProviderState:
        """The recorded state, or ``crashed`` for a process that died since its last leg,
        or ``warming`` for a running one that is not ready yet."""
        state = self.health.state
        if state is ProviderState.READY:
            if self.conn is None or not self.conn.alive:
                return ProviderState.CRASHED
            if self.conn.readiness.warming:
                return ProviderState.WARMING
        return state

    def live(self) -> ProviderConnection | None:
        """The connection when it can take a request now, else ``None``."""
        conn = self.conn
        return conn if conn is not None and conn.alive else None


class ProviderPool:
    """``async with ProviderPool(specs, settings) as pool``: every provider's process."""

    def __init__(self, specs: Iterable[ProviderSpec], settings: PoolSettings) -> None:
        self.slots: dict[str, Slot] = {}
        for spec in specs:
            if spec.id in self.slots:
                raise ValueError(f"duplicate provider id {spec.id!r}")
            self.slots[spec.id] = Slot(spec)
        if settings.start not in ("lazy", "boot"):
            raise ValueError("start must be 'lazy' or 'boot'")
        self.settings = settings
        self.host_info = settings.host_info or HostInfo(name="hostd", version=__version__)
        self.closing = False
        self._stack: AsyncExitStack | None = None
        self._tg: TaskGroup | None = None
        #: Told of every provider's ``context/progress`` (a request's progress token, a bar).
        self.progress_listeners: list[OnProgress] = []

    async def __aenter__(self) -> ProviderPool:
        stack = AsyncExitStack()
        self._tg = await stack.enter_async_context(anyio.create_task_group())
        self._stack = stack
        if self.settings.start == "boot":
            await self.start_all()
        return self

    async def __aexit__(self, *exc_info: Any) -> None:
        self.closing = True
        with anyio.CancelScope(shield=True):
            await self.stop_all()
        assert self._stack is not None and self._tg is not None
        self._tg.cancel_scope.cancel()
        # The body's own exception is not fed to the task group (it would come back
        # wrapped in an ExceptionGroup); returning None lets it propagate as it is.
        await self._stack.__aexit__(None, None, None)

    @property
    def running(self) -> bool:
        return self._tg is not None

    def select(self, providers: Iterable[str] | None) -> list[Slot]:
        """The named (default: all) slots, ordered by provider id."""
        if providers is None:
            return sorted(self.slots.values(), key=lambda s: s.spec.id)
        wanted = list(dict.fromkeys(providers))
        unknown = [p for p in wanted if p not in self.slots]
        if unknown:
            raise UnknownProvider(f"unknown provider(s): {', '.join(unknown)}", providers=unknown)
        return sorted((self.slots[p] for p in wanted), key=lambda s: s.spec.id)

    async def start_all(self) -> None:
        """Start every provider now (boot mode); a failure is recorded in its health."""
        s = self.settings

        async def one(slot: Slot) -> None:
            try:
                with anyio.fail_after(self.start_timeout(slot) + s.grace_period_s):
                    await self.ensure(slot)
            except (HostdError, TimeoutError) as exc:
                log.warning("provider.start.failed", provider=slot.spec.id, error=str(exc))

        async with anyio.create_task_group() as tg:
            for slot in self.slots.values():
                tg.start_soon(one, slot)

    async def stop_all(self) -> None:
        """Tear every running provider down, concurrently (shielded by the caller)."""
        async with anyio.create_task_group() as tg:
            for slot in self.slots.values():
                if slot.conn is not None:
                    tg.start_soon(slot.conn.aclose)
                if slot.health.state is ProviderState.READY:
                    slot.health = replace(slot.health, state=ProviderState.STOPPED)

    # -- starting and restarting -----------------------------------------------------

    async def ensure(self, slot: Slot, deadline: float | None = None) -> ProviderConnection:
        """The live connection, (re)started per the health decisions (``_health``).
        Waiting for a start is bounded by the caller's scope; the start itself is not."""
        while True:
            conn = slot.live()
            if conn is not None:
                return conn
            if slot.starting is not None:
                await self._join(slot.starting)
                continue
            now = anyio.current_time()
            policy = self.settings.restart_policy
            decision = decide_start(slot.health, alive=False, now=now, policy=policy)
            if decision.action is StartAction.GIVE_UP:
                # Quotes the last start or crash failure, never a report that quoted one:
                # the message stays the same size however many requests meet it.
                raise ProviderCrashed(
                    f"restart attempts exhausted ({slot.health.consecutive_failures}); "
                    f"last failure: {slot.health.last_failure}",
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
            if self.closing or self._tg is None:
                raise ShuttingDown("host is shutting down")
            if slot.conn is not None:
                self.discard(slot)
            start = slot.starting = _Start()
            self._tg.start_soon(self._start, slot, start)
            await self._join(start)

    def start_timeout(self, slot: Slot) -> float:
        return slot.spec.start_timeout_s or self.settings.start_timeout_s

    async def ready(self, slot: Slot, deadline: float | None = None) -> ProviderConnection:
        """The connection once the provider is ready (or failed its warm-up), waiting no
        longer than its start deadline; past that, the connection as it is (warming).
        ``deadline``: the caller's own, for a backoff (``ensure``); its scope bounds the rest."""
        if deadline is None:
            deadline = anyio.current_time() + self.start_timeout(slot)
        conn = await self.ensure(slot, deadline)
        if conn.readiness.warming and slot.start_deadline is not None:
            with anyio.move_on_at(slot.start_deadline):
                await conn.readiness.settled.wait()
        return conn

    def _on_progress(self, provider_id: str, progress: dict[str, Any]) -> None:
        """A provider's ``context/progress``: logged, then told to every listener."""
        state = progress.get("state", "warming")
        if state == "ready":
            log.info("provider.ready", provider=provider_id, message=progress.get("message"))
        elif state == "failed":
            log.warning("provider.warm.failed", provider=provider_id, error=progress.get("message"))
        else:
            log.info("provider.progress", provider=provider_id, **progress)
        for listener in list(self.progress_listeners):
            try:
                listener(provider_id, progress)
            except Exception as exc:  # a listener never breaks the provider's stream
                log.warning("provider.progress.listener_failed", error=repr(exc))

    @staticmethod
    async def _join(start: _Start) -> None:
        await start.done.wait()
        if start.error is not None:
            raise start.error

    async def _start(self, slot: Slot, start: _Start) -> None:
        """Spawn and handshake in the pool's task group, bounded by the handshake timeout."""
        assert self._tg is not None
        spec, s = slot.spec, self.settings
        timeout = self.start_timeout(slot)
        slot.start_deadline = anyio.current_time() + timeout
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
                grace=s.grace_period_s,
                max_line_bytes=s.max_line_bytes,
                stderr_policy=s.stderr_policy,
                on_progress=self._on_progress,
            )
        except HostdError as exc:
            self.record_failure(slot, exc)
            log.warning(
                "provider.start.failed", provider=spec.id, reason=exc.reason, error=exc.message
            )
            start.error = exc
        else:
            slot.conn = conn
            slot.last_ack = conn.ack
            slot.health = record_started(slot.health)
            start.conn = conn
        finally:
            if start.conn is None and start.error is None:  # cancelled with the pool
                start.error = ShuttingDown("host is shutting down")
            slot.starting = None
            start.done.set()

    # -- failures ------------------------------------------------------------------------

    def record_failure(self, slot: Slot, exc: HostdError) -> None:
        slot.health = record_failure(
            slot.health,
            now=anyio.current_time(),
            error=f"{exc.reason}: {exc.message}",
            policy=self.settings.restart_policy,
        )

    def record_leg(self, slot: Slot, status: str, error: str | None) -> None:
        """Count a finished leg; restart a provider that is alive but hung (``is_hung``):
        its process is torn down in the pool's task group and the next request starts
        a fresh one, after the backoff the failure earns."""
        slot.health = record_leg(slot.health, status, error=error)
        conn = slot.conn
        if conn is not None and conn.readiness.warming:
            return  # building its index: never "hung" (it said so, _readiness)
        if is_hung(slot.health, self.settings.restart_policy) and conn is not None:
            n = slot.health.consecutive_timeouts
            log.warning("provider.hung.restart", provider=slot.spec.id, timeouts=n)
            slot.health = record_failure(
                slot.health,
                now=anyio.current_time(),
                error=f"hung: no reply to {n} requests in a row",
                policy=self.settings.restart_policy,
            )
            self.discard(slot)

    def discard(self, slot: Slot) -> None:
        """Drop the connection; its teardown runs in the pool's task group (shielded)."""
        conn, slot.conn = slot.conn, None
        if conn is not None and not conn.closed and self._tg is not None:
            self._tg.start_soon(conn.aclose)

    def broken(self, slot: Slot, conn: ProviderConnection | None, exc: HostdError) -> None:
        """The process died or broke its stream: count a failure, schedule teardown."""
        if conn is None or slot.conn is not conn:
            return  # another leg already handled this connection
        self.record_failure(slot, exc)
        self.discard(slot)

    # -- introspection ------------------------------------------------------------------

    def row(self, slot: Slot) -> dict[str, Any]:
        """``providers/list``'s entry for one provider (without verification figures)."""
        ack, conn = slot.last_ack, slot.conn
        health = slot.health.to_wire()
        if conn is not None:
            health["readiness"] = conn.readiness.state
            health["progress"] = dict(conn.readiness.progress)
            health["pid"] = conn.child.pid
            health["stderr_lines"] = conn.child.stderr_lines
            health["stderr_suppressed"] = conn.child.stderr_suppressed
        return {
            "id": slot.spec.id,
            "binding": slot.spec.binding,
            "info": ack.provider.to_wire() if ack is not None else None,
            "capabilities": ack.capabilities.to_wire() if ack is not None else None,
            "state": slot.state.value,
            "health": health,
        }
