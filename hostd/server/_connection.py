"""One client connection: framing, dispatch, cancellation, limits and replies.

Owns the JSON-RPC 2.0 session rules on one byte stream: one JSON value per
line; parse errors (−32700) and invalid requests (−32600) answered with
``id: null``; batches answered as one array (an empty batch is one invalid
request; a batch of notifications gets no reply); per-connection limits on
line length, batch size and requests in flight; ``$/cancel`` cancels the named
request's work and suppresses its reply; and, for sockets, a client that goes
away cancels everything it had in flight. Method semantics live in ``_api``.
"""

from __future__ import annotations

import hmac
import json
import time
import warnings
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

import anyio

from hostd.errors import BadRequest, Overloaded, ShuttingDown, error_to_wire
from hostd.logs import bind_request, flush_logs, get_logger
from hostd.protocol import INVALID_REQUEST, PARSE_ERROR

from ._api import METHODS  # imports jsonrpcserver with its deprecation warning silenced
from ._framing import LineFault, read_lines

with warnings.catch_warnings():
    warnings.simplefilter("ignore", DeprecationWarning)
    from jsonrpcserver.async_main import dispatch_to_serializable

if TYPE_CHECKING:
    from ._daemon import Daemon

__all__ = ["Connection", "RequestContext", "dispatch_one"]

log = get_logger("hostd.server")

_NO_REPLY = object()


class Unauthorized(BadRequest):
    """A TCP client whose first message is not ``$/authenticate`` with the right token."""

    reason = "unauthorized"


def _dumps(obj: Any) -> bytes:
    # json.dumps escapes control characters, so a value never contains a literal newline.
    text = json.dumps(obj, separators=(",", ":"), ensure_ascii=False, default=str)
    try:
        return (text + "\n").encode()
    except UnicodeEncodeError:
        # A lone surrogate (legal in a JSON string escape, not in UTF-8): escape everything.
        return (json.dumps(obj, separators=(",", ":"), default=str) + "\n").encode()


def _error(code: int, message: str, id_: Any = None, data: Any = None) -> dict[str, Any]:
    err: dict[str, Any] = {"code": code, "message": message}
    if data is not None:
        err["data"] = data
    return {"jsonrpc": "2.0", "error": err, "id": id_}


def _wire_error(exc: BaseException, id_: Any) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "error": error_to_wire(exc), "id": id_}


def _id_key(value: Any) -> str:
    return json.dumps(value, sort_keys=True)


def _identity(value: Any) -> Any:
    return value


_REQUEST_KEYS = frozenset({"jsonrpc", "method", "id", "params"})


def _validate_request(msg: Any) -> Any:
    """JSON-RPC 2.0 request shape, the same rules as jsonrpcserver's JSON schema but
    without a jsonschema pass per request (hot path). Raising means Invalid Request."""
    if not isinstance(msg, dict) or msg.get("jsonrpc") != "2.0":
        raise ValueError("not a JSON-RPC 2.0 request")
    if not isinstance(msg.get("method"), str) or not _REQUEST_KEYS.issuperset(msg):
        raise ValueError("bad method or unknown member")
    if "id" in msg:
        id_ = msg["id"]
        if isinstance(id_, bool) or not (id_ is None or isinstance(id_, str | int | float)):
            raise ValueError("bad id")
    if "params" in msg and not isinstance(msg["params"], dict | list):
        raise ValueError("bad params")
    return msg


class RequestContext:
    """What a method sees of the world: the daemon, its request id, and its connection."""

    __slots__ = ("connection", "daemon", "request_id")

    def __init__(self, daemon: Daemon, connection: Connection, request_id: str) -> None:
        self.daemon = daemon
        self.connection = connection
        self.request_id = request_id

    async def notify(self, method: str, params: dict[str, Any]) -> None:
        await self.connection.send({"jsonrpc": "2.0", "method": method, "params": params})

    def cancel_request(self, id_: Any) -> None:
        self.connection.cancel(id_)


