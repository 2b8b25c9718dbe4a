"""``ProviderPool``: the life of every configured provider, apart from any one request.

Owns start (lazy or at boot), restart with bounded exponential backoff
following ``_health``'s decisions (a parked provider retried after its
cool-down; ``restart`` on request), health records, and teardown with no
orphan left, also when cancelled. A start runs in the pool's own task group,
not in the leg that asked for it: a leg waits for it only until its own
deadline, and a handshake that never completes is torn down off the request's
path (the pool's task group walks the ladder). Once a start has outlived its
deadline, no request waits for the next one (``awaits_start``): it begins after
the backoff, in the background, and the leg that began it fails at once, naming
the start that timed out; so a stuck provider costs one start deadline, once. A boot
start (``start_all``: a one-shot command's, whose request comes after it) that timed
out is told to the first leg as it failed, promising no next start. A provider in a
crash loop (it failed again after its last restart, answering nothing between) is
restarted behind the request too (``restarts_behind``, ``restart_behind``): no request
waits for it (a ``ready_wait_ms`` neither), and one that broke under a leg is
started again at once, after its backoff, so one quick to start serves the next
request; a first failure's restart is waited for, as a first start is.
In a long-running host (``PoolSettings.restart_idle``) a provider that is down starts
again on its own as well, in the pool's task group, once
its backoff has passed (a parked one once its cool-down has: its one retry), with no
request asking (``_revive``, by ``idle_restart_in``): one that crashed while idle is up
before the next request comes, and one in a crash loop is started no more often than
its backoff and bounded attempts allow. One such wait per provider at most; a start
begun meanwhile (a request's, ``restart``) makes it moot, and ``restart`` or the pool's
close cancels it.
Broken connections are dropped at once and closed in the background too. A remote
provider that refuses its credential (at its handshake, or a leg's ``unauthorized``)
is parked at once, not restarted in a loop (``record_refused``): its legs fail at
once with the refusal's words (what to fix) until its credential changes, its
cool-down passes or ``restart`` is asked. So is a start no restart cures (its command
cannot run; its config names a tool its MCP server does not offer: ``_cannot_run``),
its legs failing with that start's own words. A remote provider whose server was not
reached (``_unreachable``: no connection, no answer in time, a 5xx) is never parked for
it: it is checked (handshaken) again on a short backoff (``check_delay``), one check at
a time, in the pool's task group, and once it has failed no request waits for the
next check (``awaits_start``): its legs fail at once with the failure's words, and
``providers/list`` says when the next check comes (``next_check_in_s``); a repeated
failed check is logged at ``debug``, so an outage of a day costs its log one warning,
not one per check. One whose server's certificate failed verification
(``RemoteCertificate``) is parked at once (``record_untrusted``), its legs failing
with the certificate's words (what to fix) and when it is checked again, after each
cool-down, which does not grow: a renewed certificate is taken with no restart, and a
wrong one costs its log one warning. A process that ends on its
own (killed, out of memory) is counted as a crash as soon as its exit is seen, not when
a request next finds it dead (``exited``): ``providers/list`` says why it is down at
once, with its exit status or signal and its stderr's tail. Opening a connection (spawn
and handshake, or a remote endpoint) is ``_launch``'s. The fan-out (``_run``) reads the
pool; it never spawns or closes a process itself. A config reload (``reconfigure``)
changes the set of slots: an unchanged provider's is kept as it is, and so is one
whose section changed only in keys read per request or per start (``IN_PLACE``: its
spec is replaced, its process kept); a removed or otherwise changed one's is retired
(never started again, its process stopped by ``stop_retired``, a leg still on it
failing with the reload's words), a fresh slot taking a changed one's place. A
request that chose a provider before the reload removed it gets its retired slot
(``select``'s ``retired``): that leg fails with the reload's words, the others go on.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from contextlib import AsyncExitStack, contextmanager, suppress
from dataclasses import dataclass, replace
from typing import Any, TypeVar

import anyio
from anyio.abc import TaskGroup

from hostd import __version__
from hostd._hints import not_run_again, parked_restart
from hostd._log import get_logger
from hostd.errors import (
    HostdError,
    ProviderCrashed,
    ProviderParked,
    ProviderTimeout,
    ProviderUnauthorized,
    RemoteCertificate,
    RemoteTransport,
    ShuttingDown,
    UnknownProvider,
)
from hostd.protocol import HandshakeAck, HostInfo
from hostd.transport import OnProgress, ProviderConnection, ProviderLink, stalled_found

from ._clock import now
from ._health import (
    Health,
    ProviderState,
    RestartPolicy,
    StartAction,
    awaits_start,
    check_delay,
    check_due,
    decide_start,
    failure_text,
    idle_restart_in,
    is_hung,
    is_parked,
    record_failure,
    record_leg,
    record_refusals,
    record_refused,
    record_restart_requested,
    record_retry,
    record_started,
    record_untrusted,
    restart_due,
    restarts_behind,
    retry_cool_down_s,
    retry_due,
)
from ._launch import Launcher, PoolSettings
from ._outcome import stderr_tail_of
from ._spec import ProviderSpec

__all__ = ["IN_PLACE", "ProviderPool", "Reconfigured", "Slot"]

log = get_logger("hostd.engine")

E = TypeVar("E", bound=HostdError)


def _unsent(exc: E) -> E:
    """``exc``, marked as told at once for a call never sent (``HostdError.unsent``): a
    leg that meets it is counted as a leg, not as a failure of its provider's own (it
    was not asked: ``record_leg``'s ``ran``)."""
    exc.unsent = True
    return exc


