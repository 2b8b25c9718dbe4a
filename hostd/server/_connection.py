"""One client connection: framing, session rules, cancellation, limits and replies.

Owns the JSON-RPC 2.0 session rules on one byte stream: one JSON value per
line (``hostd.protocol.LineSplitter``: an over-long line is answered once and
skipped, the connection keeps serving); parse errors (−32700) answered with
``id: null``, invalid requests (−32600) under their own id when it is valid (the
dispatcher's check); batches answered as one array (an
empty batch is one invalid request; a batch of notifications gets no reply; an
element that is not an object, an inner array included, gets its own −32600 and
is never run);
per-connection limits on batch size and requests in flight; ids unique among
the requests in flight (a request, or a batch element, whose id one in flight
holds gets its own −32600 ``id_in_use`` and is never run); ``$/cancel``
cancels the named request's work, suppresses its reply and frees its id; and,
for sockets, a client that goes away cancels everything it had in flight.

A connection with a token (TCP) is *unauthenticated* until its first message,
``$/authenticate``, carries the token: until then it may hold no more than a
small line (``Limits.pre_auth_line_bytes``), must authenticate within
``Limits.auth_timeout_s`` or be closed, and is counted apart
(``connections_unauthenticated``) so the daemon can cap such connections on
their own, never at the expense of Unix-socket or authenticated clients; at the
cap the daemon ``evict``s the oldest one, which closes it and can never
authenticate after. The warnings a peer can cause once per connection it opens
go through the owner's ``RepeatedEvents`` (rate-limited, counted, summarised).

Method semantics are not here: each request is handed to the ``dispatch``
callable the daemon injects. This module imports neither ``_api`` nor
``_daemon`` (tests/test_layers.py).
"""

from __future__ import annotations

import hmac
from collections import Counter
from collections.abc import Awaitable, Callable, Hashable
from dataclasses import dataclass
from typing import Any, Protocol

import anyio
import anyio.abc
import anyio.lowlevel

from hostd.errors import (
    EmptyBatch,
    IdInUse,
    InvalidRequest,
    Overloaded,
    ParseError,
    RequestLineTooLong,
    ShuttingDown,
    Unauthorized,
)
from hostd.logs import REQUEST_ID, get_logger
from hostd.protocol import LineSplitter, OverlongLine
from hostd.rpc import HEAD_BYTES, decode, encode, encode_reply, error_reply, id_in_line, reply_id
from hostd.rpc import tag_request as _tag
from hostd.transport import RepeatedEvents

__all__ = [
    "Answer",
    "Connection",
    "Dispatch",
    "Limits",
    "Owner",
    "Receive",
    "SendNowait",
    "socket_receive",
    "socket_send_nowait",
]

log = get_logger("hostd.server")

_NO_REPLY = object()


#: The name of a request's task (what ``start_soon`` would derive from its method).
_REQUEST_TASK = f"{__name__}.Connection._finish_after"


def _refusal_text(msg: Any, token: str | None, expected: str | None) -> str:
    """Why a first message did not authenticate a TCP client: no token the daemon can
    accept now, a wrong token, a token not where it goes, or another message first.
    Never the token sent (the sender knows it)."""
    if expected is None:
        return (
            "$/authenticate: this daemon cannot read its [tcp] token_file now, so it accepts "
            "no token until its operator fixes it (its log says why)"
        )
    if token is not None:
        return (
            "$/authenticate: the bearer token is not this daemon's (the one its [tcp] "
            "token or token_file holds now)"
        )
    if isinstance(msg, dict) and msg.get("method") == "$/authenticate":
        return '$/authenticate takes the bearer token as params {"token": "…"}'
    return "the first message must be $/authenticate with the bearer token"


class _Running:
    """One request in flight outside a batch: its task (``TaskHandle``: the task's own
    cancel scope, so no scope of ours per request) and whether this connection
    cancelled it (``$/cancel``, or the end of the grace period)."""

    __slots__ = ("cancelled", "handle")

    def __init__(self) -> None:
        self.handle: Any = None
        self.cancelled = False

    def cancel(self) -> None:
        self.cancelled = True
        if self.handle is not None:
            self.handle.cancel()


