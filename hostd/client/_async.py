"""The async client: one JSON-RPC connection to a daemon, over a socket or a child's pipes.

Owns the agent side of the client API (protocol.md §4): one JSON value per
line, replies matched by ``id`` (``hostd.rpc``'s correlation table and line
encoder, the ones the provider transport uses), ``$/progress`` routed to the
caller that asked for it, and a cancelled call turned into a ``$/cancel``
notification. It never loads the host side: a spawned daemon is stopped by the
one teardown ladder (``hostd._teardown``). ``AsyncClient`` is opened with
``connect``, ``connect_tcp`` or ``spawn``; ``compose`` returns a typed
``ComposeResult`` (``_results``).
"""

from __future__ import annotations

import contextlib
import errno
import functools
import itertools
import math
import os
import re
import socket
import subprocess
import sys
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any, Literal, ParamSpec, TypedDict

import anyio
from anyio.abc import (
    ByteReceiveStream,
    ByteSendStream,
    Process,
    SocketAttribute,
    SocketStream,
)
from typing_extensions import Unpack

from hostd._teardown import stop_process
from hostd.config import discover_socket, logs_to_stderr
from hostd.errors import (
    ConnectionLost,
    DaemonNotPermitted,
    NoDaemon,
    ParseError,
    ProtocolFault,
    RpcError,
)
from hostd.protocol import LineSplitter
from hostd.rpc import PendingTable, decode, encode, encode_line, make_notification, make_request

from ._results import (
    Citation,
    ComposeResult,
    Evidence,
    Forgotten,
    FrameRef,
    Reloaded,
    Remembered,
    parse_reply,
)

__all__ = [
    "AsyncClient",
    "ComposeOptions",
    "Floor",
    "ProgressCallback",
    "Used",
    "connect",
    "connect_tcp",
    "serve_command",
    "spawn",
]

_MAX_LINE = 64 * 1024 * 1024


ProgressCallback = Callable[[dict[str, Any]], Any]
#: What ``feedback`` accepts as ``used``: a citation label, a FrameId (as a dict or a
#: ``FrameRef``), or a ``Citation`` / ``Evidence`` of the result (its label).
Used = str | Mapping[str, Any] | FrameRef | Citation | Evidence


class Floor(TypedDict, total=False):
    """A floor: text the prompt always carries (``label`` and ``content`` required)."""

    label: str
    content: str
    position: Literal["top", "bottom"]


class ComposeOptions(TypedDict, total=False):
    """``context/compose``'s members besides ``goal`` and ``budget`` (docs/api.md):
    keyword arguments of ``compose``, sent as given (``None`` is left out)."""

    providers: list[str] | None
    kinds: list[str] | None
    anchors: list[str] | None
    query_text: str | None
    as_of: str | None
    max_frames: int | None
    strategy: str | dict[str, Any] | None
    placement: str | None
    overfetch: float | None
    floors: list[Floor] | None
    caps: dict[str, float] | None
    #: The daemon's deadline for the providers' legs, in ms (the request's own).
    timeout_ms: int | None
    #: How long the daemon waits for providers that are not ready, in ms (apart from
    #: ``timeout_ms``; 0: the ready ones alone).
    ready_wait_ms: int | None
    session: str | None
    record: bool | None


def _used_item(item: Used) -> str | dict[str, Any]:
    if isinstance(item, Citation | Evidence):
        return item.label
    if isinstance(item, FrameRef):
        return item.to_wire()
    if isinstance(item, Mapping):
        return dict(item)
    return item


