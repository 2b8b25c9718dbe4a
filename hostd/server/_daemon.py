"""The daemon: lifecycle, listeners, counters and the state methods share.

Owns start-up (engine ``Host`` from config, listeners), the graceful stop
(SIGTERM, SIGINT, ``host/shutdown`` or stdin EOF: let in-flight requests
finish within the grace period while new requests, also on connections opened
meanwhile, are answered ``shutting_down``; cancel the rest, close the listeners
so a later connect is refused at once, close connections, shut providers down,
remove the socket, return normally), and the counters ``host/status`` reports,
with the config file the daemon runs (``_config_stamp``: read at start and at each
reload). A reload (``host/reload``, SIGHUP: ``reload``) reads that file again and,
when it is valid, applies it as ``_reload`` decides: providers added, removed or
changed are started or stopped by the engine, per-request settings take effect for
the requests that arrive after it, and what is read once at start (listeners, the log
file, ...) keeps its value until a restart, named in the reply. One reload at a time:
another waits for it.
The connection caps are ``_admission``'s. What a request does (and keeps: usage
reports, shadow records) is the pipeline's (``hostd.pipeline``).
"""

from __future__ import annotations

import contextlib
import itertools
import os
import secrets
import signal
import socket
import struct
import time
from collections import Counter
from collections.abc import AsyncIterator, Callable, Iterable
from datetime import UTC, datetime
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

import anyio
from anyio.abc import SocketListener, SocketStream

from hostd._build import build_version
from hostd.config import (
    Config,
    default_socket_path,
    default_state_dir,
    load_config,
    open_secret_files,
    secret_file_open,
)
from hostd.errors import ConfigError, ListenerError, ShuttingDown
from hostd.logs import flush_logs, get_logger, set_audit
from hostd.pipeline import Pipeline
from hostd.protocol import sha256_digest
from hostd.transport import RepeatedEvents

from ._admission import MAX_UNAUTHENTICATED, Admission
from ._api import answer_one, dispatch_one
from ._connection import Connection, Limits, SendNowait, socket_receive, socket_send_nowait
from ._engine import open_engine
from ._local import LocalSession
from ._reload import NEEDS_RESTART, reload_plan
from ._tcp_token import TcpToken

if TYPE_CHECKING:
    from hostd.quality import ShadowRecorder

    from ._engine import Host, RerankService

from ._listeners import (
    CONSENT_FILES,
    SHADOW_FILES,
    claim_config,
    open_stdio,
    open_tcp_listener,
    open_unix_listener,
    private_state_dir,
    release_config,
    remove_socket,
    reserve_stdout,
    socket_owner_lost,
)

__all__ = ["MAX_UNAUTHENTICATED", "Daemon", "LocalSession"]

log = get_logger("hostd.server")

#: Past the grace period, how long the in-flight requests' shutting_down replies get.
_ABORT_REPLY_S = 1.0


