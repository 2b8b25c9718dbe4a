"""Pending calls shared by both bindings: a line sink over the one correlation table.

The table and its one-slot waiters are ``hostd.rpc``'s (the same the client and
check-provider use); a child's stdout pipe fills them from its read callback
(``on_line``/``on_end``, ``_stdout``), the caller awaits them. When the stream ends
or breaks, every waiter is woken with the same typed error.
"""

from __future__ import annotations

import itertools
from collections.abc import Awaitable, Callable
from typing import Any

import anyio
import structlog

from hostd.errors import HostdError
from hostd.protocol import ContextQuery
from hostd.rpc import Pending, PendingTable

__all__ = [
    "Send",
    "SendNowait",
    "StartedCall",
    "StreamClient",
    "query_wire",
]

Send = Callable[[bytes], Awaitable[None]]
#: Writes a whole line at once or returns ``False`` having written nothing.
SendNowait = Callable[[bytes], bool]

log = structlog.get_logger("hostd.transport")


def query_wire(query: ContextQuery | dict[str, Any]) -> dict[str, Any]:
    """A query's wire form: a ``ContextQuery`` serialised, or a dict already in that form."""
    return query if isinstance(query, dict) else query.to_wire()


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


class StreamClient:
    """What both bindings share: a line sink, a send lock, ids and the pending table.

    A child process's pipe pushes the lines: it calls ``on_line`` for each line from
    the event loop's read callback and ``on_end`` once when the stream ends (see
    ``ChildProcess.start_reading``). Each line goes to the binding's ``_dispatch``,
    and when the stream stops every waiter is woken with the reason.
    """

    def __init__(
        self,
        send: Send,
        *,
        provider_id: str = "?",
        send_nowait: SendNowait | None = None,
    ) -> None:
        self._send = send
        self._send_nowait = send_nowait
        # fast_acquire: an uncontended lock does not yield (a yield per request adds up).
        self._send_lock = anyio.Lock(fast_acquire=True)
        self._ids = itertools.count(1)
        self._table = PendingTable()
        self.provider_id = provider_id
        #: Replies that came after their caller gave up (``_late``).
        self.late_replies = 0
        self._init_binding()

    def _init_binding(self) -> None:
        """The binding's own state, set up at the end of ``__init__``."""

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
        """Handle one line; a returned error ends the stream (the peer's fault)."""
        raise NotImplementedError

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