class AsyncClient:
    """A JSON-RPC client over one byte stream. Use ``connect``/``spawn`` to make one."""

    def __init__(self, receive: ByteReceiveStream, send: ByteSendStream) -> None:
        self._receive = receive
        self._send = send
        self._send_lock = anyio.Lock()
        self._ids = itertools.count(1)
        self._calls = PendingTable()
        self._progress: dict[str, ProgressCallback] = {}
        self.notifications: list[dict[str, Any]] = []
        self.process: Process | None = None
        """The daemon's child process when ``spawn`` started it (for its pid), else None."""
        #: Why the connection ended, asked once its stream has (``spawn``: the exit):
        #: words for the message and members for ``ConnectionLost.data``.
        self._why_ended: Callable[[], Awaitable[tuple[str, dict[str, Any]] | None]] | None = None

    @property
    def closed(self) -> bool:
        """True once the connection has ended: no call on it can be answered any more."""
        return self._calls.failure is not None

    # -- plumbing -------------------------------------------------------------------------

    async def _read_loop(self) -> None:
        splitter = LineSplitter(_MAX_LINE)
        ended, data = "hostd closed the connection", {}
        try:
            while True:
                try:
                    chunk = await self._receive.receive(1 << 16)
                except (anyio.EndOfStream, anyio.BrokenResourceError, anyio.ClosedResourceError):
                    # Only here, at the stream's end (never when the client is closed):
                    # a spawned daemon that exited says how, and why when it said so.
                    why = await self._why_ended() if self._why_ended is not None else None
                    if why is not None:
                        ended, data = f"{ended}: {why[0]}", why[1]
                    break
                for line in splitter.feed(chunk):
                    if not isinstance(line, bytes):  # OVERLONG
                        raise ProtocolFault("reply line over the client's limit")
                    if not line.strip():
                        continue
                    try:
                        msg = decode(line)
                    except ParseError:
                        continue  # not ours to crash on; the call times out or fails
                    self._route(msg)
        finally:
            self._calls.fail_all(ConnectionLost(ended, **data))

    def _route(self, msg: Any) -> None:
        if isinstance(msg, list):
            for item in msg:
                self._route(item)
            return
        if not isinstance(msg, dict):
            return
        if "method" in msg and "id" not in msg:
            params = msg.get("params") or {}
            callback = self._progress.get(_token_key(params.get("progress_token")))
            if msg["method"] == "$/progress" and callback is not None:
                callback(params)
            else:
                self.notifications.append(msg)
            return
        key = msg.get("id")
        # Our ids are integers: ``true`` or ``1.0`` would hash like ``1``.
        slot = self._calls.pop(key, None) if type(key) is int else None
        if slot is not None:
            slot.resolve(msg)

    async def _write(self, obj: Any) -> None:
        data = encode_line(obj)
        async with self._send_lock:
            await self._send.send(data)

    # -- calls ----------------------------------------------------------------------------

    async def call(
        self,
        method: str,
        params: dict[str, Any] | None = None,
        *,
        on_progress: ProgressCallback | None = None,
    ) -> Any:
        """Call ``method``; return its result or raise ``RpcError``.

        Cancelling the caller (``anyio.fail_after`` around it, say) sends ``$/cancel``
        so the daemon drops the work too.
        """
        id_ = next(self._ids)
        slot = self._calls.add(id_)  # raises ConnectionLost once the reader has ended
        params = dict(params or {})
        if on_progress is not None:
            params["progress_token"] = f"p{id_}"
            self._progress[f"p{id_}"] = on_progress
        try:
            await self._write(make_request(method, params, id_))
            try:
                reply = await slot.wait()
            except anyio.get_cancelled_exc_class():
                with anyio.CancelScope(shield=True), contextlib.suppress(Exception):
                    await self.notify("$/cancel", {"id": id_})
                raise
        finally:
            self._calls.pop(id_, None)
            self._progress.pop(f"p{id_}", None)
        if "error" in reply:
            err = reply["error"] or {}
            raise RpcError(err.get("code", 0), err.get("message", ""), err.get("data"))
        return reply.get("result")

    async def notify(self, method: str, params: dict[str, Any] | None = None) -> None:
        await self._write(make_notification(method, params or {}))

    async def send_raw(self, line: bytes) -> None:
        """Send bytes as they are (tests of malformed input)."""
        async with self._send_lock:
            await self._send.send(line)

    # -- the API --------------------------------------------------------------------------

    async def compose(
        self,
        goal: str,
        *,
        budget: int | None = None,
        include_content: bool = True,
        on_progress: ProgressCallback | None = None,
        **options: Unpack[ComposeOptions],
    ) -> ComposeResult:
        """``context/compose``: the ComposedPrompt as a ``ComposeResult`` (``prompt``,
        ``citations``, ``evidence``, ``audit``…), validated once here.

        ``include_content`` (default on) asks for ``evidence``, each included frame's
        own content; off, the request is the plain wire one and ``evidence`` is empty.
        ``options`` are the request's other members (``providers``, ``floors``, …;
        ``timeout_ms`` is the daemon's deadline for the providers' legs).
        """
        body = _body(goal, budget, dict(options))
        if include_content:
            body["include_content"] = True
        raw = await self.call("context/compose", body, on_progress=on_progress)
        return parse_reply(ComposeResult, raw, "context/compose")

    async def query(self, goal: str, *, budget: int | None = None, **options: Any) -> Any:
        """``context/query``: the providers' frames, unranked (the wire's dict)."""
        return await self.call("context/query", _body(goal, budget, options))

    async def providers(self) -> list[dict[str, Any]]:
        result = await self.call("providers/list")
        return list(result["providers"])

    async def consent_grant(self, provider: str, scope: str, grantor: str = "client") -> Any:
        return await self.call(
            "consent/grant", {"provider": provider, "scope": scope, "grantor": grantor}
        )

    async def consent_revoke(self, provider: str, scope: str, grantor: str = "client") -> Any:
        return await self.call(
            "consent/revoke", {"provider": provider, "scope": scope, "grantor": grantor}
        )

    async def consent_list(self, provider: str | None = None) -> list[dict[str, Any]]:
        result = await self.call("consent/list", {"provider": provider} if provider else {})
        return list(result["receipts"])

    async def usage(self, request_id: str) -> Any:
        return await self.call("usage/report", {"request_id": request_id})

    async def feedback(
        self,
        result: ComposeResult | Mapping[str, Any] | str,
        used: Sequence[Used],
        *,
        helpful: bool | None = None,
        note: str | None = None,
    ) -> dict[str, Any]:
        """``usage/feedback``: which of ``result``'s citations the answer used (labels,
        FrameIds, or the result's own ``Citation``/``Evidence`` items); ``result`` is a
        ``compose`` result (typed or its wire dict) or its ``request_id``."""
        if isinstance(result, ComposeResult):
            rid = result.request_id
        else:
            rid = result if isinstance(result, str) else result["request_id"]
        body: dict[str, Any] = {"request_id": rid, "used": [_used_item(u) for u in used]}
        if helpful is not None:
            body["helpful"] = helpful
        if note is not None:
            body["note"] = note
        reply: dict[str, Any] = await self.call("usage/feedback", body)
        return reply

    async def remember(
        self,
        content: str,
        *,
        title: str,
        kind: str = "fact",
        valid_from: str | None = None,
        valid_to: str | None = None,
        supersedes: str | None = None,
        provider: str | None = None,
        timeout_ms: int | None = None,
    ) -> Remembered:
        """``memory/remember``: store one entry with the provider that stores memories
        (``provider``, else the one configured that declares it); answered once it is
        committed. ``supersedes``: the id of an entry whose window closes at this one's
        ``valid_from`` (``mem-3``, a frame id a composition cited). Times are UTC,
        ``YYYY-MM-DDTHH:MM:SSZ``; a refusal is ``RpcError`` (``write_refused``,
        ``not_supported``)."""
        body = {
            "kind": kind,
            "title": title,
            "content": content,
            "valid_from": valid_from,
            "valid_to": valid_to,
            "supersedes": supersedes,
            "provider": provider,
            "timeout_ms": timeout_ms,
        }
        raw = await self.call("memory/remember", {k: v for k, v in body.items() if v is not None})
        return parse_reply(Remembered, raw, "memory/remember")

    async def forget(
        self,
        id: str,  # noqa: A002 - the wire name
        *,
        provider: str | None = None,
        timeout_ms: int | None = None,
    ) -> Forgotten:
        """``memory/forget``: delete the entry ``id`` (``mem-3``), once committed."""
        body = {"id": id, "provider": provider, "timeout_ms": timeout_ms}
        raw = await self.call("memory/forget", {k: v for k, v in body.items() if v is not None})
        return parse_reply(Forgotten, raw, "memory/forget")

    async def status(self) -> dict[str, Any]:
        result: dict[str, Any] = await self.call("host/status")
        return result

    async def reload(self) -> Reloaded:
        """``host/reload``: the daemon reads its config file again and applies it; the
        result once the new config is in force (docs/api.md). An invalid file changes
        nothing and raises ``RpcError`` (``remote_reason`` ``bad_config``, its message
        naming the file, the key and the problem)."""
        raw = await self.call("host/reload")
        return parse_reply(Reloaded, raw, "host/reload")

    async def shutdown(self) -> Any:
        return await self.call("host/shutdown")


