"""A binding's codec driven over a child's pipes: a line sink over the one correlation table.

``PipeClient`` writes what the binding's codec (``hostd.transport.bindings``)
builds and hands each line the child writes to the same codec; it keeps no wire
of its own. The table and its one-slot waiters are ``hostd.rpc``'s (the same the
client and check-provider use); a child's stdout pipe fills them from its read
callback (``on_line``/``on_end``, ``_stdout``), the caller awaits them. A request
keyed ``UNKEYED`` is answered in lock-step (one in flight); abandoned mid-flight,
its late reply would answer the next one, so the stream is then unusable
(``desynchronised``). When the stream ends or breaks, every waiter is woken with
the same typed error.
"""

from __future__ import annotations

import asyncio
import math
from collections.abc import Awaitable, Callable
from functools import partial
from typing import Any

import anyio

from hostd._log import get_logger
from hostd.errors import HostdError, ProtocolFault
from hostd.protocol import (
    ContextQuery,
    ContextQueryResult,
    ForgetRequest,
    ForgetResult,
    FrameIdentity,
    HandshakeAck,
    HostInfo,
    RememberRequest,
    RememberResult,
    VerifyResponse,
    WireModel,
)
from hostd.rpc import PendingTable

from ..bindings import (
    UNKEYED,
    CgpCodec,
    Codec,
    Fault,
    JsonRpcCodec,
    Notice,
    Refusal,
    Request,
    validate_reply,
)

__all__ = [
    "CgpClient",
    "JsonRpcClient",
    "PipeClient",
    "Send",
    "SendNowait",
    "StartedCall",
]

Send = Callable[[bytes], Awaitable[None]]
#: Writes a whole line at once or returns ``False`` having written nothing.
SendNowait = Callable[[bytes], bool]

log = get_logger("hostd.transport")


def _same(payload: Any) -> Any:
    return payload


def _or_never(deadline: float | None) -> float:
    return math.inf if deadline is None else deadline


class StartedCall:
    """A request about to be written, its reply settled in the pipe's read callback:
    read by the codec, converted (validated) by the binding there, then kept in
    ``value`` (or its failure in ``error``) and told at once, so its waiter wakes once,
    on a finished value. Told how: ``on_settled(call)`` when given (a fan-out's inbox:
    the call then has no future of its own), else its ``future`` is resolved. Made, it
    is ``key``'s slot in ``table`` (a broken stream's failure raises instead, with
    nothing registered or scheduled). ``deadline`` (the event loop's clock): a timer
    fails it with ``TimeoutError`` then, abandoning its id; so does a waiter that gives
    up. The timer is never cancelled: it holds the table and the key, not the call, and
    finds nothing to fail once the call left the table (answered, failed, abandoned).
    An abandoned id's reply, come late, is dropped quietly and counted, never read as a
    correlation fault."""

    __slots__ = (
        "_convert",
        "_key",
        "_table",
        "error",
        "future",
        "on_settled",
        "open",
        "value",
    )

    def __init__(
        self,
        table: PendingTable,
        key: Any,
        convert: Callable[[Any], Any],
        deadline: float | None = None,
        on_settled: Callable[[StartedCall], None] | None = None,
        loop: asyncio.AbstractEventLoop | None = None,
    ) -> None:
        # The table's own rule, checked first: once the stream ended it takes no new
        # waiter, and nothing is registered or scheduled.
        if table.failure is not None:
            raise table.failure
        table[key] = self
        self._table = table
        self._key = key
        self._convert = convert
        self.on_settled = on_settled
        #: Neither answered, failed, timed out nor abandoned yet.
        self.open = True
        #: The converted reply, once answered; ``error``: why not (a refusal, a broken
        #: stream, ``TimeoutError``), once it failed.
        self.value: Any = None
        self.error: BaseException | None = None
        if loop is None:
            loop = asyncio.get_running_loop()
        #: What an awaiting caller waits on; ``None`` when ``on_settled`` tells instead.
        self.future: asyncio.Future[Any] | None = (
            None if on_settled is not None else loop.create_future()
        )
        if deadline is not None and deadline != math.inf:
            loop.call_at(deadline, _expire, table, key)

    def _settled(self) -> None:
        self.open = False
        future = self.future
        if future is not None:
            if future.done():  # its waiter was cancelled: nobody to tell
                pass
            elif self.error is not None:
                future.set_exception(self.error)
            else:
                future.set_result(self.value)
        if self.on_settled is not None:
            self.on_settled(self)

    # The table's slot: the read callback resolves or fails it, the stream's end fails it.
    def resolve(self, payload: Any) -> None:
        if not self.open:
            return
        try:
            self.value = self._convert(payload)
        except Exception as exc:  # the reply's own fault (ProtocolFault): this call's alone
            self.error = exc
        self._settled()

    def fail(self, error: BaseException) -> None:
        if self.open:
            self.error = error
            self._settled()

    def abandon(self) -> None:
        """The caller gives up (cancelled): the id is abandoned, nobody is told."""
        if self.open:
            self.open = False
            self._table.abandon(self._key)
            if self.future is not None:
                self.future.cancel()

    async def result(self) -> Any:
        """The converted reply (an error reply, a broken stream or the deadline raises);
        a call told through ``on_settled`` has no future: await that instead."""
        if self.future is None:
            raise RuntimeError("a call told through on_settled is not awaited")
        try:
            return await self.future
        except BaseException:
            self.abandon()
            raise