class _Cancellable(Protocol):
    def cancel(self) -> None: ...


class Owner(Protocol):
    """What a connection reports to the daemon that owns it."""

    counters: Counter[str]
    #: Where warnings a peer can repeat at will are logged (rate-limited).
    repeats: RepeatedEvents

    def begin_request(self) -> None: ...

    def end_request(self) -> None: ...

    def new_request_id(self) -> str:
        """A request id for the log, as each dispatched request gets (``data.request_id``)."""
        ...

    def admit_authenticated(self) -> bool:
        """Room among ``max_connections`` for a TCP client that just authenticated?"""
        ...


#: ``dispatch(connection, request)`` → the reply dict, or ``None`` when none is owed.
Dispatch = Callable[["Connection", Any], Awaitable[Any]]
#: ``answer(connection, request)`` → the reply as its encoded line, or ``None``: a
#: request outside a batch, dispatched and encoded in one call.
Answer = Callable[["Connection", Any], Awaitable[bytes | None]]
#: Writes what the peer's socket takes now, without waiting: the bytes written (0: full).
SendNowait = Callable[[bytes], int]
#: The next bytes the peer sent; ``b""`` at its end (EOF, a reset, a closed stream).
Receive = Callable[[], Awaitable[bytes]]


def socket_receive(stream: Any, max_bytes: int = 1 << 16) -> Receive | None:
    """A Unix socket stream's read as plain socket calls, or ``None`` for any other
    stream (TCP, stdio): what the socket holds is read at once, and only a read that
    would block (or one after a read that emptied it) waits for the socket to be
    readable (no event-loop turn first)."""
    # A Unix socket stream only, as ``socket_send_nowait``: anyio reads it by the same
    # calls (recv until EAGAIN, then wait for readability), after a turn of the loop
    # each time; a TCP stream is an asyncio transport with a buffer of its own.
    if not isinstance(stream, anyio.abc.UNIXSocketStream):
        return None
    sock = stream.extra(anyio.abc.SocketAttribute.raw_socket)
    waited = True  # the last read found the socket empty and waited for it
    # The last read took less than ``max_bytes``: the socket held no more then, so the
    # next read would fail (EAGAIN) and wait. It waits first instead: one system call
    # and one exception fewer per request, before its task runs. Readiness is level-
    # triggered, so bytes that came meanwhile end the wait at the next turn.
    drained = False

    async def receive() -> bytes:
        nonlocal waited, drained
        while True:
            if drained:
                try:
                    await anyio.wait_readable(sock)
                except (anyio.ClosedResourceError, anyio.BrokenResourceError):
                    return b""
                waited = True
            try:
                data: bytes = sock.recv(max_bytes)
            except BlockingIOError:
                drained = True
                continue
            except OSError:  # reset or closed: the peer is gone
                return b""
            if not waited:
                # Read twice running without waiting: a peer that keeps the socket full
                # must not hold the loop, so this read yields once before its lines run.
                await anyio.lowlevel.checkpoint()
            waited = False
            drained = len(data) < max_bytes
            return data

    return receive


def socket_send_nowait(stream: Any) -> SendNowait | None:
    """A Unix socket stream's non-blocking write (its raw socket's ``send``), or ``None``
    for any other stream (TCP, stdio). A reply the socket takes whole is written with no
    event-loop turn; the rest goes through the stream's own ``send``."""
    # A Unix socket stream only: anyio drives it by plain socket calls, as this does. A
    # TCP stream is an asyncio transport with a write buffer of its own (a direct write
    # could overtake it), and a wrapped one (TLS) would be skipped.
    if not isinstance(stream, anyio.abc.UNIXSocketStream):
        return None
    sock = stream.extra(anyio.abc.SocketAttribute.raw_socket)

    def send_nowait(data: bytes) -> int:
        try:
            sent: int = sock.send(data)
        except BlockingIOError:  # full: the stream's send waits for room
            return 0
        return sent

    return send_nowait