def _body(goal: str, budget: int | None, options: dict[str, Any]) -> dict[str, Any]:
    body = {"goal": goal, **{k: v for k, v in options.items() if v is not None}}
    if budget is not None:
        body["budget"] = budget
    return body


def _token_key(token: Any) -> str:
    return token if isinstance(token, str) else encode(token).decode()


@contextlib.asynccontextmanager
async def _running(
    client: AsyncClient, sock: socket.socket | None = None
) -> AsyncIterator[AsyncClient]:
    """Run ``client``'s reader for the block. Over a socket ``sock``, the reader is
    stopped by shutting the socket down, so its read ends with end-of-stream, through
    the loop's own reader callback: cancelling (or closing under) a pending read on
    asyncio's raw UNIX streams can meet a ready socket in the same loop pass, and then
    anyio's reader callback raises ``InvalidStateError`` into the loop."""
    failure: Exception | None = None
    async with anyio.create_task_group() as tg:
        tg.start_soon(client._read_loop)
        try:
            yield client
        except Exception as exc:  # re-raised below, not wrapped in an ExceptionGroup
            failure = exc
        finally:
            if sock is None:
                tg.cancel_scope.cancel()
            else:
                with contextlib.suppress(OSError):  # already gone: the read has ended
                    sock.shutdown(socket.SHUT_RDWR)
    if failure is not None:
        raise failure