class _Start:
    """One start in flight, shared by every leg that waits for it; ``boot``: begun by
    ``start_all``, not by a request."""

    __slots__ = ("boot", "conn", "done", "error")

    def __init__(self, *, boot: bool = False) -> None:
        self.boot = boot
        self.done = anyio.Event()
        self.conn: ProviderLink | None = None
        self.error: HostdError | None = None


def _log_transition(provider_id: str, old: Health, new: Health, policy: RestartPolicy) -> None:
    """``provider.parked`` (warning) when a provider is parked ``failed``: its restart
    attempts spent, or its credential refused, with when its retry comes
    (``retry_in_s``); ``provider.recovered`` when one that was down (crashed, failed)
    is ready again."""
    if new.state is ProviderState.FAILED:
        log.warning(
            "provider.parked",
            provider=provider_id,
            refused=new.refused,
            untrusted=new.untrusted,
            failures=new.consecutive_failures,
            last_failure=new.last_failure,
            retry_in_s=retry_cool_down_s(new, policy),
            stderr_tail=new.stderr_tail,
        )
    elif new.state is ProviderState.READY and old.state in _DOWN:
        log.info("provider.recovered", provider=provider_id, was=old.state.value)


_DOWN = frozenset({ProviderState.CRASHED, ProviderState.FAILED})


def _cannot_run(exc: HostdError) -> bool:
    """Whether a start failed in a way no restart cures until the user acts: its command
    could not run (the transport's ``stage: start``), or its config names what the
    provider does not offer (a binding's ``stage: config``: an MCP tool the server
    lacks). Restarting it with backoff would only meet the same error at every attempt."""
    return exc.data.get("stage") in ("start", "config")


#: ``ProviderSpec`` fields that no process or connection holds, each read afresh where it
#: is used: a change of only these is applied to the running provider's slot in place.
#: ``weight``: the budget split (``_plan.plan_fan_out``, per request); ``timeout_ms``: a
#: leg's and a write's deadline (``_plan``, ``_write``, per request); ``trusted_roots``
#: and ``untrusted``: the verify stage's tables, which ``Host.reconfigure`` updates (read
#: per request); ``start_timeout_s``: a start's deadline and a request's wait for
#: readiness (``ProviderPool.start_timeout``, at each start and request). Every other
#: field is the process's or its connection's (its argv, env, cwd, binding and its
#: options; a remote endpoint's URL, credential, TLS and connection cap, made once).
IN_PLACE = frozenset({"weight", "timeout_ms", "trusted_roots", "untrusted", "start_timeout_s"})


def _in_place(old: ProviderSpec, new: ProviderSpec) -> bool:
    """Whether ``new`` differs from ``old`` in ``IN_PLACE`` fields alone."""
    return replace(old, **{key: getattr(new, key) for key in IN_PLACE}) == new


@dataclass(slots=True, frozen=True)
class Reconfigured:
    """What ``ProviderPool.reconfigure`` did, by provider id (each list sorted)."""

    added: list[str]
    removed: list[str]
    changed: list[str]
    kept: list[str]
    #: Kept running with their new spec: they changed in ``IN_PLACE`` fields alone.
    updated: list[str]
    #: The slots taken out (removed, and the old slots of changed providers).
    retired: list[Slot]


#: HTTP statuses a server gives while it (or what stands behind its proxy) restarts, or
#: is too busy for now: it may answer at the next check. Any other status (a 404, a
#: redirect) says the configured URL is wrong, which no check cures.
_PASSING_STATUSES = frozenset({408, 425, 429, 500, 502, 503, 504})


def _unreachable(spec: ProviderSpec, exc: HostdError) -> bool:
    """Whether ``exc`` is a remote provider's server not reached, which may come back at
    any moment: no connection (refused, reset, a name that does not resolve, TLS that
    failed), no answer within the deadline, or a status of a server restarting
    (``_PASSING_STATUSES``). Not a refused credential (parked until it changes), a
    protocol error or a handshake that breaks the rules (the server answered, wrongly:
    its restart attempts, then parking, as for a local provider)."""
    if not spec.remote:
        return False
    if isinstance(exc, ProviderTimeout):
        return True
    if not isinstance(exc, RemoteTransport):
        return False
    status = exc.data.get("http_status")
    return status is None or status in _PASSING_STATUSES


def _check_found(unreached: HostdError) -> str:
    """What a remote provider's last failed check (or exchange) found, said by a leg that
    does not wait for the next: where a timeout stalled (the request may have reached
    the server: ``stalled_found``), the status a server answered, or else a failure
    below HTTP (the message after it says which: refused, a name not resolved)."""
    if isinstance(unreached, ProviderTimeout):
        return f"its last check {stalled_found(unreached.data.get('stalled'))}"
    status = unreached.data.get("http_status")
    if status is not None:
        return f"its server answered HTTP {status}"
    return "its server was not reached"