class Connection:
    """Serve JSON-RPC on one byte stream until EOF, a broken peer, or cancellation."""

    def __init__(
        self,
        daemon: Daemon,
        receive: Callable[[], Awaitable[bytes]],
        send: Callable[[bytes], Awaitable[None]],
        *,
        name: str,
        token: str | None = None,
        drain_on_eof: bool = False,
    ) -> None:
        self.daemon = daemon
        self.name = name
        self._receive = receive
        self._send_bytes = send
        self._token = token
        self._authenticated = token is None
        self._drain_on_eof = drain_on_eof
        self._send_lock = anyio.Lock()
        self._scopes: dict[str, list[anyio.CancelScope]] = {}
        self._inflight = 0
        self._idle = anyio.Event()
        self._idle.set()
        self._broken = False
        self._tg: Any = None
        limits = daemon.config.host
        self._max_line = limits.max_line_bytes
        self._max_in_flight = limits.max_in_flight
        self._max_batch = limits.max_batch

    # -- outbound ----------------------------------------------------------------------

    async def send(self, obj: Any) -> None:
        if self._broken:
            return
        data = _dumps(obj)
        try:
            async with self._send_lock:
                await self._send_bytes(data)
        except (anyio.BrokenResourceError, anyio.ClosedResourceError, OSError):
            # The client went away: its remaining work is cancelled (nobody to answer).
            self._broken = True
            if self._tg is not None:
                self._tg.cancel_scope.cancel()

    # -- cancellation ------------------------------------------------------------------

    def cancel(self, id_: Any) -> None:
        for scope in self._scopes.get(_id_key(id_), ()):
            scope.cancel()

    def _register(self, msg: Any) -> anyio.CancelScope:
        scope = anyio.CancelScope()
        if isinstance(msg, dict) and "id" in msg:
            self._scopes.setdefault(_id_key(msg["id"]), []).append(scope)
        return scope

    def _unregister(self, msg: Any, scope: anyio.CancelScope) -> None:
        if isinstance(msg, dict) and "id" in msg:
            key = _id_key(msg["id"])
            scopes = self._scopes.get(key)
            if scopes is not None:
                scopes.remove(scope)
                if not scopes:
                    del self._scopes[key]

    # -- serving -----------------------------------------------------------------------

    async def serve(self) -> None:
        self.daemon.counters["connections_total"] += 1
        self.daemon.counters["connections_open"] += 1
        log.debug("connection.opened", connection=self.name)
        try:
            async with anyio.create_task_group() as tg:
                self._tg = tg
                async for item in read_lines(self._receive, self._max_line):
                    if isinstance(item, LineFault):
                        log.warning("client.line_too_long", connection=self.name, size=item.size)
                        await self.send(
                            _error(
                                INVALID_REQUEST,
                                "line too long",
                                data={"reason": "line_too_long", "max_line_bytes": self._max_line},
                            )
                        )
                        continue
                    if not item.strip():
                        continue
                    if not await self._handle_line(item):
                        break
                if self._drain_on_eof and not self._broken:
                    await self._idle.wait()
                tg.cancel_scope.cancel()
        except (anyio.BrokenResourceError, anyio.ClosedResourceError, OSError):
            pass
        except Exception as exc:  # a bug here costs this connection, never the daemon
            log.error("connection.crashed", connection=self.name, exc_info=exc)
        finally:
            self.daemon.counters["connections_open"] -= 1
            log.debug("connection.closed", connection=self.name)

    async def _handle_line(self, line: bytes) -> bool:
        """Handle one line; False closes the connection."""
        try:
            msg = json.loads(line)
        except (ValueError, RecursionError):  # UnicodeDecodeError is a ValueError; deep nesting
            await self.send(_error(PARSE_ERROR, "Parse error", data={"reason": "parse_error"}))
            return True
        if not self._authenticated:
            return await self._authenticate(msg)
        if isinstance(msg, list):
            await self._handle_batch(msg)
        elif isinstance(msg, dict) and msg.get("method") == "$/cancel" and "id" not in msg:
            # Handled inline so a cancel is never queued behind the work it cancels.
            await self._dispatch(msg)
        else:
            if self._inflight >= self._max_in_flight:
                if isinstance(msg, dict) and "id" in msg:
                    await self.send(_wire_error(self._overloaded(), msg["id"]))
                return True
            self._start(self._run_single, msg)
        return True

    def _overloaded(self) -> Overloaded:
        return Overloaded(
            f"too many requests in flight on this connection (limit {self._max_in_flight})",
            limit=self._max_in_flight,
        )

    async def _handle_batch(self, batch: list[Any]) -> None:
        if not batch:
            await self.send(
                _error(INVALID_REQUEST, "Invalid Request", data={"reason": "empty_batch"})
            )
            return
        if len(batch) > self._max_batch:
            await self.send(
                _wire_error(
                    Overloaded(
                        f"batch of {len(batch)} requests is over the limit of {self._max_batch}",
                        limit=self._max_batch,
                    ),
                    None,
                )
            )
            return
        if self._inflight >= self._max_in_flight:
            errors = [
                _wire_error(self._overloaded(), m["id"])
                for m in batch
                if isinstance(m, dict) and "id" in m
            ]
            if errors:
                await self.send(errors)
            return
        self._start(self._run_batch, batch)

    def _start(self, runner: Callable[[Any, Any], Awaitable[None]], msg: Any) -> None:
        # Scopes are registered before the task starts, so a $/cancel on the very next
        # line always finds the request it names.
        scopes = [self._register(m) for m in msg] if isinstance(msg, list) else self._register(msg)
        self._inflight += 1
        self._idle = anyio.Event() if self._inflight == 1 else self._idle
        self.daemon.begin_request()
        self._tg.start_soon(self._finish_after, runner, msg, scopes)

    async def _finish_after(
        self, runner: Callable[[Any, Any], Awaitable[None]], msg: Any, scopes: Any
    ) -> None:
        try:
            await runner(msg, scopes)
        finally:
            if isinstance(msg, list):
                for m, scope in zip(msg, scopes, strict=True):
                    self._unregister(m, scope)
            else:
                self._unregister(msg, scopes)
            self._inflight -= 1
            if self._inflight == 0:
                self._idle.set()
            self.daemon.end_request()

    async def _run_single(self, msg: Any, scope: anyio.CancelScope) -> None:
        reply = await self._dispatch_in(msg, scope)
        if reply is not _NO_REPLY and reply is not None:
            await self.send(reply)

    async def _run_batch(self, batch: list[Any], scopes: list[anyio.CancelScope]) -> None:
        replies: list[Any] = [None] * len(batch)
        limiter = anyio.CapacityLimiter(self._max_in_flight)

        async def one(i: int) -> None:
            async with limiter:
                replies[i] = await self._dispatch_in(batch[i], scopes[i])

        async with anyio.create_task_group() as tg:
            for i in range(len(batch)):
                tg.start_soon(one, i)
        out = [r for r in replies if r is not None and r is not _NO_REPLY]
        if out:
            await self.send(out)

    async def _dispatch_in(self, msg: Any, scope: anyio.CancelScope) -> Any:
        with scope:
            return await self._dispatch(msg)
        # Reached only when ``scope`` was cancelled by $/cancel: no reply for it.
        log.info("request.cancelled", connection=self.name)
        return _NO_REPLY

    async def _dispatch(self, msg: Any) -> Any:
        return await dispatch_one(self.daemon, self, msg)

    async def _authenticate(self, msg: Any) -> bool:
        token = None
        if isinstance(msg, dict) and msg.get("method") == "$/authenticate":
            params = msg.get("params")
            if isinstance(params, dict) and isinstance(params.get("token"), str):
                token = params["token"]
        id_ = msg.get("id") if isinstance(msg, dict) else None
        assert self._token is not None
        if token is not None and hmac.compare_digest(token.encode(), self._token.encode()):
            self._authenticated = True
            if isinstance(msg, dict) and "id" in msg:
                await self.send({"jsonrpc": "2.0", "result": {"authenticated": True}, "id": id_})
            return True
        log.warning("client.unauthorized", connection=self.name)
        await self.send(
            _wire_error(
                Unauthorized("the first message must be $/authenticate with the bearer token"),
                id_,
            )
        )
        return False