def _raw(stream: SocketStream) -> socket.socket:
    sock: socket.socket = stream.extra(SocketAttribute.raw_socket)
    return sock


def _no_daemon(exc: OSError, where: str, start: str) -> NoDaemon:
    """Nothing listens at ``where``: the OS's reason (its ``errno`` and ``strerror``
    kept, as an ``OSError`` carries them) and the command that starts a daemon; or,
    refused by permission, ``DaemonNotPermitted`` saying whose the socket is."""
    error: NoDaemon
    if exc.errno in (errno.EACCES, errno.EPERM) and where.startswith("/"):
        error = DaemonNotPermitted(not_permitted(Path(where), exc))
    else:
        error = NoDaemon(f"no daemon at {where} ({exc.strerror or exc}); start one with `{start}`")
    error.errno, error.strerror = exc.errno, exc.strerror
    return error


#: Where docs/config.md says how users share one daemon.
SHARING_DOCS = 'docs/config.md, "Sharing a daemon with other users"'


def not_permitted(path: Path, exc: OSError) -> str:
    """Why this user may not connect to the socket ``path``: whose it is (the owner of
    the socket, or of the nearest folder above it this user can see), that a daemon's
    socket is private to its user, and how one is shared."""
    me = os.getuid()
    owner = None
    for where in (path, *path.parents):
        try:
            owner = where.stat().st_uid
            break
        except OSError:
            continue
    why = exc.strerror or str(exc)
    if owner is None or owner == me:  # ours, yet refused: its mode (a chmod), not its owner
        return (
            f"this user (uid {me}) may not connect to the socket {path} ({why}): "
            "check its mode and its folder's (a daemon makes them 0600 and 0700)"
        )
    return (
        f"the socket {path} is another user's ({_user(owner)}): this user (uid {me}) may "
        f"not connect to it ({why}). A daemon's socket is private to the user who "
        "started it; to share one, serve it on loopback TCP with a token "
        f"({SHARING_DOCS}), or run a daemon of your own"
    )


def _user(uid: int) -> str:
    """``uid 0, root``: a uid and, where the system knows it, its name."""
    import pwd

    try:
        return f"uid {uid}, {pwd.getpwuid(uid).pw_name}"
    except KeyError:
        return f"uid {uid}"


#: How often a ``wait`` looks again for a daemon that is starting.
_RETRY_S = 0.05

_P = ParamSpec("_P")