@dataclass(frozen=True, slots=True)
class Limits:
    """Per-connection limits (protocol.md framing; ``[host]`` in the config)."""

    max_line_bytes: int
    max_in_flight: int
    max_batch: int
    #: Before ``$/authenticate``: the longest line, and how long a client may take.
    pre_auth_line_bytes: int = 4096
    auth_timeout_s: float = 5.0


def _id_key(value: Any) -> Hashable:
    """A request id as a key: JSON-equal ids alike, ``1``, ``1.0``, ``"1"`` and ``true``
    apart. An int or a string (nearly every id) is its own key, typed; anything else
    its canonical bytes.

    A null id gets a key of its own each time: JSON-RPC allows it (and discourages it,
    since a reply whose request's id could not be read carries null too), so a client
    that sends it cannot tell its replies apart anyway, and none is refused for
    another's. Held all the same, so the grace period's end reaches it; no ``$/cancel``
    names it."""
    kind = type(value)
    if kind is int or kind is str:
        return (kind, value)
    if value is None:
        return object()
    return encode(value)


#: A batch element that is not an object: its own −32600 with a null id. Refused here,
#: never dispatched: dispatching an inner array would run it as a batch of its own, past
#: ``max_batch`` and ``max_in_flight``, with a nested reply.
_NOT_A_REQUEST = "Invalid Request: a batch element must be an object"

#: A request whose id one in flight on this connection holds. Both run, the client could
#: not tell their replies apart, nor which one a ``$/cancel`` of that id stops; so the
#: later one is refused. The id is in the reply, not the text (a peer's string, of any
#: length).
_ID_IN_USE = (
    "Invalid Request: a request in flight on this connection has this id; "
    "send another id, or this one again once that request is answered"
)


@dataclass(slots=True)
class _Held:
    """A batch element's cancel scope, and the key its id is held under (None: no id);
    or its refusal (``id_in_use``), answered in the batch's reply and never run."""

    scope: anyio.CancelScope
    key: Hashable = None
    refusal: dict[str, Any] | None = None