def _expire(table: PendingTable, key: Any) -> None:
    """A call's deadline: the call still waiting under ``key`` (an open call is in the
    table, and keys are never reused) fails with ``TimeoutError``, its id abandoned so a
    late reply is counted; one answered, failed or abandoned already is not there."""
    call = table.get(key)
    if call is not None:
        table.abandon(key)
        call.fail(TimeoutError())


class PipeClient:
    """One provider's calls over a line stream, through its binding's ``codec``.

    A child process's pipe pushes the lines: it calls ``on_line`` for each line from
    the event loop's read callback and ``on_end`` once when the stream ends (see
    ``ChildProcess.start_reading``). Each line is read by the codec and goes to its
    waiter; a fault of the peer ends the stream and wakes every waiter with it.
    """

    def __init__(
        self,
        codec: Codec,
        send: Send,
        *,
        provider_id: str = "?",
        send_nowait: SendNowait | None = None,
    ) -> None:
        self.codec = codec
        self.binding = codec.name
        self._send = send
        self._send_nowait = send_nowait
        # fast_acquire: an uncontended lock does not yield (a yield per request adds up).
        self._send_lock = anyio.Lock(fast_acquire=True)
        #: Writers holding or awaiting ``_send_lock``: non-zero exactly while it is held
        #: (a released lock passes straight to its next waiter), read without a call.
        self._senders = 0
        self._lockstep = anyio.Lock()  # one UNKEYED request at a time
        self._table = PendingTable()
        self.provider_id = provider_id
        #: Replies that came after their caller gave up (``_late``).
        self.late_replies = 0
        #: Told the new count as each late reply comes (its connection keeps it).
        self.on_late: Callable[[int], None] | None = None
        #: A lock-step request was abandoned mid-flight: its late reply would be
        #: read as the answer to the next request, so the stream is unusable.
        self.desynchronised = False
        #: Told of each provider notification ``(method, params)`` (``context/progress``).
        self.on_notification: Callable[[str, Any], None] | None = None
        #: The handshake's raw payload (it may say ``"ready": false``, ``_readiness``).
        self.handshake_result: Any = None
        #: The event loop its pipe is read in (a stream lives in one): looked up once.
        self._loop: asyncio.AbstractEventLoop | None = None
        #: Told when the stream becomes unusable (it ended or broke, or a lock-step
        #: request was abandoned mid-flight): its connection's ``alive`` falls then.
        self.on_broken: Callable[[], None] | None = None

    def __repr__(self) -> str:
        return (
            f"<{type(self).__name__} {self.provider_id} {self.codec!r} "
            f"desynchronised={self.desynchronised} {self._table!r}>"
        )

    def _event_loop(self) -> asyncio.AbstractEventLoop:
        loop = self._loop
        if loop is None:
            loop = self._loop = asyncio.get_running_loop()
        return loop

    @property
    def correlation(self) -> bool:
        """Whether queries pipeline (the codec's, learnt from the handshake)."""
        return self.codec.correlation

    @property
    def failure(self) -> HostdError | None:
        return self._table.failure

    @property
    def in_flight(self) -> int:
        return len(self._table)

    def _late(self, key: Any) -> bool:
        """Whether ``key``'s caller gave up on it (a timed-out leg). Its reply, come late,
        is dropped quietly and counted in ``late_replies``: the process answers, late,
        so it is slow, not hung (the engine's health reads the count)."""
        if not self._table.was_abandoned(key):
            return False
        self.late_replies += 1
        if self.on_late is not None:
            self.on_late(self.late_replies)
        log.debug("provider.reply.late", provider=self.provider_id, late=self.late_replies)
        return True

    def _dispatch(self, line: bytes) -> HostdError | None:
        """The one reply path: the codec reads the line, the table finds its waiter, who
        reads the payload into the model of what it asked. A returned error ends the
        stream (the peer's fault)."""
        msg = self.codec.read(line)
        if msg is None:
            return None
        if isinstance(msg, Fault):
            return msg.error
        if isinstance(msg, Notice):
            if self.on_notification is not None:  # context/progress; others are ignored
                self.on_notification(msg.method, msg.params)
            return None
        key = msg.key
        slot = self._table.pop(key, None) if key is not None else None
        if slot is None:
            if key is not None and key is not UNKEYED and self._late(key):
                return None  # a late reply to a request whose caller gave up
            return self.codec.unmatched(msg)
        if isinstance(msg, Refusal):
            slot.fail(msg.error)
        else:
            slot.resolve(msg.payload)
        return None

    def on_line(self, line: bytes) -> bool:
        """Handle one line; ``False`` once the stream has ended (the line was a fault of
        the peer, or it came after the end): read no more."""
        if self._table.failure is not None:
            return False
        fault = self._dispatch(line)
        if fault is None:
            return True
        self.on_end(fault)
        return False

    def on_end(self, error: HostdError) -> None:
        """The stream ended (or broke) with ``error``: every waiter, now and later, gets it."""
        if self._table.failure is None:
            log.debug("provider.stream.ended", provider=self.provider_id, reason=error.reason)
        self.close(error)

    async def _exchange(
        self, request: Request, deadline: float | None, convert: Callable[[Any], Any] = _same
    ) -> Any:
        # Registered as it is made (a broken stream's failure raises here).
        call = StartedCall(self._table, request.key, convert, deadline, loop=self._event_loop())
        try:
            # Written at once when the pipe takes the line whole (no lock, no turn), else
            # in turn, waiting for room (no longer than the deadline).
            nowait = self._send_nowait
            if nowait is None or self._senders or not nowait(request.line):
                with anyio.CancelScope(deadline=_or_never(deadline)) as waited:
                    await self._send_in_turn(request.line)
                if waited.cancelled_caught:
                    raise TimeoutError
            assert call.future is not None  # made with no on_settled
            return await call.future
        except BaseException:
            if request.key is UNKEYED and call.open:
                self.desynchronised = True
                if self.on_broken is not None:
                    self.on_broken()
            call.abandon()
            raise

    async def exchange(
        self,
        request: Request,
        *,
        deadline: float | None = None,
        convert: Callable[[Any], Any] = _same,
    ) -> Any:
        """Send ``request`` and await its reply's payload (an error reply raises).
        ``deadline`` (the event loop's clock, as ``start_query``'s): past it,
        ``TimeoutError``, its id abandoned (a late reply counted in ``late_replies``)."""
        if request.key is not UNKEYED:
            return await self._exchange(request, deadline, convert)
        if self.desynchronised:
            raise ProtocolFault("stream desynchronised by an abandoned request")
        # One at a time, the wait for its turn included: given up at the deadline (the
        # scope's, so the call is still open then) it leaves the stream desynchronised.
        with anyio.CancelScope(deadline=_or_never(deadline)) as waited:
            async with self._lockstep:
                return await self._exchange(request, None, convert)
        assert waited.cancelled_caught  # the only way out of the block without a return
        raise TimeoutError

    async def call(
        self,
        method: str,
        params: dict[str, Any],
        *,
        deadline: float | None = None,
        model: type[WireModel] | None = None,
    ) -> Any:
        """One request to ``method`` (a reranker's ``rerank``) and its result, on a
        binding that calls methods by name (JSON-RPC; ``ProtocolFault`` for another): raw,
        or validated as ``model`` (a bad shape is ``MalformedReply``, as a query's is); an
        error reply raises, and past ``deadline`` it is ``TimeoutError`` (``exchange``)."""
        request, convert = self._method_request(method, params, model)
        return await self.exchange(request, deadline=deadline, convert=convert)

    def _method_request(
        self, method: str, params: dict[str, Any], model: type[WireModel] | None
    ) -> tuple[Request, Callable[[Any], Any]]:
        codec = self.codec
        if not isinstance(codec, JsonRpcCodec):
            raise ProtocolFault(f"the {self.binding} binding calls no method by name")
        convert = (
            _same if model is None else partial(validate_reply, model, what=f"{method} result")
        )
        return codec.request(method, params), convert

    def start_call(
        self,
        method: str,
        params: dict[str, Any],
        *,
        deadline: float | None = None,
        on_settled: Callable[[StartedCall], None] | None = None,
        model: type[WireModel] | None = None,
    ) -> StartedCall | None:
        """``call``'s request written now, as ``start_query`` writes a query: ``None``
        (nothing written) when it would have to wait for room or its turn, else the
        started call, its result (validated as ``model`` in the read callback, when given)
        in ``value`` once settled (``error``: an error reply, a bad shape, a broken
        stream, ``TimeoutError`` past ``deadline``)."""
        request, convert = self._method_request(method, params, model)
        return self._start(request.key, request.line, convert, deadline, on_settled)

    def _start(
        self,
        key: Any,
        line: bytes,
        convert: Callable[[Any], Any],
        deadline: float | None,
        on_settled: Callable[[StartedCall], None] | None,
    ) -> StartedCall | None:
        """Register ``key`` and write ``line`` now if that needs no waiting (see
        ``send_nowait``); ``None``, with nothing registered or written, otherwise."""
        if self._send_nowait is None or self._senders:
            return None
        # Registered as it is made; the stream broke: its failure, at once.
        call = StartedCall(self._table, key, convert, deadline, on_settled, self._event_loop())
        try:
            sent = self._send_nowait(line)
        except BaseException:
            self._table.pop(key, None)
            call.abandon()
            raise
        if not sent:
            self._table.pop(key, None)
            call.abandon()
            return None
        return call

    async def handshake(self, host: HostInfo) -> HandshakeAck:
        payload = await self.exchange(self.codec.handshake(host))
        self.handshake_result = payload
        return self.codec.handshake_ack(payload)

    async def query(self, query: ContextQuery) -> ContextQueryResult:
        return self.codec.query_result(await self.exchange(self.codec.query(query)))

    def start_query(
        self,
        query: ContextQuery | dict[str, Any],
        *,
        deadline: float | None = None,
        on_settled: Callable[[StartedCall], None] | None = None,
    ) -> StartedCall | None:
        """Write a query now, with no event-loop turn, when the provider pipelines and
        the pipe takes the line whole at once; ``None`` (nothing written) otherwise, a
        lock-step provider always: then use ``query``. ``query`` may be given in its
        wire form (``to_wire()``); ``await started.result()`` (or, once ``on_settled``
        told of it, ``started.value``) is the ``ContextQueryResult``, validated in the
        read callback; past ``deadline`` it is ``TimeoutError`` (``started.error``)."""
        if not self.codec.correlation:
            return None
        request = self.codec.query(query)
        return self._start(request.key, request.line, self.codec.query_result, deadline, on_settled)

    async def verify(self, frames: list[FrameIdentity]) -> VerifyResponse:
        return self.codec.verify_response(await self.exchange(self.codec.verify(frames)))

    async def remember(
        self, request: RememberRequest, *, deadline: float | None = None
    ) -> RememberResult:
        """``memory/remember`` (``NotSupported`` on a binding without it, before anything
        is written); past ``deadline``, ``TimeoutError``."""
        sent = self.codec.remember(request)
        return self.codec.remember_result(await self.exchange(sent, deadline=deadline))

    async def forget(
        self, request: ForgetRequest, *, deadline: float | None = None
    ) -> ForgetResult:
        """``memory/forget``, as ``remember``."""
        sent = self.codec.forget(request)
        return self.codec.forget_result(await self.exchange(sent, deadline=deadline))

    async def _send_in_turn(self, line: bytes) -> None:
        """Write ``line`` after the writes before it, waiting for room as long as it takes."""
        self._senders += 1
        try:
            async with self._send_lock:
                await self._send(line)
        finally:
            self._senders -= 1

    async def send(self, request: Request) -> None:
        """Write a request nothing answers (a notification, ``shutdown``)."""
        await self._send_in_turn(request.line)

    async def shutdown(self) -> None:
        await self.send(self.codec.shutdown())

    def close(self, error: HostdError) -> None:
        """Fail every waiter (the connection is being torn down)."""
        self._table.fail_all(error)
        if self.on_broken is not None:
            self.on_broken()


class JsonRpcClient(PipeClient):
    """The JSON-RPC binding over a child's pipes, with calls to any method (a reranker's)."""

    codec: JsonRpcCodec

    def __init__(
        self, send: Send, *, provider_id: str = "?", send_nowait: SendNowait | None = None
    ) -> None:
        super().__init__(
            JsonRpcCodec(provider_id), send, provider_id=provider_id, send_nowait=send_nowait
        )

    async def notify(self, method: str, params: dict[str, Any] | None = None) -> None:
        await self.send(self.codec.notification(method, params))


class CgpClient(PipeClient):
    """The CGP envelope binding over a child's pipes."""

    codec: CgpCodec

    def __init__(
        self, send: Send, *, provider_id: str = "?", send_nowait: SendNowait | None = None
    ) -> None:
        super().__init__(
            CgpCodec(provider_id), send, provider_id=provider_id, send_nowait=send_nowait
        )

    @property
    def wire_provider_id(self) -> str | None:
        """The ``provider_id`` verify identities carry on the wire: the handshake name."""
        return self.codec.wire_provider_id