class Slot:
    """One configured provider's runtime state inside the pool."""

    __slots__ = (
        "_health",
        "cannot_run",
        "certificate",
        "conn",
        "crash",
        "last_ack",
        "no_version",
        "late_seen",
        "policy",
        "refusal",
        "retired",
        "revive",
        "spec",
        "start_deadline",
        "starting",
        "unreached",
        "untold",
        "writes",
        "writes_done",
    )

    def __init__(self, spec: ProviderSpec, policy: RestartPolicy | None = None) -> None:
        self.spec = spec
        #: Its pool's restart policy: what its log says of a retry to come.
        self.policy = policy or RestartPolicy()
        self.conn: ProviderLink | None = None
        self._health = Health()
        self.last_ack: HandshakeAck | None = None
        #: Its last handshake named no version (``ProviderConnection.given_version``):
        #: ``info`` shows none, not the ack's stand-in.
        self.no_version = False
        self.starting: _Start | None = None
        #: When the last start's deadline ends (anyio time): up to then it is never killed,
        #: and a request naming no timeout waits for its readiness.
        self.start_deadline: float | None = None
        #: The connection's late replies already counted in ``health`` (``take_late``).
        self.late_seen = 0
        #: The refusal that parked it (``health.refused``): what its legs say meanwhile.
        self.refusal: ProviderUnauthorized | None = None
        #: Why its last start cannot succeed until the user acts (``_cannot_run``: its
        #: command could not run, or its config names what the provider lacks); parked
        #: at once for it (``record_failure``): what its legs say meanwhile.
        self.cannot_run: HostdError | None = None
        #: The certificate failure that parked it (``health.untrusted``): what its legs
        #: say meanwhile.
        self.certificate: RemoteCertificate | None = None
        #: The failure that says its server was not reached (``health.unreachable``): a
        #: leg that does not wait for the next check fails with its code (``_not_waited``).
        self.unreached: HostdError | None = None
        #: The failure of a boot start that outlived its deadline, no request having waited
        #: for it: the first leg that meets it is told it as it is (``_not_waited``), not
        #: of a start that may never come.
        self.untold: HostdError | None = None
        #: The crash of its last process, counted when it was seen (``exited``), until the
        #: next ask of the reranker takes it to say how it ended (``take_crash``); a
        #: provider's legs say the backoff instead, its health why it is down.
        self.crash: ProviderCrashed | None = None
        #: Its pending start with no request asking (``ProviderPool._revive``): the scope
        #: that cancels it, while it waits out a backoff or a cool-down.
        self.revive: anyio.CancelScope | None = None
        #: Taken out of the pool by a config reload (``ProviderPool.reconfigure``): never
        #: started again; a request planned before the reload fails its leg with this.
        self.retired: ProviderCrashed | None = None
        #: Memory writes sent to it and not yet answered (``ProviderPool.writing``): a
        #: reload that retires it lets them finish before it stops the process, so a
        #: write sent is answered with what the provider did, never cut off midway.
        self.writes = 0
        #: Set once ``writes`` is back to 0, for the ``stop_retired`` waiting on it.
        self.writes_done: anyio.Event | None = None

    @property
    def health(self) -> Health:
        return self._health

    @health.setter
    def health(self, new: Health) -> None:
        """Every change of its health goes through here: a change of state that an
        operator alerts on (parked, back) is logged once, where it happens."""
        old, self._health = self._health, new
        if new.state is not old.state:
            _log_transition(self.spec.id, old, new, self.policy)

    def take_late(self) -> int:
        """Late replies the connection read since the last call: replies to legs that had
        given up (``ProviderConnection.late_replies``; a remote exchange is cancelled
        with its leg, so none come)."""
        conn = self.conn
        if not isinstance(conn, ProviderConnection):
            return 0
        total = conn.late_replies
        late, self.late_seen = total - self.late_seen, total
        return late

    @property
    def state(self) -> ProviderState:
        """The recorded state, or ``crashed`` for a process that died since its last leg,
        ``warming`` for a running one that is not ready yet, ``failed`` for one whose
        warm-up failed (it runs, and refuses every query: its progress says why),
        ``starting`` for one never started whose first start is under way."""
        state = self.health.state
        if state is ProviderState.IDLE and self.starting is not None:
            return ProviderState.STARTING
        if state is ProviderState.READY:
            if self.conn is None or not self.conn.alive:
                return ProviderState.CRASHED
            if self.conn.readiness.warming:
                return ProviderState.WARMING
            if self.conn.readiness.state == "failed":
                return ProviderState.FAILED
        return state

    def live(self) -> ProviderLink | None:
        """The connection when it can take a request now, else ``None``."""
        conn = self.conn
        return conn if conn is not None and conn.alive else None