def _utc(t: float) -> str:
    return datetime.fromtimestamp(t, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _config_stamp(config: Config) -> dict[str, Any] | None:
    """The config file ``config`` was loaded from: its real path, the sha256 of the bytes
    it was parsed from (kept by ``load_config``, so an edit made while it started cannot
    pass for what it runs), the file's mtime and this moment (``host/status`` answers it
    as ``config``, and a client compares the file's digest with it). None for a config
    built in code (``<defaults>``)."""
    source = config.source
    if source.startswith("<"):
        return None
    path = Path(source)
    digest = config.digest
    try:
        mtime = path.stat().st_mtime
        if digest is None:  # parsed from text by a caller: the file as it is now
            digest = sha256_digest(path.read_bytes())
    except OSError:
        return None
    return {
        "file": str(path.resolve()),
        "digest": digest,
        "mtime": _utc(mtime),
        "loaded_at": _utc(time.time()),
    }


def _check_tokenizer(config: Config) -> None:
    """Load ``host.tokenizer``, if set: a file that is not one is the config's error,
    named as its other errors are (by file), at start and at a reload alike."""
    if config.host.tokenizer is None:
        return
    from hostd._tokenizer import load_tokenizer

    try:
        load_tokenizer(config.host.tokenizer)
    except ConfigError as exc:
        raise ConfigError(
            f"{config.source}: {exc.message}", **{**exc.data, "file": config.source}
        ) from None


class Daemon:
    """One running hostd. ``await Daemon(config).run(...)`` returns after a graceful stop."""

    def __init__(
        self,
        config: Config,
        *,
        host_factory: Callable[..., Any] | None = None,
        loaded: Config | None = None,
    ) -> None:
        self.config = config
        #: The config file as last read, before the command line's overrides (``hostd
        #: serve --socket``): what a reload compares the file with (default ``config``).
        self._loaded = loaded if loaded is not None else config
        #: The file as read at start: what the keys a reload cannot apply still run.
        self._started_file = self._loaded
        #: Those keys the file has changed since start (``reload_plan``, from the file as
        #: read at start to the file as last read): ``host/status`` says them until a
        #: restart, as ``config_needs_restart``.
        self._needs_restart: list[str] = []
        #: Held while a reload runs: a second one waits for it (``reload``).
        self._reloading: anyio.Lock | None = None
        #: The engine, set by ``run()``/``local()`` (a ``host_factory``'s object in tests).
        self.host: Host
        #: The request path over it, set with it.
        self.pipeline: Pipeline
        self.counters: Counter[str] = Counter()
        #: Warnings a peer can cause once per connection: bucketed, the rest summarised.
        self.repeats = RepeatedEvents(log)
        self.stopping = False
        self.started_at = time.time()
        #: The config file as it was at start (``host/status``'s ``config``): read here
        #: once, never per request.
        self.config_file = _config_stamp(config)
        self._host_factory = host_factory
        #: The build that runs (``0.1.0+g0fda9cc``), as it was at start: an upgrade
        #: installed under a running daemon does not change what it says.
        self.version = build_version()
        self._stop = anyio.Event()
        self._stop_reason: str | None = None
        self._inflight = 0
        #: Made only while the grace period waits for the requests in flight; set when
        #: the count falls to 0 (no event per request: most are never waited on).
        self._idle: anyio.Event | None = None
        # A request id keys its shadow and feedback rows, which outlive the process: one
        # ``shadow.db`` gathers the ids of every daemon and one-shot run on its state
        # directory (each one-shot's first id ends in ``-1``). With 24 random bits two of
        # about 5,000 runs shared an id as often as not, and the later one's pending
        # record and feedback replaced the earlier one's; 48 bits keep them apart.
        self._prefix = secrets.token_hex(6)
        self._seq = itertools.count(1)
        self.socket_path: Path | None = None
        #: What an unclean stop of this config's last daemon left, found at start (its
        #: lock's record, a stale socket replaced): said once serving (``host.unclean_stop``).
        self._unclean: dict[str, Any] | None = None
        self._on_stopping: Callable[[], None] | None = None
        self._socket_identity: tuple[int, int] | None = None
        self._drain_scope: anyio.CancelScope | None = None
        self._connections: set[Connection] = set()
        self._admission = Admission(self.counters, self.repeats, config.host.max_connections)
        self.tcp_address: tuple[str, int] | None = None
        #: The TCP listener's token as the config names it now (a rotated file is read
        #: again), while the listener runs; the one the last check found in force.
        self._tcp_token: TcpToken | None = None
        self._tcp_in_force: str | None = None
        #: Opt-in shadow ranking ([shadow]): samples compositions for ``hostd shadow replay``.
        self.shadow: ShadowRecorder | None = None
        #: The ``[reranker]`` process, while the engine runs.
        self.reranker: RerankService | None = None
        _check_tokenizer(config)  # loaded now: a bad file fails the start
        if config.shadow.enabled:
            from hostd.quality import ShadowRecorder

            self.shadow = ShadowRecorder.from_settings(config.shadow, config.state_path)

    # -- state the methods read ---------------------------------------------------------

    def new_request_id(self) -> str:
        return f"{self._prefix}-{next(self._seq)}"

    async def _close_shadow(self) -> None:
        # Records still queued for the shadow store are written before the stop completes.
        if self.shadow is not None:
            await self.shadow.aclose()

    def status(self) -> dict[str, Any]:
        status: dict[str, Any] = {
            "version": self.version,
            "pid": os.getpid(),
            "uptime_s": round(time.time() - self.started_at, 3),
            "state": "stopping" if self.stopping else "serving",
            "socket": str(self.socket_path) if self.socket_path else None,
            "tcp": list(self.tcp_address) if self.tcp_address else None,
            "providers": len(self.config.provider),
            "config": self.config_file,
            "config_needs_restart": list(self._needs_restart),
            "in_flight": self._inflight,
            "counters": dict(sorted(self.counters.items())),
        }
        sessions = getattr(self.host, "session_stats", None)
        if callable(sessions):
            status["sessions"] = sessions()
        if self.reranker is not None:  # its state and health, as a providers/list row
            status["reranker"] = self.reranker.row()
        return status

    # -- reload --------------------------------------------------------------------------

    async def reload(self, trigger: str) -> dict[str, Any]:
        """Read the config file again and apply it (``host/reload``, SIGHUP; docs/api.md):
        the reply once the new config is in force (providers added or changed registered
        and, for ``start_providers = "boot"``, their starts begun; the removed and the
        old processes of the changed exited). An invalid file changes nothing
        (``ConfigError``). One at a time: a second waits for the first, then reads the
        file as it is then."""
        if self._reloading is None:
            self._reloading = anyio.Lock()
        async with self._reloading:
            if self.stopping:
                raise ShuttingDown("hostd is shutting down")
            return await self._reload(trigger)

    async def _reload(self, trigger: str) -> dict[str, Any]:
        source = self.config.source
        try:
            if source.startswith("<"):
                raise ConfigError(
                    f"{source}: no config file to read again (a config built in code)",
                    file=source,
                    key=None,
                )
            new = await anyio.to_thread.run_sync(load_config, source)
            await anyio.to_thread.run_sync(_check_tokenizer, new)
        except ConfigError as exc:
            log.error("host.reload.failed", trigger=trigger, error=exc.message, **_key(exc))
            raise ConfigError(
                f"config not reloaded (the daemon keeps running the config it had): {exc.message}",
                **{**exc.data, "stage": "reload"},
            ) from None
        plan = reload_plan(self._loaded, self.config, new)
        # Pending since start, not only since the last reload: a key changed by an earlier
        # reload stays named until a restart, and one edited back is no longer.
        pending = reload_plan(self._started_file, self.config, new).needs_restart
        cfg = plan.config
        boot = cfg.host.start_providers == "boot"
        # From here to the pipeline's swap, no await: a request sees the old providers
        # with the old config, or the new with the new.
        done = self.host.reconfigure(cfg.provider_specs(), start=boot)
        self.config, self._loaded = cfg, new
        self._needs_restart = pending
        self.pipeline = self.pipeline.reconfigured(cfg)
        self.config_file = _config_stamp(cfg)
        set_audit(cfg.log)
        tcp_token = self._reload_tcp_token(cfg)
        # The stopped providers' processes exit before the reply: a client that reads
        # ``stopped`` finds them gone.
        await self.host.stop_retired(done)
        result = {
            "config": self.config_file,
            "started": done.added,
            "stopped": done.removed,
            "restarted": done.changed,
            "updated": done.updated,
            "kept": done.kept,
            "applied": plan.applied,
            "needs_restart": [
                {"key": key, "reason": NEEDS_RESTART.get(key) or NEEDS_RESTART[key.split(".")[0]]}
                for key in plan.needs_restart
            ],
        }
        if tcp_token is not None:
            result["tcp_token"] = tcp_token
        log.info(
            "host.reloaded",
            trigger=trigger,
            config=source,
            started=done.added,
            stopped=done.removed,
            restarted=done.changed,
            updated=done.updated,
            kept=done.kept,
            applied=plan.applied,
            needs_restart=plan.needs_restart,
        )
        if plan.needs_restart:
            log.warning(
                "host.reload.needs_restart",
                keys=plan.needs_restart,
                message="changed in the file, not applied: kept as they are until a restart",
            )
        flush_logs()
        return result

    # -- the TCP token ---------------------------------------------------------------------

    def _tcp_token_now(self) -> str | None:
        """The token a TCP client must send now (each ``$/authenticate`` asks): the
        file's as it is now, read again when it changed; ``None``: none is accepted."""
        assert self._tcp_token is not None
        token = self._tcp_token.current()
        self._revoke_other_tokens(token)
        return token

    def _revoke_other_tokens(self, token: str | None) -> int:
        """A token that replaced the one in force closes the TCP connections opened with
        another (a rotation revokes a developer's access, open connections included);
        the number closed. A file that gives no token closes none: new ones are refused."""
        if token is None or token == self._tcp_in_force:
            return 0
        self._tcp_in_force = token
        closed = [
            c
            for c in self._connections
            if c.authenticated_with is not None and c.authenticated_with != token
        ]
        for connection in closed:
            connection.revoke()
        if closed:
            log.info(
                "host.tcp.connections_revoked",
                connections=[c.name for c in closed],
                reason="the TCP token changed",
            )
        return len(closed)

    def _reload_tcp_token(self, cfg: Config) -> dict[str, Any] | None:
        """At a reload, the TCP token read again (whatever the file's stat says) with the
        new config's ``[tcp]`` token keys: for the reply, whether it changed, how many
        connections opened with the old one were closed, or why there is none now.
        ``None`` without a TCP listener."""
        if self._tcp_token is None:
            return None
        before = self._tcp_in_force
        token = self._tcp_token.reload(cfg.tcp)
        if token is None:
            return {"state": "unusable", "error": self._tcp_token.failure, "closed": 0}
        closed = self._revoke_other_tokens(token)
        return {"state": "unchanged" if token == before else "changed", "closed": closed}

    async def _reload_on_hangup(self) -> None:
        """SIGHUP: a reload whose outcome only the log tells (an invalid file is logged
        ``host.reload.failed`` at error by ``_reload``, and the daemon serves on)."""
        try:
            await self.reload("SIGHUP")
        except ConfigError:
            pass  # logged by _reload
        except ShuttingDown:
            log.info("host.reload.skipped", trigger="SIGHUP", reason="shutting down")
        except Exception as exc:  # a signal must never end the daemon: said, and served on
            log.error("host.reload.failed", trigger="SIGHUP", error=repr(exc), exc_info=exc)
        flush_logs()

    # -- in-flight accounting and stop ---------------------------------------------------

    def admit_authenticated(self) -> bool:
        return self._admission.admit(tcp=False)

    def begin_request(self) -> None:
        self._inflight += 1

    def end_request(self) -> None:
        self._inflight -= 1
        if self._inflight == 0 and self._idle is not None:
            self._idle.set()

    async def _wait_idle(self) -> None:
        """Until no request is in flight (at once when none is)."""
        if self._inflight:
            if self._idle is None or self._idle.is_set():
                self._idle = anyio.Event()
            await self._idle.wait()

    def request_stop(self, reason: str) -> None:
        if self._stop_reason is None:
            self._stop_reason = reason
        self._stop.set()

    # -- in-process use (the CLI's one-shot commands) ------------------------------------

    @contextlib.asynccontextmanager
    async def local(
        self,
        *,
        behind: bool = False,
        hangup: bool = False,
        boot_only: Iterable[str] | None = None,
        rerank_boot: bool = True,
    ) -> AsyncIterator[LocalSession]:
        """Start the host without listeners; yield a session that dispatches in-process.
        ``behind`` (``hostd mcp``): a ``boot`` config's providers start as the block
        begins, not before it, as a serving daemon's do (``run``), so the session answers
        at once and a request made meanwhile joins their start. ``hangup`` (``hostd
        mcp``, which its client keeps for hours): SIGHUP reloads the config file while
        the block runs, as it does ``hostd serve``'s (``_watch_hangup``, the same reload
        and log); installed before the block begins. ``boot_only`` (a one-shot
        request's providers): a ``boot`` config starts only these, the others when a
        request asks for them; ``rerank_boot`` false (a one-shot composition not ranked
        by the reranker): nor the reranker."""
        boot = self._boots_behind() if behind else False
        try:
            # ``hostd mcp`` runs as long as its client's session: a provider down is started
            # again on its own, as a daemon's is; a one-shot command's is not.
            async with self._engine(
                "lazy" if boot else None,
                restart_idle=behind,
                boot_only=boot_only,
                rerank_boot=rerank_boot,
            ):
                # The block's own exception is not fed to the task group (it would come
                # back wrapped in an ExceptionGroup): the stack is closed with none.
                starts = contextlib.AsyncExitStack()
                if boot or hangup:
                    tg = await starts.enter_async_context(anyio.create_task_group())
                    # A start's wait and the signal watcher, not the start itself.
                    starts.callback(tg.cancel_scope.cancel)
                    if hangup:
                        await tg.start(self._watch_hangup)
                    if boot:
                        self._start_behind(tg)
                try:
                    yield LocalSession(self)
                finally:
                    await starts.aclose()
        finally:
            await self._close_shadow()

    def _boots_behind(self) -> bool:
        """Whether the providers start behind serving: ``boot`` configs, opened lazily and
        started once serving begins (a test's own host is left as it starts)."""
        return self.config.host.start_providers == "boot" and self._host_factory is None

    def _start_behind(self, tg: anyio.abc.TaskGroup) -> None:
        """Start every provider, and the reranker, in ``tg``: a request that arrives
        meanwhile joins the start, so one with a timeout_ms is answered within it (its leg
        ``warming``) instead of waiting for every handshake."""
        tg.start_soon(self.host.start_all)
        if self.reranker is not None:  # a slow model load never holds serving back
            tg.start_soon(self.reranker.start_all)

    # -- lifecycle ------------------------------------------------------------------------

    @contextlib.asynccontextmanager
    async def _engine(
        self,
        start: str | None = None,
        *,
        restart_idle: bool = False,
        boot_only: Iterable[str] | None = None,
        rerank_boot: bool = True,
    ) -> AsyncIterator[Any]:
        """The engine ``Host`` and, when configured, the reranker beside it (stopped
        first), with the request pipeline over them; ``restart_idle``: a provider down
        starts again with no request asking; ``boot_only``: the providers a boot starts;
        ``rerank_boot`` false: the reranker is not started with them (``open_engine``)."""
        opened = open_engine(
            self.config,
            self._host_factory,
            start,
            restart_idle=restart_idle,
            boot_only=boot_only,
            rerank_boot=rerank_boot,
        )
        async with opened as (host, reranker):
            self.host, self.reranker = host, reranker
            self.pipeline = Pipeline(
                self.config, host, reranker=reranker, recorder=self.shadow, counters=self.counters
            )
            try:
                yield host
            finally:
                self.reranker = None

    async def run(
        self,
        *,
        stdio: bool = False,
        unix: bool = True,
        tcp: bool | None = None,
        handle_signals: bool = True,
        ready: Callable[[Daemon], None] | None = None,
        stopping: Callable[[], None] | None = None,
    ) -> None:
        """Serve until stopped; return after a graceful stop (the caller exits 0).
        ``ready`` is called once the listeners accept, ``stopping`` once a stop begins."""
        self._on_stopping = stopping
        cfg = self.config
        wire_fd = reserve_stdout() if stdio else None
        tcp = cfg.tcp.enabled if tcp is None else tcp
        listeners: list[tuple[str, SocketListener]] = []
        token = cfg.tcp_token() if tcp else None
        lock: int | None = None
        if tcp and not token:
            raise ConfigError(
                f"{cfg.source}: tcp: a bearer token (tcp.token or tcp.token_file) is required",
                key="tcp.token",
            )
        for key, path, mode in await anyio.to_thread.run_sync(open_secret_files, cfg):
            # Said, not refused: the file may be shared on purpose (a group's service).
            log.warning("config.secret_file_open", **secret_file_open(key, path, mode))
        try:
            # Listeners first: a refused socket must not start a single provider.
            if unix:
                self.socket_path = cfg.socket_path
                # One socket daemon per config file: a second (another socket: another
                # XDG_RUNTIME_DIR, a --socket) would share its state and memories.
                record = {"pid": os.getpid(), "socket": str(self.socket_path)}
                # Every state file the daemon writes from its start, checked before any
                # is opened: one it cannot write is a config problem (exit 2), said so.
                writes = CONSENT_FILES + (SHADOW_FILES if self.shadow is not None else ())
                await anyio.to_thread.run_sync(
                    partial(private_state_dir, cfg.state_path, cfg.source, writes=writes)
                )
                lock, previous = await anyio.to_thread.run_sync(
                    claim_config,
                    cfg.state_path,
                    default_socket_path(cfg.file).name,
                    record,
                    cfg.source,
                    default_state_dir(),  # where the config's commands look after an edit
                )
                listener, stale = await open_unix_listener(self.socket_path)
                if previous or stale:  # the last daemon was killed, or its machine stopped
                    self._unclean = {
                        "pid": previous.get("pid"),
                        "socket": str(self.socket_path) if stale else None,
                    }
                st = self.socket_path.lstat()
                self._socket_identity = (st.st_dev, st.st_ino)
                listeners.append(("unix", listener))
            if tcp:
                self._tcp_token = TcpToken(cfg.tcp)
                self._tcp_in_force = self._tcp_token.current()
                multi = await open_tcp_listener(cfg.tcp.host, cfg.tcp.port)
                for sub in multi.listeners:
                    address = sub.extra(anyio.abc.SocketAttribute.local_address)
                    if isinstance(address, tuple):
                        self.tcp_address = (str(address[0]), int(address[1]))
                    listeners.append(("tcp", cast(SocketListener, sub)))
            # "boot" starts every provider as serving begins, not before (``_start_behind``).
            boot = self._boots_behind()
            async with self._engine("lazy" if boot else None, restart_idle=True):
                await self._serve(listeners, wire_fd, handle_signals, ready, boot)
                # A connect while the providers stop is refused at once, never left waiting.
                for _, opened in listeners:
                    await opened.aclose()
                log.info("host.stopping.providers")
                flush_logs()  # the periodic flusher has stopped; this phase can take a while
        finally:
            await self._close_shadow()
            for _, opened in listeners:
                await opened.aclose()
            if self.socket_path is not None and self._socket_identity is not None:
                remove_socket(self.socket_path, self._socket_identity[1])
            if lock is not None:
                release_config(lock)
        self.repeats.summarise(final=True)  # every count still unreported, before the end
        counters = dict(sorted(self.counters.items()))
        log.info("host.stopped", reason=self._stop_reason, counters=counters)
        flush_logs()

    async def _serve(
        self,
        listeners: list[tuple[str, SocketListener]],
        wire_fd: int | None,
        handle_signals: bool,
        ready: Callable[[Daemon], None] | None,
        boot: bool = False,
    ) -> None:
        async with anyio.create_task_group() as conns:
            async with anyio.create_task_group() as accepting:
                if handle_signals:
                    # Installed before "host.serving" is announced, and kept through the
                    # grace period (a second signal there stops waiting at once).
                    await conns.start(self._watch_signals)
                    await conns.start(self._watch_hangup)
                for kind, listener in listeners:
                    accepting.start_soon(
                        self._accept,
                        listener,
                        conns,
                        self._tcp_token_now if kind == "tcp" else None,
                    )
                if wire_fd is not None:
                    conns.start_soon(self._serve_stdio, wire_fd)
                if self._socket_identity is not None and self.config.host.socket_check_s:
                    conns.start_soon(self._watch_socket, listeners, accepting, conns, wire_fd)
                if boot:
                    self._start_behind(conns)
                log.info(
                    "host.serving",
                    config=self.config.source,  # which file (discovery), in the first line
                    version=self.version,  # which build: the old one or the upgrade
                    pid=os.getpid(),
                    socket=str(self.socket_path) if self.socket_path else None,
                    tcp=list(self.tcp_address) if self.tcp_address else None,
                    stdio=wire_fd is not None,
                    providers=sorted(p.id for p in self.config.provider),
                )
                if self._unclean is not None:  # after host.serving: that stays the first line
                    log.warning("host.unclean_stop", **self._unclean)
                flush_logs()
                conns.start_soon(self._flush_logs_periodically)
                if ready is not None:
                    ready(self)
                await self._stop.wait()
                # Still accepting through the grace period: a connection opened now is
                # served, and each of its requests answered shutting_down at once
                # (dispatch reads ``stopping``), never left waiting to be reset.
                await self._drain()
                accepting.cancel_scope.cancel()
            conns.cancel_scope.cancel()

    async def _drain(self) -> None:
        """The grace period: in-flight requests finish, or are answered shutting_down."""
        self.stopping = True
        grace = self.config.host.grace_period_s
        log.info("host.stopping", reason=self._stop_reason, in_flight=self._inflight)
        if self._on_stopping is not None:
            self._on_stopping()
        with anyio.move_on_after(grace) as waited:
            self._drain_scope = waited
            await self._wait_idle()
        if waited.cancelled_caught:
            log.warning("host.grace_expired", in_flight=self._inflight, grace_s=grace)
            # Each request still in flight is answered shutting_down, not cut off.
            with anyio.move_on_after(_ABORT_REPLY_S):
                for connection in list(self._connections):
                    connection.abort_in_flight()
                await self._wait_idle()

    async def _flush_logs_periodically(self) -> None:
        # Events outside requests (provider stderr, lifecycle) reach the log within 0.2 s.
        while True:
            await anyio.sleep(0.2)
            self.repeats.summarise()
            flush_logs()

    async def _watch_socket(
        self,
        listeners: list[tuple[str, SocketListener]],
        accepting: anyio.abc.TaskGroup,
        conns: anyio.abc.TaskGroup,
        wire_fd: int | None,
    ) -> None:
        """Keep our socket file ours. One deleted (a clean-up of /tmp, a stray ``rm``)
        is bound again, so clients, ``hostd status`` and ``hostd stop`` still find this
        daemon; one replaced (another daemon bound the path after it went) means that
        one serves this config now: this one steps aside, unless stdio or TCP still
        reach it, which it keeps serving."""
        assert self.socket_path is not None and self._socket_identity is not None
        path = self.socket_path
        while True:
            await anyio.sleep(self.config.host.socket_check_s)
            why = await anyio.to_thread.run_sync(socket_owner_lost, path, self._socket_identity)
            if why is None:
                continue
            if why == "removed":
                try:
                    listener, _ = await open_unix_listener(path)
                except ListenerError as exc:  # e.g. another daemon bound it meanwhile
                    error: str | None = str(exc)
                else:
                    st = await anyio.to_thread.run_sync(path.lstat)
                    self._socket_identity = (st.st_dev, st.st_ino)
                    index = next(i for i, (kind, _) in enumerate(listeners) if kind == "unix")
                    old = listeners[index][1]
                    listeners[index] = ("unix", listener)
                    await old.aclose()  # its path is gone: no client can reach it
                    accepting.start_soon(self._accept, listener, conns, None)
                    log.warning("host.socket_restored", socket=str(path))
                    continue
            else:
                error = None
            only_way_in = wire_fd is None and len(listeners) == 1
            log.warning(
                "host.socket_lost",
                socket=str(path),
                why=why,
                error=error,
                action="stopping" if only_way_in else "serving",
            )
            self._socket_identity = None  # not ours: never removed at the end
            if only_way_in:
                self.request_stop(f"socket {why}")
            return

    async def _watch_signals(
        self, *, task_status: anyio.abc.TaskStatus[None] = anyio.TASK_STATUS_IGNORED
    ) -> None:
        with anyio.open_signal_receiver(signal.SIGTERM, signal.SIGINT) as signals:
            task_status.started()
            async for signum in signals:
                name = signal.Signals(signum).name
                if self._stop_reason is None:
                    log.info("host.signal", signal=name)
                    self.request_stop(name)
                else:
                    log.warning("host.signal.forced", signal=name)
                    if self._drain_scope is not None:
                        self._drain_scope.cancel()

    async def _watch_hangup(
        self, *, task_status: anyio.abc.TaskStatus[None] = anyio.TASK_STATUS_IGNORED
    ) -> None:
        """SIGHUP reloads the config file, as ``hostd reload`` does; signals that arrive
        during a reload are one more reload after it."""
        with anyio.open_signal_receiver(signal.SIGHUP) as signals:
            task_status.started()
            async for _ in signals:
                log.info("host.signal", signal="SIGHUP")
                await self._reload_on_hangup()

    async def _accept(
        self,
        listener: SocketListener,
        conns: anyio.abc.TaskGroup,
        token: Callable[[], str | None] | None,
    ) -> None:
        while True:
            try:
                stream = await listener.accept()
            except (anyio.ClosedResourceError, anyio.BrokenResourceError):
                return
            except OSError as exc:  # e.g. EMFILE: keep serving the clients we have
                log.error("host.accept_failed", error=exc.strerror)
                await anyio.sleep(0.05)
                continue
            if not self._admission.admit(tcp=token is not None):
                await stream.aclose()
                continue
            name = f"{'tcp' if token else 'unix'}#{self.counters['connections_total'] + 1}"

            async def receive(stream: SocketStream = stream) -> bytes:
                try:
                    return await stream.receive(1 << 16)
                except (anyio.EndOfStream, anyio.BrokenResourceError, anyio.ClosedResourceError):
                    return b""

            # Constructed here, not in the task: it is counted before the next accept.
            # A Unix socket is read by plain socket calls, waiting only when it is empty.
            connection = self._connection(
                socket_receive(stream) or receive,
                stream.send,
                name=name,
                token=token,
                send_nowait=socket_send_nowait(stream),
                peer=_peer(stream) if token is not None else None,
                credentials=None if token is not None else _unix_credentials(stream),
            )
            if token is not None:
                self._admission.opened(connection)
            conns.start_soon(self._serve_stream, stream, connection)

    async def _serve_stream(self, stream: SocketStream, connection: Connection) -> None:
        async with stream:
            await self._tracked(connection)

    async def _tracked(self, connection: Connection) -> None:
        self._connections.add(connection)
        try:
            await connection.serve()
        finally:
            self._connections.discard(connection)
            self._admission.closed(connection)

    def _connection(
        self,
        receive: Callable[[], Any],
        send: Callable[[bytes], Any],
        *,
        name: str,
        token: Callable[[], str | None] | None = None,
        drain_on_eof: bool = False,
        send_nowait: SendNowait | None = None,
        peer: str | None = None,
        credentials: tuple[int, int] | None = None,
    ) -> Connection:
        cfg = self.config.host
        limits = Limits(
            cfg.max_line_bytes,
            cfg.max_in_flight,
            cfg.max_batch,
            auth_timeout_s=cfg.auth_timeout_s,
        )
        return Connection(
            self,
            receive,
            send,
            partial(dispatch_one, self),
            limits,
            name=name,
            token=token,
            drain_on_eof=drain_on_eof,
            send_nowait=send_nowait,
            answer=partial(answer_one, self),
            peer=peer,
            credentials=credentials,
        )

    async def _serve_stdio(self, wire_fd: int) -> None:
        stdio = await open_stdio(0, wire_fd)
        try:
            await self._tracked(
                self._connection(stdio.receive, stdio.send, name="stdio", drain_on_eof=True)
            )
        finally:
            stdio.close()
        # The client closed stdin: nobody can send more; stop gracefully.
        self.request_stop("stdin closed")


def _peer(stream: SocketStream) -> str | None:
    """A TCP client's ``address:port`` (``[address]:port`` for IPv6), as the log says it."""
    try:
        address = stream.extra(anyio.abc.SocketAttribute.remote_address)
    except anyio.TypedAttributeLookupError:
        return None
    if not isinstance(address, tuple):
        return None
    host, port = str(address[0]), int(address[1])
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


#: The kernel's record of a Unix socket's peer (Linux's ``SO_PEERCRED``: pid, uid, gid);
#: ``None`` where the system has none, and there no peer has an identity in the log.
_PEERCRED = getattr(socket, "SO_PEERCRED", None)
_UCRED = struct.Struct("3i")


def _unix_credentials(stream: SocketStream) -> tuple[int, int] | None:
    """A Unix socket client's ``(uid, pid)`` as the kernel recorded them when it
    connected (it cannot lie about them), or ``None`` where the system does not say."""
    if _PEERCRED is None:
        return None
    try:
        sock = stream.extra(anyio.abc.SocketAttribute.raw_socket)
        raw = sock.getsockopt(socket.SOL_SOCKET, _PEERCRED, _UCRED.size)
    except (anyio.TypedAttributeLookupError, OSError):
        return None
    pid, uid, _ = _UCRED.unpack(raw)
    return (uid, pid) if pid > 0 else None


def _key(exc: ConfigError) -> dict[str, Any]:
    """The key a config error names, for its log line (none when it names none)."""
    key = exc.data.get("key")
    return {"key": key} if key else {}