class Connection:
    """Serve JSON-RPC on one byte stream until EOF, a broken peer, or cancellation."""

    def __init__(
        self,
        owner: Owner,
        receive: Callable[[], Awaitable[bytes]],
        send: Callable[[bytes], Awaitable[None]],
        dispatch: Dispatch,
        limits: Limits,
        *,
        name: str,
        token: Callable[[], str | None] | None = None,
        drain_on_eof: bool = False,
        send_nowait: SendNowait | None = None,
        answer: Answer | None = None,
        peer: str | None = None,
        credentials: tuple[int, int] | None = None,
    ) -> None:
        self.owner = owner
        self.name = name
        #: Where a TCP client connects from (``address:port``); ``None`` on a Unix socket
        #: or stdio: what the log says of a request that stops or reloads the daemon.
        self.peer = peer
        #: A Unix socket client's user and process ids (``SO_PEERCRED``); ``None`` on TCP,
        #: stdio, or a system that does not say: who it was, in the same log lines.
        self.peer_uid: int | None = credentials[0] if credentials is not None else None
        self.peer_pid: int | None = credentials[1] if credentials is not None else None
        #: The token this connection authenticated with (TCP): a token rotated since
        #: revokes it (``revoke``).
        self.authenticated_with: str | None = None
        self._receive = receive
        self._send_bytes = send
        self._send_nowait = send_nowait
        self._dispatch_one = dispatch
        self._answer = answer
        self._limits = limits
        self._token = token
        self._authenticated = token is None
        self._drain_on_eof = drain_on_eof
        # Taken only by a write that must wait (the socket full, or another write under
        # way); fast_acquire: a free lock does not yield first.
        self._send_lock = anyio.Lock(fast_acquire=True)
        #: Writes under way or waiting for the lock; 0 lets a line skip the lock.
        self._writers = 0
        #: The ids in flight, each to what a ``$/cancel`` of it reaches: a request's
        #: ``_Running``, or the cancel scope of a batch's element. One entry per id: a
        #: request whose id is here is refused (``_id_in_use``).
        self._scopes: dict[Hashable, _Cancellable] = {}
        self._inflight = 0
        #: Made only when ``serve`` drains the requests in flight at EOF.
        self._idle: anyio.Event | None = None
        self._broken = False
        self._aborting = False
        self._evicted = False
        self._tg: Any = None
        # Made here, entered by ``serve``: an eviction before the task runs still counts.
        self._scope = anyio.CancelScope()
        # Counted from construction (the daemon constructs as it accepts), so a burst of
        # accepts cannot overshoot the caps before the first connection task runs.
        owner.counters["connections_total"] += 1
        self._counted: str | None = (
            "connections_open" if self._authenticated else "connections_unauthenticated"
        )
        owner.counters[self._counted] += 1

    def evict(self) -> bool:
        """Close this connection if it has not authenticated (True if so). It stops being
        counted at once, so the daemon's cap is exact while it is torn down."""
        if self._authenticated or self._evicted:
            return False
        self._evicted = True
        self._uncount()
        self._scope.cancel()
        return True

    def revoke(self) -> None:
        """Close this connection (authenticated with a token no longer in force), its
        requests cut off: a revoked token keeps no door open."""
        self._scope.cancel()

    def _uncount(self) -> None:
        if self._counted is not None:
            self.owner.counters[self._counted] -= 1
            self._counted = None

    # -- outbound ----------------------------------------------------------------------

    async def send(self, obj: Any) -> None:
        """Write ``obj`` as one line (``encode_reply``), after every line handed in before."""
        await self.send_line(encode_reply(obj))

    async def send_line(self, data: bytes) -> None:
        """Write one encoded line whole, after every line handed in before it."""
        if self._broken:
            return
        try:
            sent = 0
            nowait = self._send_nowait
            tried = self._writers == 0 and nowait is not None
            if tried and nowait is not None:
                # No write under way nor waiting: what the socket takes now is written
                # now, with no lock and no turn; only a rest waits for room, in order.
                sent = nowait(data)
                if sent == len(data):
                    return
            self._writers += 1  # from here until written, later lines queue behind it
            try:
                async with self._send_lock:  # free when no writer was counted: no turn
                    if not tried and nowait is not None:
                        sent = nowait(data)
                    if sent < len(data):
                        await self._send_bytes(data[sent:] if sent else data)
            finally:
                self._writers -= 1
        except (anyio.BrokenResourceError, anyio.ClosedResourceError, OSError):
            # The client went away: its remaining work is cancelled (nobody to answer).
            self._broken = True
            if self._tg is not None:
                self._tg.cancel_scope.cancel()

    # -- cancellation ------------------------------------------------------------------

    def cancel(self, id_: Any) -> None:
        # The id is free from here: a cancelled request is never answered, so the client
        # has no reply to wait for before it sends the id again.
        entry = self._scopes.pop(_id_key(id_), None)
        if entry is not None:
            entry.cancel()

    def abort_in_flight(self) -> None:
        """The grace period is over: cancel every request in flight and answer each
        with ``shutting_down`` (−32006) instead of closing on it without a word."""
        self._aborting = True
        for entry in list(self._scopes.values()):
            entry.cancel()

    def _register(self, msg: Any) -> _Held:
        """A batch element's cancel scope and the key its id is held under until the batch
        is answered; for an element whose id a request in flight (an earlier element
        included) holds, its refusal instead."""
        held = _Held(anyio.CancelScope())
        if isinstance(msg, dict) and "id" in msg:
            key = _id_key(msg["id"])
            if key in self._scopes:
                held.refusal = self._refused_id(msg)  # answered in the batch's reply
                return held
            self._scopes[key] = held.scope
            held.key = key
        return held

    def _unregister(self, held: _Held) -> None:
        if held.key is not None:
            self._forget(held.key, held.scope)

    def _error(
        self, exc: BaseException, id_: Any = None, request_id: str | None = None
    ) -> dict[str, Any]:
        """A refusal this connection answers itself, its ``data.request_id`` a new one (or
        ``request_id``): every error the daemon answers carries one (docs/api.md), so a
        client's error is matched to the log line that tells it, when one does."""
        reply: dict[str, Any] = _tag(
            error_reply(exc, id_), request_id or self.owner.new_request_id()
        )
        return reply

    def _refused_id(self, msg: Any) -> dict[str, Any]:
        """The refusal of a request for its id, counted and logged (the id left out: a
        peer's string, of any length)."""
        self.owner.counters["requests_id_in_use"] += 1
        request_id = self.owner.new_request_id()
        self.owner.repeats.warning("client.id_in_use", connection=self.name, request_id=request_id)
        return self._error(IdInUse(_ID_IN_USE), reply_id(msg), request_id)

    def _forget(self, key: Hashable, entry: _Cancellable) -> None:
        """``entry`` no longer reachable by a ``$/cancel`` of ``key``, its id free (if it
        still held it: a ``$/cancel`` frees the id at once, and another may hold it since)."""
        if self._scopes.get(key) is entry:
            del self._scopes[key]

    # -- serving -----------------------------------------------------------------------

    async def serve(self) -> None:
        if self.peer is not None or self.peer_pid is not None:
            # Who: the one line that ties a socket client to its ``connection`` name.
            log.info("connection.opened", connection=self.name, **self.identity())
        else:
            log.debug("connection.opened", connection=self.name)
        try:
            with self._scope:
                async with anyio.create_task_group() as tg:
                    self._tg = tg
                    if not self._authenticated:
                        tg.start_soon(self._auth_deadline)
                    await self._read()
                    if self._drain_on_eof and not self._broken and self._inflight:
                        self._idle = anyio.Event()
                        await self._idle.wait()
                    # Closing: no longer open, before its requests are told to stop (so
                    # no status sees its requests gone and the connection still open).
                    self._uncount()
                    tg.cancel_scope.cancel()
        except (anyio.BrokenResourceError, anyio.ClosedResourceError, OSError):
            pass
        except Exception as exc:  # a bug here costs this connection, never the daemon
            log.error("connection.crashed", connection=self.name, exc_info=exc)
        finally:
            self._uncount()
            log.debug("connection.closed", connection=self.name)

    def identity(self) -> dict[str, Any]:
        """Who is on the other end, as the log says it: ``peer`` (a TCP client's
        address), and a Unix client's ``peer_uid`` and ``peer_pid`` when known."""
        said: dict[str, Any] = {"peer": self.peer}
        if self.peer_pid is not None:
            said.update(peer_uid=self.peer_uid, peer_pid=self.peer_pid)
        return said

    async def _auth_deadline(self) -> None:
        # A timer, not a wait: the client's time to authenticate runs out here.
        await anyio.sleep(self._limits.auth_timeout_s)
        if not self._authenticated:
            self.owner.repeats.warning("client.auth_timeout", connection=self.name)
            self._tg.cancel_scope.cancel()

    async def _read(self) -> None:
        """Handle lines until EOF or a line that closes the connection. A partial line
        at EOF is dropped (half a line, then a disconnect, is not a request)."""
        # The ends of an over-long line are kept, to answer it under its request's id.
        splitter = LineSplitter(self._limits.max_line_bytes, keep_ends=HEAD_BYTES)
        pre_auth = self._limits.pre_auth_line_bytes
        while chunk := await self._receive():
            for item in splitter.feed(chunk):
                if not self._authenticated and (
                    not isinstance(item, bytes) or len(item) > pre_auth
                ):
                    # Before the token, a big line is not a client's mistake to forgive.
                    await self._line_too_long(pre_auth)
                    return
                if not isinstance(item, bytes):  # an OverlongLine: no other marker here
                    ends = item if isinstance(item, OverlongLine) else None
                    said = id_in_line(ends.head, ends.tail) if ends is not None else None
                    await self._line_too_long(self._limits.max_line_bytes, said)
                    continue
                if item.strip() and not await self._handle_line(item):
                    return
            if not self._authenticated and (len(splitter.partial) > pre_auth or splitter.skipping):
                await self._line_too_long(pre_auth)
                return

    async def _line_too_long(self, limit: int, id_: Any = None) -> None:
        """Answer a line over ``limit`` (never parsed) under the id its ends name, when
        that can be read for certain (``id_in_line``), else null."""
        request_id = self.owner.new_request_id()
        self.owner.repeats.warning(
            "client.line_too_long",
            connection=self.name,
            max_line_bytes=limit,
            request_id=request_id,
        )
        refusal = RequestLineTooLong("line too long", max_line_bytes=limit)
        await self.send(self._error(refusal, id_, request_id))

    async def _handle_line(self, line: bytes) -> bool:
        """Handle one line; False closes the connection."""
        try:
            msg = decode(line)
        except ParseError as exc:
            await self.send(self._error(exc))
            return True
        if not self._authenticated:
            return await self._authenticate(msg)
        if isinstance(msg, list):
            await self._handle_batch(msg)
        elif isinstance(msg, dict) and msg.get("method") == "$/cancel" and "id" not in msg:
            # Handled inline so a cancel is never queued behind the work it cancels. Its
            # dispatch sets its request id (``REQUEST_ID``) in this, the connection's
            # own task: put back once it is done, so the connection's later events
            # (``connection.closed``…) carry no request's id.
            token = REQUEST_ID.set(None)
            try:
                await self._dispatch_one(self, msg)
            finally:
                REQUEST_ID.reset(token)
        else:
            if self._inflight >= self._limits.max_in_flight:
                if isinstance(msg, dict) and "id" in msg:
                    await self.send(self._error(self._overloaded(), reply_id(msg)))
                return True
            running = _Running()
            key: Hashable = None
            if isinstance(msg, dict) and "id" in msg:
                key = _id_key(msg["id"])
                if key in self._scopes:
                    await self.send(self._refused_id(msg))
                    return True
                self._scopes[key] = running  # before the task: a $/cancel next finds it
            self._begin()
            # The coroutine and its name given (anyio >= 4.14): the name is not derived
            # from the method, nor the call checked for a coroutine, per request.
            coro = self._finish_after(msg, key, running)
            running.handle = self._tg.create_task(coro, name=_REQUEST_TASK)
        return True

    def _overloaded(self) -> Overloaded:
        limit = self._limits.max_in_flight
        return Overloaded(
            f"too many requests in flight on this connection (limit {limit})", limit=limit
        )

    async def _handle_batch(self, batch: list[Any]) -> None:
        if not batch:
            await self.send(self._error(EmptyBatch("Invalid Request: empty batch")))
            return
        limit = self._limits.max_batch
        if len(batch) > limit:
            await self.send(
                self._error(
                    Overloaded(
                        f"batch of {len(batch)} requests is over the limit of {limit}",
                        limit=limit,
                    )
                )
            )
            return
        if self._inflight >= self._limits.max_in_flight:
            errors = [
                self._error(self._overloaded(), reply_id(m))
                if isinstance(m, dict)
                else self._error(InvalidRequest(_NOT_A_REQUEST))
                for m in batch
                if not isinstance(m, dict) or "id" in m
            ]
            if errors:
                await self.send(errors)
            return
        # Scopes are registered before the task starts, so a $/cancel on the very next
        # line always finds the request it names; in order, so of two elements with one
        # id the later is refused.
        held = [self._register(m) for m in batch]
        self._begin()
        self._tg.start_soon(self._finish_batch, batch, held)

    def _begin(self) -> None:
        self._inflight += 1
        self.owner.begin_request()

    def _end(self) -> None:
        self._inflight -= 1
        if self._inflight == 0 and self._idle is not None:
            self._idle.set()
        self.owner.end_request()

    async def _finish_after(self, msg: Any, key: Hashable, running: _Running) -> None:
        """One request in its own task: dispatched, forgotten (a ``$/cancel`` from then on
        finds nothing, so a cancel never cuts a reply short), its reply written."""
        ended = False
        try:
            try:
                if self._answer is not None:
                    line = await self._answer(self, msg)
                else:
                    reply = await self._dispatch_one(self, msg)
                    line = None if reply is None else encode_reply(reply)
            except anyio.get_cancelled_exc_class():
                if running.cancelled:
                    ended = self._cancelled(msg)
                raise
            if key is not None:
                self._forget(key, running)
            if line is not None:
                await self.send_line(line)
        finally:
            if key is not None:
                self._forget(key, running)
            if not ended:
                self._end()

    def _cancelled(self, msg: Any) -> bool:
        """A request this connection cancelled: by ``$/cancel`` (no reply for it), or at
        the end of the grace period (the client is told why, by a task of its own: this
        one's scope is cancelled). True when that task ends the request."""
        if self._aborting:
            log.info("request.aborted", connection=self.name)
            # The request's own id (its dispatch set it in this task), as its log lines say.
            reply = self._error(
                ShuttingDown("hostd is shutting down: the grace period is over"),
                reply_id(msg),
                REQUEST_ID.get(),
            )
            self._tg.start_soon(self._reply_then_end, reply)
            return True
        log.info("request.cancelled", connection=self.name)
        return False

    async def _reply_then_end(self, reply: Any) -> None:
        try:
            await self.send(reply)
        finally:
            self._end()

    async def _finish_batch(self, batch: list[Any], held: list[_Held]) -> None:
        try:
            await self._run_batch(batch, held)
        finally:
            for one_held in held:
                self._unregister(one_held)
            self._end()

    async def _run_batch(self, batch: list[Any], held: list[_Held]) -> None:
        replies: list[Any] = [None] * len(batch)
        limiter = anyio.CapacityLimiter(self._limits.max_in_flight)

        async def one(i: int, scope: anyio.CancelScope) -> None:
            async with limiter:
                replies[i] = await self._dispatch_in(batch[i], scope)

        async with anyio.create_task_group() as tg:
            for i, (msg, element) in enumerate(zip(batch, held, strict=True)):
                if not isinstance(msg, dict):
                    # An inner array is never a batch of its own (nor run), nor any scalar.
                    replies[i] = self._error(InvalidRequest(_NOT_A_REQUEST))
                elif element.refusal is not None:
                    replies[i] = element.refusal  # counted and logged by _register
                else:
                    tg.start_soon(one, i, element.scope)
        out = [r for r in replies if r is not None and r is not _NO_REPLY]
        if out:
            await self.send(out)

    async def _dispatch_in(self, msg: Any, scope: anyio.CancelScope) -> Any:
        with scope:
            return await self._dispatch_one(self, msg)
        # Reached only when ``scope`` was cancelled: by $/cancel (no reply for it), or
        # at the end of the grace period (the client is told why).
        if self._aborting:
            log.info("request.aborted", connection=self.name)
            return self._error(
                ShuttingDown("hostd is shutting down: the grace period is over"),
                reply_id(msg),
                REQUEST_ID.get(),  # the element's own, set by its dispatch in this task
            )
        log.info("request.cancelled", connection=self.name)
        return _NO_REPLY

    async def _authenticate(self, msg: Any) -> bool:
        token = None
        if isinstance(msg, dict) and msg.get("method") == "$/authenticate":
            params = msg.get("params")
            if isinstance(params, dict) and isinstance(params.get("token"), str):
                token = params["token"]
        assert self._token is not None
        if self._evicted:  # closed already; the token read since must not reopen it
            return False
        expected = self._token()  # as the config names it now (a rotated file: the new one)
        if (
            token is not None
            and expected is not None
            and hmac.compare_digest(token.encode(), expected.encode())
        ):
            self._uncount()
            if not self.owner.admit_authenticated():  # counted and logged as a refusal
                full = Overloaded("hostd is serving its max_connections clients")
                await self.send(self._error(full, reply_id(msg)))
                return False
            self._authenticated = True
            self.authenticated_with = expected
            self._counted = "connections_open"
            self.owner.counters["connections_open"] += 1
            if isinstance(msg, dict) and "id" in msg:
                await self.send(
                    {"jsonrpc": "2.0", "result": {"authenticated": True}, "id": reply_id(msg)}
                )
            return True
        request_id = self.owner.new_request_id()
        self.owner.repeats.warning(
            "client.unauthorized", connection=self.name, request_id=request_id
        )
        refusal = Unauthorized(_refusal_text(msg, token, expected))
        await self.send(self._error(refusal, reply_id(msg), request_id))
        return False