class ProviderPool:
    """``async with ProviderPool(specs, settings) as pool``: every provider's process."""

    def __init__(
        self, specs: Iterable[ProviderSpec], settings: PoolSettings, *, noun: str = "provider"
    ) -> None:
        #: What its processes are called in a crash's words (``reranker`` for the reranker).
        self.noun = noun
        self.slots: dict[str, Slot] = {}
        for spec in specs:
            if spec.id in self.slots:
                raise ValueError(f"duplicate provider id {spec.id!r}")
            self.slots[spec.id] = Slot(spec, settings.restart_policy)
        self._ordered = tuple(sorted(self.slots.values(), key=lambda s: s.spec.id))
        #: The slot of each provider a reload removed (until one adds it again): what a
        #: request that chose it before the reload is given (``select``'s ``retired``).
        self._removed: dict[str, Slot] = {}
        if settings.start not in ("lazy", "boot"):
            raise ValueError("start must be 'lazy' or 'boot'")
        self.settings = settings
        self.host_info = settings.host_info or HostInfo(name="hostd", version=__version__)
        #: Opens each connection; holds each remote provider's pooled HTTP client, made on
        #: its first start and kept for the pool's life.
        self.launcher = Launcher(settings, self.host_info)
        self.closing = False
        self.now: Callable[[], float] = settings.clock or now
        self._stack: AsyncExitStack | None = None
        self._tg: TaskGroup | None = None
        #: Told of every provider's ``context/progress`` (a request's progress token, a bar).
        self.progress_listeners: list[OnProgress] = []
        #: Told of every successful handshake (``_declared``: the scopes ``hostd consent``
        #: reads without starting the provider).
        self.handshake_listeners: list[Callable[[ProviderSpec, HandshakeAck], None]] = []

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
            await self.launcher.aclose()
        assert self._stack is not None and self._tg is not None
        self._tg.cancel_scope.cancel()
        # The body's own exception is not fed to the task group (it would come back
        # wrapped in an ExceptionGroup); returning None lets it propagate as it is.
        await self._stack.__aexit__(None, None, None)

    @property
    def running(self) -> bool:
        return self._tg is not None

    def select(self, providers: Iterable[str] | None, *, retired: bool = False) -> list[Slot]:
        """The named (default: all) slots, ordered by provider id. ``retired``: a provider
        a reload removed is given its retired slot, not refused ``UnknownProvider`` (a
        request that chose its providers before the reload: its leg there fails alone,
        with the reload's words)."""
        if providers is None:
            # Every request without a ``providers`` list asks for this order; the slots
            # are fixed at construction, so it was sorted then (a copy for the caller).
            return list(self._ordered)
        wanted = list(dict.fromkeys(providers))
        known = {**self._removed, **self.slots} if retired else self.slots
        unknown = [p for p in wanted if p not in known]
        if unknown:
            raise UnknownProvider(f"unknown provider(s): {', '.join(unknown)}", providers=unknown)
        return sorted((known[p] for p in wanted), key=lambda s: s.spec.id)

    async def start_all(self) -> None:
        """Start every provider now (boot mode; those of ``boot_only`` when it is set),
        waiting for each no longer than its start deadline and the grace period. A
        failure is recorded in its health and logged once, by the start itself
        (``provider.start.failed``, its typed error's reason and text): a start
        outliving this wait (its teardown walks the grace period) goes on in the
        pool's task group and logs its outcome when it ends."""
        s = self.settings
        only = s.boot_only

        async def one(slot: Slot) -> None:
            with anyio.move_on_after(self.start_timeout(slot) + s.grace_period_s):
                # Not logged here: a failed start logged itself; a parked provider or a
                # closing host (no start made) is in its health, and nothing failed anew.
                with suppress(HostdError):
                    await self.ensure(slot, boot=True)

        async with anyio.create_task_group() as tg:
            for slot in self.slots.values():
                if only is None or slot.spec.id in only:
                    tg.start_soon(one, slot)

    def reconfigure(self, specs: Iterable[ProviderSpec]) -> Reconfigured:
        """Take the providers of a reloaded config (sync: no await, so no request plans
        between the old set and the new): a provider whose spec is unchanged keeps its
        slot (its process, its health), and so does one whose spec changed in ``IN_PLACE``
        fields alone, with its new spec (the next request reads it); one removed, or whose
        spec changed otherwise, has its slot retired (never started again; its connection
        is the caller's to stop: ``stop_retired``), a changed one replaced by a fresh
        slot; one added gets a slot, started by the first request that asks (or by
        ``begin_start``)."""
        new = {spec.id: spec for spec in specs}
        kept: list[str] = []
        updated: list[str] = []
        changed: list[str] = []
        retired: list[Slot] = []
        for pid, slot in list(self.slots.items()):
            spec = new.get(pid)
            if spec == slot.spec:
                kept.append(pid)
                continue
            if spec is not None and _in_place(slot.spec, spec):
                slot.spec = spec
                updated.append(pid)
                continue
            why = "removed from the config" if spec is None else "its config section changed"
            slot.retired = ProviderCrashed(f"provider stopped by a config reload: {why}")
            self._cancel_revive(slot)
            retired.append(slot)
            del self.slots[pid]
            if spec is not None:
                changed.append(pid)
        added = [pid for pid in new if pid not in self.slots and pid not in changed]
        for pid in (*changed, *added):
            self.slots[pid] = Slot(new[pid], self.settings.restart_policy)
        self._ordered = tuple(sorted(self.slots.values(), key=lambda s: s.spec.id))
        removed = [s.spec.id for s in retired if s.spec.id not in new]
        for slot in retired:
            if slot.spec.id not in new:
                self._removed[slot.spec.id] = slot
        for pid in new:
            self._removed.pop(pid, None)
        return Reconfigured(
            sorted(added), sorted(removed), sorted(changed), sorted(kept), sorted(updated), retired
        )

    async def stop_retired(self, retired: Iterable[Slot]) -> None:
        """Stop the processes of slots ``reconfigure`` retired, as ``stop_all`` does at
        shutdown (each connection's teardown ladder, concurrently, shielded); a leg still
        on one fails (``provider connection closed``). Returns once each has exited."""
        with anyio.CancelScope(shield=True):
            async with anyio.create_task_group() as tg:
                for slot in retired:
                    tg.start_soon(self._stop_retired, slot)
            for slot in retired:
                await self.launcher.forget(slot.spec.id)

    async def _stop_retired(self, slot: Slot) -> None:
        """Stop one retired slot's process once the writes sent to it are answered
        (each bounded by its own deadline, ``write_one``)."""
        if slot.writes:
            slot.writes_done = done = anyio.Event()
            await done.wait()
        conn, slot.conn = slot.conn, None
        if conn is not None and not conn.closed:
            await conn.aclose()
        if slot.health.state is ProviderState.READY:
            slot.health = replace(slot.health, state=ProviderState.STOPPED)

    @staticmethod
    @contextmanager
    def writing(slot: Slot) -> Iterator[None]:
        """A memory write to ``slot`` under way: a reload's ``stop_retired`` waits for it."""
        slot.writes += 1
        try:
            yield
        finally:
            slot.writes -= 1
            if not slot.writes and slot.writes_done is not None:
                slot.writes_done.set()

    def begin_start(self, slot: Slot) -> None:
        """Begin ``slot``'s start in the pool's task group, waited for by no one (a
        reload's added provider, as a booting daemon starts its providers); nothing when
        it is live or a start is under way."""
        if self.closing or self._tg is None or slot.starting is not None or slot.live():
            return
        self._begin(slot, changed=False, boot=True)

    async def stop_all(self) -> None:
        """Tear every running provider down, concurrently (shielded by the caller)."""
        async with anyio.create_task_group() as tg:
            for slot in self.slots.values():
                if slot.conn is not None:
                    tg.start_soon(slot.conn.aclose)
                if slot.health.state is ProviderState.READY:
                    slot.health = replace(slot.health, state=ProviderState.STOPPED)

    # -- starting and restarting -----------------------------------------------------

    async def ensure(
        self, slot: Slot, deadline: float | None = None, *, boot: bool = False
    ) -> ProviderLink:
        """The live connection, (re)started per the health decisions (``_health``).
        Waiting for a start is bounded by the caller's scope; the start itself is not.
        ``boot``: asked by ``start_all``, for no request."""
        while True:
            if slot.retired is not None:
                raise _unsent(ProviderCrashed(slot.retired.message, **slot.retired.data))
            conn = slot.live()
            if conn is not None:
                return conn
            waits = awaits_start(slot.health)
            if slot.starting is not None:
                if not waits:
                    raise self._not_waited(slot, "a start is under way")
                await self._join(slot.starting, slot, boot=boot)
                continue
            now = self.now()
            policy = self.settings.restart_policy
            changed = slot.health.refused and self.launcher.credential_changed(slot.spec)
            decision = decide_start(
                slot.health, alive=False, now=now, policy=policy, credential_changed=changed
            )
            if decision.action is StartAction.GIVE_UP:
                # When it is tried again: its cool-down, unless none is set.
                never = decision.delay_s == float("inf")
                when = "" if never else f", or in {decision.delay_s:.0f} s"
                if slot.health.refused and slot.refusal is not None:
                    # What to fix, in the refusal's own words: waiting is no cure (and
                    # a one-shot command ends long before any retry).
                    # Said as a refusal on record, not as the server's answer to this
                    # request: it is not asked again until something changes.
                    refusal = slot.refusal
                    again = (
                        f"{refusal.message} (refused earlier; not asked again until the "
                        f"credential changes or providers/restart{when})"
                    )
                    raise _unsent(type(refusal)(again, **refusal.data))
                if slot.health.untrusted and slot.certificate is not None:
                    # What to fix, in the certificate's own words, and when it is
                    # checked again (a renewed certificate needs no restart).
                    cert = slot.certificate
                    when = f"in {decision.delay_s:.0f} s, or at "
                    again = " (not checked again until " if never else f" (checked again {when}"
                    again += "providers/restart)"
                    raise _unsent(type(cert)(cert.message + again, **cert.data))
                if slot.cannot_run is not None:
                    # The start's own reason, not "restart attempts exhausted": it was
                    # run once, and a restart alone would meet the same error.
                    cannot = slot.cannot_run
                    raise _unsent(
                        type(cannot)(
                            cannot.message + not_run_again(when),
                            **cannot.data,
                        )
                    )
                # Quotes the last start or crash failure, never a report that quoted one:
                # the message stays the same size however many requests meet it.
                retry = (
                    "no retry on its own" if never else f"next retry in {decision.delay_s:.0f} s"
                )
                raise _unsent(
                    ProviderParked(
                        f"restart attempts exhausted ({slot.health.consecutive_failures}); "
                        f"{retry}; {parked_restart(slot.spec.id)}; "
                        f"last failure: {slot.health.last_failure}",
                        stage="restart",
                    )
                )
            if decision.action is StartAction.WAIT:
                if not waits:
                    raise self._not_waited(
                        slot, f"the next start in {decision.delay_s * 1000:.0f} ms", "backoff"
                    )
                if deadline is not None and now + decision.delay_s > deadline:
                    raise _unsent(
                        ProviderCrashed(
                            f"provider is down; next restart in {decision.delay_s * 1000:.0f} ms",
                            stage="backoff",
                        )
                    )
                await anyio.sleep(decision.delay_s)
                continue
            if self.closing or self._tg is None:
                raise _unsent(ShuttingDown("host is shutting down"))
            start = self._begin(slot, changed=changed, boot=boot)
            if not waits:
                raise self._not_waited(slot, "started again in the background")
            await self._join(start, slot, boot=boot)

    def _begin(
        self, slot: Slot, *, changed: bool, boot: bool = False, delay_s: float = 0.0
    ) -> _Start:
        """Begin a start in the pool's task group, after ``delay_s`` (what is left of its
        backoff); ``changed``: its refused credential changed (no cool-down passed)."""
        assert self._tg is not None
        if slot.conn is not None:
            self.discard(slot)
        # A changed credential starts it at once: no cool-down passed, no retry counted
        # (its new token is logged as sent: ``provider.remote.credential.renewed``).
        if is_parked(slot.health, self.settings.restart_policy) and not changed:
            slot.health = record_retry(slot.health)  # cool-down over: one try
            # A certificate is checked after each cool-down, which does not grow: its
            # retries are said at debug, as an unreachable server's checks are.
            said = log.debug if slot.health.untrusted else log.info
            said(
                "provider.retry",
                provider=slot.spec.id,
                retries=slot.health.retries,
                consecutive_failures=slot.health.consecutive_failures,
            )
        start = slot.starting = _Start(boot=boot)
        self._tg.start_soon(self._start, slot, start, delay_s)
        return start

    def restart_behind(self, slot: Slot) -> bool:
        """Whether ``slot`` is in a crash loop and restarts behind the request that asks
        (``restarts_behind``): its start under way, or begun now, after what is left of
        its backoff. ``False``: the request goes on as ``ensure`` says (live, a first
        failure's restart, parked, a stuck start, the host closing). Called also as a
        leg meets a crash that makes a loop, so a provider quick to start again is up
        for the next request."""
        policy = self.settings.restart_policy
        if slot.retired is not None:
            return False
        if slot.live() is not None or not restarts_behind(slot.health, policy):
            return False
        if slot.starting is not None:
            return True
        if self.closing or self._tg is None:
            return False
        # Not parked (``restarts_behind``): a start now, or after what is left of its backoff.
        decision = decide_start(slot.health, alive=False, now=self.now(), policy=policy)
        delay = decision.delay_s if decision.action is StartAction.WAIT else 0.0
        self._begin(slot, changed=False, delay_s=delay)
        return True

    def _schedule_revive(self, slot: Slot) -> None:
        """After a failure: start ``slot`` again on its own once its backoff (or, parked,
        its cool-down) has passed (``_revive``), replacing any such wait already pending:
        one per provider."""
        self._cancel_revive(slot)
        if not self.settings.restart_idle or self.closing or self._tg is None or slot.retired:
            return
        scope = slot.revive = anyio.CancelScope()
        self._tg.start_soon(self._revive, slot, scope)

    @staticmethod
    def _cancel_revive(slot: Slot) -> None:
        scope, slot.revive = slot.revive, None
        if scope is not None:
            scope.cancel()

    async def _revive(self, slot: Slot, scope: anyio.CancelScope) -> None:
        """Start a provider that is down once ``idle_restart_in`` says, with no request
        asking; nothing once it is up, or a start is under way (a request's, a restart
        behind it: one start at a time), or the pool closes. The wait is read again after
        each sleep (the health clock decides, as it does for a request)."""
        policy = self.settings.restart_policy
        try:
            with scope:
                while not self.closing and slot.starting is None and slot.live() is None:
                    wait = idle_restart_in(slot.health, now=self.now(), policy=policy)
                    if wait is None:
                        return
                    if wait > 0:
                        await anyio.sleep(wait)
                        continue
                    # No await since the checks above: no other start can begin between.
                    self._begin(slot, changed=False)
                    return
        finally:
            if slot.revive is scope:
                slot.revive = None

    @staticmethod
    def _not_waited(slot: Slot, what: str, stage: str = "start") -> HostdError:
        """The leg's failure when its provider's last start outlived its deadline: it does
        not wait for another (``awaits_start``); the reason quotes the last failure.
        The first leg to meet a boot start's failure (no request waited for that start)
        is told that failure itself: it says what failed, and promises no next start
        (a one-shot command, which starts its providers at boot, ends before any). Told
        at once, the leg never sent (``_unsent``)."""
        untold, slot.untold = slot.untold, None
        if untold is not None:
            return _unsent(type(untold)(untold.message, **untold.data))
        failed = "its last start failed"
        unreached = slot.unreached if slot.health.unreachable else None
        if unreached is not None:  # a remote server that is down: a start is a check
            failed = _check_found(unreached)
            what = what.replace("start", "check")
            # The code of the failure that put it down (``transport``, a handshake's
            # ``timeout``): a script branching on it is told what the check found, not of
            # a crash of a process that does not exist.
            return _unsent(
                type(unreached)(
                    f"not waited for: {failed} ({slot.health.last_failure}); {what}",
                    **{**unreached.data, "stage": stage},
                )
            )
        return _unsent(
            ProviderCrashed(
                f"not waited for: {failed} ({slot.health.last_failure}); {what}", stage=stage
            )
        )

    def start_timeout(self, slot: Slot) -> float:
        return slot.spec.start_timeout_s or self.settings.start_timeout_s

    async def ready(self, slot: Slot, deadline: float | None = None) -> ProviderLink:
        """The connection once the provider answers queries (ready, failed its warm-up,
        or warming and answering from what it has built so far), waiting no
        longer than its start deadline; past that, the connection as it is (warming).
        ``deadline``: the caller's own, for a backoff (``ensure``); its scope bounds the rest."""
        if deadline is None:
            deadline = now() + self.start_timeout(slot)
        conn = await self.ensure(slot, deadline)
        if conn.readiness.warming and slot.start_deadline is not None:
            with anyio.move_on_at(slot.start_deadline):
                await conn.readiness.answers.wait()  # ready, or answering meanwhile
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
    async def _join(start: _Start, slot: Slot, *, boot: bool = False) -> None:
        """Wait for ``start``; its failure is raised (and, to a request, told: the slot
        has no untold failure left)."""
        await start.done.wait()
        if start.error is not None:
            if not boot and slot.untold is start.error:
                slot.untold = None
            raise start.error

    async def _start(self, slot: Slot, start: _Start, delay_s: float = 0.0) -> None:
        """Spawn and handshake in the pool's task group, bounded by its start deadline;
        after ``delay_s`` (a backoff), when a start run behind a request waits one out."""
        assert self._tg is not None
        spec = slot.spec
        timeout = self.start_timeout(slot)
        try:
            if delay_s > 0:
                await anyio.sleep(delay_s)
            slot.start_deadline = now() + timeout
            conn = await self.launcher.open(
                spec, task_group=self._tg, handshake_timeout=timeout, on_progress=self._on_progress
            )
        except ShuttingDown as exc:
            # Cancelled by hostd itself (the pool closing under it): not the provider's
            # failure, so neither counted in its health nor logged as one.
            log.info("provider.start.cancelled", provider=spec.id, why=exc.message)
            start.error = exc
        except HostdError as exc:
            before = slot.health
            if isinstance(exc, ProviderUnauthorized):
                self.record_refused(slot, exc)
            else:
                self.record_failure(slot, exc, start=True)
            slot.cannot_run = exc if _cannot_run(exc) else None
            # A boot start that outlived its deadline: no request waited for it, so the
            # first leg to meet it is told it (``_not_waited``).
            timed_out = start.boot and isinstance(exc, ProviderTimeout)
            slot.untold = exc if timed_out else None
            # Parked by it (its attempts spent, or its retry failed): when the next comes,
            # so a log read a day later tells how often a provider that never starts is
            # tried (each failed retry doubles its cool-down: ``retry_cool_down_s``).
            health = slot.health
            parked = is_parked(health, slot.policy)
            more: dict[str, Any] = {}
            if parked:
                more["retry_in_s"] = retry_cool_down_s(health, slot.policy)
            quiet = False
            if health.untrusted:  # the same certificate again: said once, as it began
                quiet = before.untrusted and before.last_failure == health.last_failure
            if health.unreachable:  # checked again soon: when, and how often it failed
                more["failures"] = health.consecutive_failures
                more["next_check_in_s"] = check_delay(health.consecutive_failures, slot.policy)
                # The same words as the check before: said once, as the outage began.
                again = before.unreachable and before.consecutive_failures >= 2
                quiet = again and before.last_failure == health.last_failure
            said = {
                "provider": spec.id,
                "reason": exc.reason,
                "error": exc.message,
                "stderr_tail": stderr_tail_of(exc),
                **more,
            }
            if quiet:
                log.debug("provider.start.failed", **said)
            else:
                log.warning("provider.start.failed", **said)
            start.error = exc
        else:
            if slot.retired is not None:  # removed by a reload while it started
                self._tg.start_soon(conn.aclose)
                start.error = slot.retired
                return
            slot.conn, slot.late_seen, slot.cannot_run, slot.crash = conn, 0, None, None
            slot.last_ack = conn.ack
            slot.no_version = (
                isinstance(conn, ProviderConnection)
                and conn.ack is not None
                and conn.given_version is None
            )
            if isinstance(conn, ProviderConnection):
                self._tg.start_soon(self._watch, slot, conn)
            if conn.ack is not None:
                for heard in list(self.handshake_listeners):
                    heard(spec, conn.ack)
            slot.health = record_started(slot.health)
            slot.untold = None
            start.conn = conn
        finally:
            if start.conn is None and start.error is None:  # cancelled with the pool
                start.error = ShuttingDown("host is shutting down")
            slot.starting = None
            start.done.set()

    async def restart(self, slot: Slot) -> ProviderLink:
        """``providers/restart``: stop the running process, if any (its in-flight legs
        fail), forget the failures (``record_restart_requested``) and start it now,
        waiting at most its start deadline and the grace period. A start already
        under way is joined instead of doubled."""
        if self.closing or self._tg is None:
            raise ShuttingDown("host is shutting down")
        log.info(
            "provider.restart.requested",
            provider=slot.spec.id,
            state=slot.state.value,
            consecutive_failures=slot.health.consecutive_failures,
        )
        self._cancel_revive(slot)  # started now, not also when its backoff ends
        if slot.starting is None:
            self.discard(slot)
        slot.health = record_restart_requested(slot.health)
        s = self.settings
        limit = self.start_timeout(slot) + s.grace_period_s
        try:
            with anyio.fail_after(limit):
                return await self.ensure(slot)
        except TimeoutError:
            raise ProviderTimeout(
                f"not started within {limit * 1000:.0f} ms", stage="restart"
            ) from None

    # -- failures ------------------------------------------------------------------------

    def record_failure(self, slot: Slot, exc: HostdError, *, start: bool = False) -> None:
        """``start``: the failure of a start; one that outlived its deadline (the
        handshake's ``ProviderTimeout``) is a stuck start (``awaits_start``), one no
        restart cures (``_cannot_run``) is parked at once; a remote server not reached
        (``_unreachable``), at a start or under a leg, is never parked for it; a
        server's certificate that failed verification parks it (``record_untrusted``)."""
        if isinstance(exc, RemoteCertificate) and slot.spec.remote:
            slot.certificate, slot.unreached = exc, None
            slot.health = record_untrusted(
                slot.health, now=self.now(), error=failure_text(exc.reason, exc.message)
            )
            self._schedule_revive(slot)
            return
        unreachable = _unreachable(slot.spec, exc)
        slot.unreached = exc if unreachable else None
        slot.health = record_failure(
            slot.health,
            now=self.now(),
            error=failure_text(exc.reason, exc.message),
            policy=self.settings.restart_policy,
            start_timed_out=start and isinstance(exc, ProviderTimeout),
            cannot_run=start and _cannot_run(exc),
            unreachable=unreachable,
            stderr_tail=stderr_tail_of(exc),
        )
        self._schedule_revive(slot)

    def record_refused(self, slot: Slot, exc: ProviderUnauthorized) -> None:
        """The provider refused its credential, or none could be read: parked at once
        (``record_refused``), its legs failing with ``exc``'s words meanwhile."""
        slot.refusal = exc
        slot.health = record_refused(
            slot.health, now=self.now(), error=failure_text(exc.reason, exc.message)
        )
        self._schedule_revive(slot)

    def record_refusals(self, slot: Slot, invalid: str | None) -> None:
        """An ``ok`` leg counted with ``refusals_later``, once verification is done:
        ``invalid`` (``refused_words``) when every frame it offered was refused for what
        it sent, else ``None`` (``record_refusals``)."""
        slot.health = record_refusals(slot.health, invalid)

    def record_leg(
        self,
        slot: Slot,
        status: str,
        error: str | None,
        lost: str | None = None,
        empty: str | None = None,
        invalid: str | None = None,
        sent_mark: int | None = None,
        refusals_later: bool = False,
        ran: bool = True,
    ) -> None:
        """Count a finished leg (``lost``: what an ``ok`` one lost of its answer; ``empty``:
        why one held no frame, when its binding could tell; ``invalid``: what its frames
        were refused for when every one was; ``refusals_later``: that is told after
        verification, by ``record_refusals``; ``sent_mark``: its health's
        ``timeout_mark`` when it was sent, so legs that timed out together count as one
        miss; ``ran`` False: a leg told at once, never sent, no failure of its own); restart
        a provider that is alive but hung (``is_hung``): its process is torn down in the
        pool's task group and the next request starts a fresh one, after the backoff the
        failure earns. Late replies read since the
        last leg say it is slow, not hung (``record_leg``'s ``late``). A remote provider
        is never hung (no process to replace: a new handshake with the same server only
        costs time); a remote leg ``unauthorized`` by its connection's refusal parks the
        provider (``record_refused``)."""
        slot.health = record_leg(
            slot.health,
            status,
            error=error,
            late=slot.take_late(),
            lost=lost,
            empty=empty,
            invalid=invalid,
            sent_mark=sent_mark,
            refusals_later=refusals_later,
            ran=ran,
        )
        conn = slot.conn
        if status == "unauthorized":
            refusal = self.launcher.take_refusal(conn)
            if refusal is not None:
                self.record_refused(slot, refusal)
                self.discard(slot)
                return
        if conn is not None and conn.readiness.warming:
            return  # building its index: never "hung" (it said so, _readiness)
        policy = self.settings.restart_policy
        if is_hung(slot.health, policy, has_process=not slot.spec.remote) and conn is not None:
            n = slot.health.consecutive_timeouts
            log.warning("provider.hung.restart", provider=slot.spec.id, timeouts=n)
            slot.health = record_failure(
                slot.health,
                now=self.now(),
                error=f"hung: no reply to {n} requests in a row",
                policy=policy,
            )
            self.discard(slot)
            self._schedule_revive(slot)

    def discard(self, slot: Slot) -> None:
        """Drop the connection; its teardown runs in the pool's task group (shielded)."""
        conn, slot.conn = slot.conn, None
        if conn is not None and not conn.closed and self._tg is not None:
            self._tg.start_soon(conn.aclose)

    async def _watch(self, slot: Slot, conn: ProviderConnection) -> None:
        """Wait for the process's exit; one that ended on its own is counted at once
        (``exited``). One the pool stopped is no crash."""
        await conn.child.exited.wait()
        if conn.child.exited_on_its_own:
            await self.exited(slot, conn)

    async def exited(
        self, slot: Slot, conn: ProviderConnection, deadline: float | None = None
    ) -> None:
        """``conn`` died (its process ended, or its output with it): its crash, with what
        the process says of it (its exit status or signal, its stderr's tail; waited for
        no later than ``deadline``: ``explain``), counted and its teardown scheduled
        (``broken``), and kept for the next request to tell (``take_crash``). Once per
        connection, by whichever of its watcher and a request meets it first; one a leg
        met mid-call was counted with the leg's own words."""
        crash = await conn.explain(ProviderCrashed(f"{self.noun} process ended"), deadline)
        if slot.conn is not conn:
            return
        self.broken(slot, conn, crash)
        slot.crash = crash
        log.warning(
            "provider.exited",
            provider=slot.spec.id,
            error=crash.message,
            stderr_tail=stderr_tail_of(crash),
        )

    @staticmethod
    def take_crash(slot: Slot) -> ProviderCrashed | None:
        """The crash ``exited`` counted, for the one request that says how it ended."""
        crash, slot.crash = slot.crash, None
        return crash

    def broken(self, slot: Slot, conn: ProviderLink | None, exc: HostdError) -> None:
        """The process died or broke its stream: count a failure, schedule teardown."""
        if conn is None or slot.conn is not conn:
            return  # another leg already handled this connection
        self.record_failure(slot, exc)
        self.discard(slot)

    # -- introspection ------------------------------------------------------------------

    def row(self, slot: Slot) -> dict[str, Any]:
        """``providers/list``'s entry for one provider (without verification figures)."""
        ack, conn = slot.last_ack, slot.conn
        health = slot.health.to_wire(self.now())
        if conn is not None:
            health["readiness"] = conn.readiness.state
            health["progress"] = dict(conn.readiness.progress)
            left = conn.readiness.left_s()
            if left is not None:  # a warm-up's time left, once its rate is measured
                health["left_s"] = round(left)
        policy = self.settings.restart_policy
        due = retry_due(slot.health, policy)
        if due is not None:  # parked: when its cool-down lets it start again
            health["retry_in_s"] = round(max(0.0, due - self.now()), 3)
        due = restart_due(slot.health, policy)
        if due is not None:  # crashed: when its backoff lets it start again
            # 0 while a start is under way: its outcome is the next thing to happen.
            left = 0.0 if slot.starting is not None else due - self.now()
            health["retry_in_s"] = round(max(0.0, left), 3)
        check = check_due(slot.health, policy)
        if check is not None:  # its server not reached: when it is checked again
            # 0 while a check is under way: its outcome is the next thing to happen.
            left = 0.0 if slot.starting is not None else check - self.now()
            health["next_check_in_s"] = round(max(0.0, left), 3)
        if isinstance(conn, ProviderConnection):
            health["pid"] = conn.child.provider_pid  # the provider's own, not the shim's
            health["stderr_lines"] = conn.child.stderr_lines
            health["stderr_suppressed"] = conn.child.stderr_suppressed
        info = ack.provider.to_wire() if ack is not None else None
        if info is not None and slot.no_version:  # not said: shown as not said (no member)
            info.pop("version", None)
        row = {
            "id": slot.spec.id,
            "binding": slot.spec.binding,
            "info": info,
            "capabilities": ack.capabilities.to_wire() if ack is not None else None,
            "state": slot.state.value,
            "health": health,
        }
        if slot.spec.url is not None:
            row["remote"] = self.launcher.describe_remote(slot.spec)
        return row