async def dispatch_one(daemon: Daemon, connection: Any, msg: Any) -> Any:
    """Dispatch one request object (not a batch) and return its reply (None: no reply)."""
    request_id = daemon.new_request_id()
    bind_request(request_id)
    method = msg.get("method") if isinstance(msg, dict) else None
    if daemon.stopping and method != "$/cancel" and isinstance(msg, dict) and "id" in msg:
        return _wire_error(ShuttingDown("hostd is shutting down"), msg["id"])
    started = time.perf_counter()
    ctx = RequestContext(daemon, connection, request_id)
    reply = await dispatch_to_serializable(
        msg, METHODS, context=ctx, deserializer=_identity, validator=_validate_request
    )
    daemon.counters["requests_total"] += 1
    error = reply.get("error") if isinstance(reply, dict) else None
    if error is not None:
        daemon.counters["requests_failed"] += 1
    if method != "$/cancel":
        data = error.get("data") if error else None
        log.info(
            "request.done",
            method=method if isinstance(method, str) else None,
            connection=getattr(connection, "name", "local"),
            duration_ms=round((time.perf_counter() - started) * 1000, 3),
            error_code=error.get("code") if error else None,
            error_reason=data.get("reason") if isinstance(data, dict) else None,
        )
    flush_logs()  # one write for all the events this request caused
    return reply
