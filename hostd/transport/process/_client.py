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

from collections.abc import Awaitable, Callable
from typing import Any

import anyio

from hostd._log import get_logger
from hostd.errors import HostdError, ProtocolFault
from hostd.protocol import (
    ContextQuery,
    ContextQueryResult,
    FrameIdentity,
    HandshakeAck,
    HostInfo,
    VerifyResponse,
)
from hostd.rpc import Pending, PendingTable

from ..bindings import UNKEYED, CgpCodec, Codec, Fault, JsonRpcCodec, Notice, Refusal, Request

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


class StartedCall:
    """A request already written; ``await result()`` is its reply, converted by the
    binding. Cancelled or failed while waiting, the id is abandoned (a late reply is
    then dropped quietly, not read as a correlation fault)."""

    __slots__ = ("_convert", "_key", "_slot", "_table")

    def __init__(
        self, table: PendingTable, key: Any, slot: Pending, convert: Callable[[Any], Any]
    ) -> None:
        self._table = table
        self._key = key
        self._slot = slot
        self._convert = convert

    async def result(self) -> Any:
        try:
            reply = await self._slot.wait()
        except BaseException:
            self._table.abandon(self._key)
            raise
        return self._convert(reply)


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
        self._lockstep = anyio.Lock()  # one UNKEYED request at a time
        self._table = PendingTable()
        self.provider_id = provider_id
        #: Replies that came after their caller gave up (``_late``).
        self.late_replies = 0
        #: A lock-step request was abandoned mid-flight: its late reply would be
        #: read as the answer to the next request, so the stream is unusable.
        self.desynchronised = False
        #: Told of each provider notification ``(method, params)`` (``context/progress``).
        self.on_notification: Callable[[str, Any], None] | None = None
        #: The handshake's raw payload (it may say ``"ready": false``, ``_readiness``).
        self.handshake_result: Any = None

    def __repr__(self) -> str:
        return (
            f"<{type(self).__name__} {self.provider_id} {self.codec!r} "
            f"desynchronised={self.desynchronised} {self._table!r}>"
        )

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
        slot = self._table.pop(key) if key is not None else None
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
        self._table.fail_all(error)

    async def _exchange(self, request: Request) -> Any:
        slot: Pending = self._table.add(request.key)
        try:
            async with self._send_lock:
                await self._send(request.line)
            return await slot.wait()
        except BaseException:
            if request.key is UNKEYED and not slot.done.is_set():
                self.desynchronised = True
            self._table.abandon(request.key)
            raise

    async def exchange(self, request: Request) -> Any:
        """Send ``request`` and await its reply's payload (an error reply raises)."""
        if request.key is not UNKEYED:
            return await self._exchange(request)
        if self.desynchronised:
            raise ProtocolFault("stream desynchronised by an abandoned request")
        async with self._lockstep:
            return await self._exchange(request)

    def _start(self, key: Any, line: bytes, convert: Callable[[Any], Any]) -> StartedCall | None:
        """Register ``key`` and write ``line`` now if that needs no waiting (see
        ``send_nowait``); ``None``, with nothing registered or written, otherwise."""
        if self._send_nowait is None or self._send_lock.locked():
            return None
        slot = self._table.add(key)  # raises the stream's failure, if it broke
        try:
            sent = self._send_nowait(line)
        except BaseException:
            self._table.pop(key)
            raise
        if not sent:
            self._table.pop(key)
            return None
        return StartedCall(self._table, key, slot, convert)

    async def handshake(self, host: HostInfo) -> HandshakeAck:
        payload = await self.exchange(self.codec.handshake(host))
        self.handshake_result = payload
        return self.codec.handshake_ack(payload)

    async def query(self, query: ContextQuery) -> ContextQueryResult:
        return self.codec.query_result(await self.exchange(self.codec.query(query)))

    def start_query(self, query: ContextQuery | dict[str, Any]) -> StartedCall | None:
        """Write a query now, with no event-loop turn, when the provider pipelines and
        the pipe takes the line whole at once; ``None`` (nothing written) otherwise, a
        lock-step provider always: then use ``query``. ``query`` may be given in its
        wire form (``to_wire()``); ``await started.result()`` is the
        ``ContextQueryResult``."""
        if not self.codec.correlation:
            return None
        request = self.codec.query(query)
        return self._start(request.key, request.line, self.codec.query_result)

    async def verify(self, frames: list[FrameIdentity]) -> VerifyResponse:
        return self.codec.verify_response(await self.exchange(self.codec.verify(frames)))

    async def send(self, request: Request) -> None:
        """Write a request nothing answers (a notification, ``shutdown``)."""
        async with self._send_lock:
            await self._send(request.line)

    async def shutdown(self) -> None:
        await self.send(self.codec.shutdown())

    def close(self, error: HostdError) -> None:
        """Fail every waiter (the connection is being torn down)."""
        self._table.fail_all(error)


class JsonRpcClient(PipeClient):
    """The JSON-RPC binding over a child's pipes, with calls to any method (a reranker's)."""

    codec: JsonRpcCodec

    def __init__(
        self, send: Send, *, provider_id: str = "?", send_nowait: SendNowait | None = None
    ) -> None:
        super().__init__(
            JsonRpcCodec(provider_id), send, provider_id=provider_id, send_nowait=send_nowait
        )

    async def call(self, method: str, params: dict[str, Any]) -> Any:
        """One request to ``method``; its raw result (an error reply raises)."""
        return await self.exchange(self.codec.request(method, params))

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