class _Opening(contextlib.AbstractAsyncContextManager[AsyncClient]):
    """What ``connect``, ``connect_tcp`` and ``spawn`` return: a client for an
    ``async with`` block. Awaited, it says how it is used, where
    ``contextlib.asynccontextmanager``'s object says only that it cannot be awaited."""

    __slots__ = ("_name", "_opened")

    def __init__(self, opened: contextlib.AbstractAsyncContextManager[AsyncClient], name: str):
        self._opened = opened
        self._name = name

    async def __aenter__(self) -> AsyncClient:
        return await self._opened.__aenter__()

    async def __aexit__(self, *exc_info: Any) -> bool | None:
        return await self._opened.__aexit__(*exc_info)

    if not TYPE_CHECKING:  # a type checker still flags ``await connect()`` itself

        def __await__(self):
            raise TypeError(
                f"hostd.client.{self._name}() opens a client for an `async with` block, it "
                f"is not awaited: `async with {self._name}(...) as client: "
                'await client.compose(...)` (docs/api.md, "Keeping a client")'
            )


def _async_with(
    fn: Callable[_P, AsyncIterator[AsyncClient]],
) -> Callable[_P, contextlib.AbstractAsyncContextManager[AsyncClient]]:
    """``contextlib.asynccontextmanager``, its object saying how it is used when awaited."""
    opened = contextlib.asynccontextmanager(fn)

    @functools.wraps(fn)
    def opening(
        *args: _P.args, **kwargs: _P.kwargs
    ) -> contextlib.AbstractAsyncContextManager[AsyncClient]:
        return _Opening(opened(*args, **kwargs), fn.__name__)

    return opening


@_async_with
async def connect(
    path: str | os.PathLike[str] | None = None,
    *,
    config: str | os.PathLike[str] | None = None,
    wait: float = 0.0,
    on_wait: Callable[[Path, float], None] | None = None,
) -> AsyncIterator[AsyncClient]:
    """Connect to a daemon's Unix socket: ``path``, else the socket of the config the CLI
    would use here (``config``, else ``$HOSTD_CONFIG``, the nearest ``hostd.toml``, …):
    its ``host.socket`` or its own default (``hostd.config.discover_socket``), so a
    script in a project reaches that project's daemon. While nothing listens there yet
    (no socket, or refused: a daemon starting, or restarting), it tries again for up to
    ``wait`` seconds before ``NoDaemon``; ``on_wait(socket, wait)`` is called once, when
    that wait begins, so a caller can say why it is not back at once."""
    wait = _seconds(wait, "wait", zero=True)
    sock = (
        Path(path) if path is not None else await anyio.to_thread.run_sync(discover_socket, config)
    )
    deadline = anyio.current_time() + wait
    # The command that starts this config's daemon, as the caller named the config.
    start = "hostd serve" if config is None else f"hostd --config {os.fspath(config)} serve"
    waiting = False
    while True:
        try:
            stream = await anyio.connect_unix(sock)
            break
        except OSError as exc:
            error = _no_daemon(exc, str(sock), start)
            if not error.may_be_starting or anyio.current_time() >= deadline:
                raise error from exc
        if not waiting and on_wait is not None:
            on_wait(sock, wait)
        waiting = True
        await anyio.sleep(_RETRY_S)
    async with stream, _running(AsyncClient(stream, stream), _raw(stream)) as client:
        yield client


