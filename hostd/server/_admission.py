"""Who gets a connection slot: the caps on client connections, decided apart from I/O.

Owns the two caps. Unix-socket (and stdio) clients and authenticated TCP clients
count against ``host.max_connections``; past it a new one is refused (closed at
once). TCP connections that have not authenticated count apart, at most
``MAX_UNAUTHENTICATED``, so they never take a slot from those; at that cap a new
one *evicts the oldest* unauthenticated connection rather than being refused, so
a flood of idle or re-opening peers costs its own connections, and a client that
sends its token at once always reaches its ``$/authenticate`` (a refusal at the
cap would let 64 idle peers lock every TCP client out). Refusals and evictions
are counted (``connections_refused``, ``connections_evicted``) and logged
through the daemon's ``RepeatedEvents``, so a flood of them cannot flood the log.
"""

from __future__ import annotations

from collections import Counter

from hostd.transport import RepeatedEvents

from ._connection import Connection

__all__ = ["MAX_UNAUTHENTICATED", "Admission"]

#: TCP connections not yet authenticated, counted apart from ``max_connections``.
MAX_UNAUTHENTICATED = 64


class Admission:
    """The caps of one daemon over its ``counters`` (see the module text)."""

    def __init__(
        self, counters: Counter[str], repeats: RepeatedEvents, max_connections: int
    ) -> None:
        self._counters = counters
        self._repeats = repeats
        self._max_connections = max_connections
        #: TCP connections in accept order, the oldest first: whom the cap evicts.
        #: Authenticated ones stay until they close or an eviction walks past them.
        self._tcp: dict[Connection, None] = {}

    def admit(self, tcp: bool) -> bool:
        """Room for one more connection (after an eviction, maybe)? False: refuse it."""
        counters = self._counters
        if not tcp:
            counted, limit = "connections_open", self._max_connections
            if counters[counted] < limit:
                return True
        else:
            counted, limit = "connections_unauthenticated", MAX_UNAUTHENTICATED
            if counters[counted] < limit or self._evict_oldest():
                return True
        counters["connections_refused"] += 1
        self._repeats.warning("host.connection_refused", limit=limit, counted=counted)
        return False

    def opened(self, connection: Connection) -> None:
        """A TCP connection was accepted (it starts unauthenticated)."""
        self._tcp[connection] = None

    def closed(self, connection: Connection) -> None:
        self._tcp.pop(connection, None)

    def _evict_oldest(self) -> bool:
        while self._tcp:
            oldest = next(iter(self._tcp))
            del self._tcp[oldest]
            if oldest.evict():  # False for an authenticated one: passed over, dropped
                self._counters["connections_evicted"] += 1
                self._repeats.warning(
                    "host.connection_evicted", connection=oldest.name, limit=MAX_UNAUTHENTICATED
                )
                return True
        return False