def _seconds(value: object, name: str, *, zero: bool = False) -> float:
    """``value`` as a number of seconds (``> 0``, or ``>= 0`` with ``zero``), else a
    ``TypeError``/``ValueError`` naming ``name``."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise TypeError(f"{name} must be a number of seconds, not {type(value).__name__}")
    if not math.isfinite(value) or value < 0 or (value == 0 and not zero):
        bound = ">= 0" if zero else "> 0"
        raise ValueError(f"{name} must be a finite number of seconds {bound}, got {value!r}")
    return float(value)


@_async_with
async def connect_tcp(
    host: str,
    port: int,
    token: str,
    *,
    wait: float = 0.0,
    on_wait: Callable[[str, float], None] | None = None,
) -> AsyncIterator[AsyncClient]:
    """Connect to a daemon's loopback TCP listener and authenticate with the bearer token
    (a wrong one: ``RpcError``, ``remote_reason`` ``unauthorized``). As ``connect``: while
    the port refuses connections (a daemon starting, or restarting) it tries again for up
    to ``wait`` seconds before ``NoDaemon``; ``on_wait("HOST:PORT", wait)`` is called once,
    when that wait begins."""
    wait = _seconds(wait, "wait", zero=True)
    where = f"{host}:{port}"
    deadline = anyio.current_time() + wait
    waiting = False
    while True:
        try:
            stream = await anyio.connect_tcp(host, port)
            break
        except OSError as exc:
            error = _no_daemon(_attempt_error(exc), where, "hostd serve --tcp")
            if not error.may_be_starting or anyio.current_time() >= deadline:
                raise error from exc
        if not waiting and on_wait is not None:
            on_wait(where, wait)
        waiting = True
        await anyio.sleep(_RETRY_S)
    async with stream, _running(AsyncClient(stream, stream), _raw(stream)) as client:
        await client.call("$/authenticate", {"token": token})
        yield client


def _attempt_error(exc: OSError) -> OSError:
    """The OS's own error under anyio's ``All connection attempts failed`` (which has no
    ``errno``): its one attempt's, or the first of several (an address per family) that
    has one, so a refused port reads ``Connection refused`` and may be waited for."""
    if exc.errno is not None:
        return exc
    cause = exc.__cause__
    attempts = cause.exceptions if isinstance(cause, BaseExceptionGroup) else (cause,)
    for attempt in attempts:
        if isinstance(attempt, OSError) and attempt.errno is not None:
            return attempt
    return exc


def _cwd(cwd: str | os.PathLike[str] | None) -> Path | None:
    return Path(cwd) if cwd is not None else None


def serve_command(
    config: str | os.PathLike[str] | None = None, *, log_level: str | None = None
) -> list[str]:
    """The command that runs ``hostd serve --stdio`` with this interpreter (and ``config``,
    and ``--log-level`` when ``log_level`` is given)."""
    cmd = [sys.executable, "-m", "hostd"]
    if config is not None:
        cmd += ["--config", os.fspath(config)]
    if log_level is not None:
        cmd += ["--log-level", log_level]
    return [*cmd, "serve", "--stdio"]


@_async_with
async def spawn(
    config: str | os.PathLike[str] | None = None,
    *,
    command: Sequence[str] | None = None,
    stderr: int | IO[Any] | None = None,
    env: dict[str, str] | None = None,
    cwd: str | os.PathLike[str] | None = None,
    grace_s: float = 15.0,
    log_level: str | None = "warning",
) -> AsyncIterator[AsyncClient]:
    """Start ``hostd serve --stdio`` as a child and talk to it; stop it on exit.

    ``stderr`` (the daemon's JSON log) comes through to this process's ``sys.stderr``
    unless given (``DEVNULL``, a file); a daemon that exits makes its calls'
    ``ConnectionLost`` say how, with its last error line (not with ``PIPE``: the stream
    is yours then) and ``data`` ``exit_status`` and ``daemon_reason``. ``log_level``: the
    child's log level while its log shares your stderr (default ``warning``: a provider
    that fails is told, each request is not); ``None``, a ``stderr`` of your own or a
    config with a ``[log] file`` keeps the config's ``[log] level``. On exit stdin is
    closed (the daemon drains and exits 0); a daemon that outlives ``grace_s`` is
    terminated, then killed.
    """
    # Only a log that shares the caller's stderr is quieted: a [log] file keeps its level.
    shared = stderr is None and command is None and logs_to_stderr(config, cwd=_cwd(cwd))
    level = log_level if shared else None
    # The daemon's stderr goes where ``stderr`` says (yours by default), passed on by
    # this process, which keeps its last error line: a daemon that refuses its config
    # says why in the ConnectionLost, also to a program that drops its log.
    passed = _StderrPass.to(stderr)
    process: Process = await anyio.open_process(
        list(command or serve_command(config, log_level=level)),
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE if passed is not None else stderr,
        env=env,
        cwd=cwd,
    )
    assert process.stdin is not None and process.stdout is not None
    async with anyio.create_task_group() as tg:
        if passed is not None and process.stderr is not None:
            tg.start_soon(passed.pump, process.stderr)
        client = AsyncClient(process.stdout, process.stdin)
        client.process = process
        client._why_ended = lambda: _exit_reason(process, passed)
        try:
            async with _running(client):
                yield client
        finally:
            with anyio.CancelScope(shield=True):
                await _stop_child(process, grace_s)
                if passed is not None:  # its last lines, unless a grandchild holds the pipe
                    with anyio.move_on_after(_EXIT_WAIT_S):
                        await passed.done.wait()
            tg.cancel_scope.cancel()


#: How long a daemon whose output ended is given to exit before its status is asked.
_EXIT_WAIT_S = 5.0


class _StderrPass:
    """A spawned daemon's stderr, written on to where the caller said as it comes (this
    process's ``sys.stderr``, a file descriptor, or nowhere), with the last line hostd
    wrote as an error (``hostd: … [reason]``) kept."""

    def __init__(self, write: Callable[[bytes], None] | None) -> None:
        self._write = write
        self.error: str | None = None
        self.done = anyio.Event()

    @classmethod
    def to(cls, stderr: int | IO[Any] | None) -> _StderrPass | None:
        """The pass for ``spawn``'s ``stderr``: None (yours), ``DEVNULL`` or a file
        (descriptor or object with one); None for what the caller reads itself (``PIPE``)."""
        if stderr is None:
            return cls(_write_stderr)
        if stderr == subprocess.DEVNULL:
            return cls(None)
        fd = stderr if isinstance(stderr, int) else _fileno(stderr)
        if fd is None or fd < 0:  # PIPE, STDOUT, or a file object with no descriptor
            return None
        return cls(functools.partial(_write_fd, fd))

    async def pump(self, stream: ByteReceiveStream) -> None:
        splitter = LineSplitter(64 * 1024)
        try:
            async for chunk in stream:
                if self._write is not None:
                    await anyio.to_thread.run_sync(self._write, chunk)
                for line in splitter.feed(chunk):
                    if isinstance(line, bytes) and line.startswith(b"hostd: "):
                        self.error = line[len(b"hostd: ") :].decode("utf-8", "replace")
        except (anyio.BrokenResourceError, anyio.ClosedResourceError):
            pass
        finally:
            self.done.set()


def _fileno(file: IO[Any]) -> int | None:
    try:
        return file.fileno()
    except (AttributeError, OSError, ValueError):  # io.StringIO and the like: none
        return None


def _write_fd(fd: int, chunk: bytes) -> None:
    try:
        view = memoryview(chunk)
        while view:
            view = view[os.write(fd, view) :]
    except OSError:  # a closed or broken file must not stop the pump
        pass


def _write_stderr(chunk: bytes) -> None:
    try:
        sys.stderr.write(chunk.decode("utf-8", "replace"))
        sys.stderr.flush()
    except (OSError, ValueError):  # a closed or broken stderr must not stop the pump
        pass


async def _exit_reason(
    process: Process, passed: _StderrPass | None
) -> tuple[str, dict[str, Any]] | None:
    """Once the daemon has exited (within ``_EXIT_WAIT_S``): ``the daemon exited with
    status 2: <its error line>`` and the ``ConnectionLost.data`` members ``exit_status``
    (a signal's negative number, as ``Popen.returncode``) and, when its error line ends
    with one, ``daemon_reason`` (``bad_config``); else None."""
    with anyio.move_on_after(_EXIT_WAIT_S):
        await process.wait()
        if passed is not None:
            await passed.done.wait()
    status = process.returncode
    if status is None:
        return None
    said = passed.error if passed is not None else None
    shown = f"status {status}" if status >= 0 else f"signal {-status}"
    data: dict[str, Any] = {"exit_status": status}
    reason = _REASON.search(said) if said else None
    if reason is not None:
        data["daemon_reason"] = reason.group(1)
    return f"the daemon exited with {shown}" + (f": {said[:300]}" if said else ""), data


#: The reason the CLI's error line ends with (``… [bad_config]``).
_REASON = re.compile(r"\[([a-z_]+)\]\s*$")


async def _stop_child(process: Process, grace_s: float) -> None:
    """Close the daemon's stdin (it drains and exits 0), then the transport's ladder:
    SIGTERM after ``grace_s``, SIGKILL five seconds later."""
    with contextlib.suppress(Exception):
        if process.stdin is not None:
            await process.stdin.aclose()
    await stop_process(process, grace_s, term_grace=5)
