"""Bounding a listener's idle peers: the provider side of an HTTPS provider (``--http``).

A peer that connects and sends nothing costs a file descriptor for as long as it is
let stay; a few hundred of them under a small ``RLIMIT_NOFILE`` lock every token
holder out, and each refused ``accept`` used to log a traceback. ``ConnectionGuard``
owns the sockets a listener accepted (counted at the TCP level, so a TLS handshake
never finished counts too) and keeps three rules:

- **A deadline for the request.** A connection that has not delivered a complete
  request head within ``request_timeout_s`` of its accept (or of its last response,
  for a kept-alive one) is shut down by ``sweep``; the token is checked only once
  the head is in, so nobody holds a connection longer than that unauthenticated.
- **A cap.** At most ``max_connections`` are open; a new one past the cap takes the
  place of the connection idle the longest (never one whose request is being
  served), and is refused at once when every one is busy. The default cap stays
  below the file-descriptor limit (``default_max_connections``).
- **Exhaustion logged once per interval.** An ``accept`` that fails for want of a
  resource (``EMFILE``, ``ENFILE``, ``ENOBUFS``, ``ENOMEM``) is one warning line per
  ``log_interval_s`` with the count since the last, never a traceback per attempt.

``GuardedSocket`` is the listening socket whose ``accept`` admits through the guard
(asyncio's server calls it); ``guarded_protocol`` subclasses a uvicorn HTTP protocol
to tell the guard when a connection's request head is complete and when its
response is. Plain sync code but for ``run_sweeps``; imports nothing of hostd.
"""

from __future__ import annotations

import asyncio
import errno
import logging
import resource
import socket
import time
from collections.abc import Callable
from typing import Any

import anyio

__all__ = [
    "ConnectionGuard",
    "GuardedSocket",
    "default_max_connections",
    "guarded_protocol",
    "install_exhaustion_handler",
]

log = logging.getLogger("hostd.provider.http")

#: File descriptors left for everything but connections (the provider's own files, its
#: index, the interpreter's): the default cap is the limit less this.
FD_RESERVE = 64
#: The most connections the default cap allows, whatever the limit.
MAX_DEFAULT_CONNECTIONS = 1024

_EXHAUSTED = frozenset({errno.EMFILE, errno.ENFILE, errno.ENOBUFS, errno.ENOMEM})

# A connection's state: no complete request yet, a request being served, kept alive.
_NEW, _BUSY, _IDLE = "new", "busy", "idle"


def default_max_connections() -> int:
    """The soft ``RLIMIT_NOFILE`` less ``FD_RESERVE``, at least 8, at most 1024."""
    soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft == resource.RLIM_INFINITY:
        return MAX_DEFAULT_CONNECTIONS
    return max(8, min(MAX_DEFAULT_CONNECTIONS, soft - FD_RESERVE))


class _Entry:
    __slots__ = ("since", "sock", "state")

    def __init__(self, sock: socket.socket, since: float) -> None:
        self.sock = sock
        self.since = since
        self.state = _NEW


def _shut(sock: socket.socket) -> None:
    """End a connection from below its transport: the peer sees the end, and the
    transport reads an end of file and closes, freeing the descriptor."""
    try:
        sock.shutdown(socket.SHUT_RDWR)
    except OSError:  # already gone
        pass


class ConnectionGuard:
    """The accepted connections of one listener, by file descriptor (see the module)."""

    def __init__(
        self,
        *,
        max_connections: int | None = None,
        request_timeout_s: float = 10.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if request_timeout_s <= 0:
            raise ValueError("request_timeout_s must be positive")
        self.max_connections = max_connections or default_max_connections()
        if self.max_connections < 1:
            raise ValueError("max_connections must be at least 1")
        self.request_timeout_s = request_timeout_s
        self._clock = clock
        self._open: dict[int, _Entry] = {}
        #: Connections ended by the deadline, evicted for a newcomer, refused at the cap.
        self.expired = 0
        self.evicted = 0
        self.refused = 0

    def __repr__(self) -> str:
        return (
            f"<ConnectionGuard open={len(self._open)}/{self.max_connections} "
            f"expired={self.expired} evicted={self.evicted} refused={self.refused}>"
        )

    @property
    def open(self) -> int:
        self._purge()
        return len(self._open)

    def _purge(self) -> None:
        for fd in [fd for fd, e in self._open.items() if e.sock.fileno() != fd]:
            del self._open[fd]  # closed by its transport (its descriptor may be reused)

    def admit(self, sock: socket.socket) -> bool:
        """Whether ``sock``, just accepted, may stay; at the cap the connection idle the
        longest makes room for it, and with none idle it is refused (the caller closes
        it)."""
        self._purge()
        if len(self._open) >= self.max_connections:
            idle = [e for e in self._open.values() if e.state != _BUSY]
            if not idle:
                self.refused += 1
                return False
            oldest = min(idle, key=lambda e: e.since)
            del self._open[oldest.sock.fileno()]
            _shut(oldest.sock)
            self.evicted += 1
        self._open[sock.fileno()] = _Entry(sock, self._clock())
        return True

    def _mark(self, fd: int, state: str) -> None:
        entry = self._open.get(fd)
        if entry is not None:
            entry.state = state
            entry.since = self._clock()

    def request_started(self, fd: int) -> None:
        """The connection's request head is complete: it is served, never evicted."""
        self._mark(fd, _BUSY)

    def response_done(self, fd: int) -> None:
        """Its response is sent: kept alive, it has the deadline again for the next."""
        self._mark(fd, _IDLE)

    def sweep(self) -> int:
        """Shut down every connection past its request deadline; how many."""
        self._purge()
        limit = self._clock() - self.request_timeout_s
        late = [e for e in self._open.values() if e.state != _BUSY and e.since <= limit]
        for entry in late:
            del self._open[entry.sock.fileno()]
            _shut(entry.sock)
        self.expired += len(late)
        return len(late)

    async def run_sweeps(self) -> None:
        """Sweep a few times per deadline, until cancelled."""
        interval = min(1.0, self.request_timeout_s / 4)
        while True:
            await anyio.sleep(interval)
            self.sweep()


class GuardedSocket(socket.socket):
    """A listening socket whose ``accept`` admits through ``guard``: a connection past
    the cap is closed at once and the next one taken (asyncio's server accepts here)."""

    guard: ConnectionGuard

    @classmethod
    def listen_on(
        cls, family: int, host: str, port: int, guard: ConnectionGuard, backlog: int = 128
    ) -> GuardedSocket:
        # IPPROTO_TCP named, not 0: asyncio sets TCP_NODELAY only on sockets whose proto says
        # TCP, and without it a reply written as headers then body waits out a delayed ACK.
        sock = cls(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
        sock.guard = guard
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((host, port))
        sock.listen(backlog)
        return sock

    def accept(self) -> tuple[socket.socket, Any]:
        while True:
            conn, addr = super().accept()  # BlockingIOError when none is waiting
            if self.guard.admit(conn):
                return conn, addr
            conn.close()


def _fd_of(transport: Any) -> int:
    sock = transport.get_extra_info("socket") if transport is not None else None
    return sock.fileno() if sock is not None else -1


def guarded_protocol(base: type[Any], guard: ConnectionGuard) -> type[Any]:
    """``base`` (uvicorn's ``H11Protocol`` or a subclass) telling ``guard`` when each
    request head is complete and each response sent."""

    class Guarded(base):  # type: ignore[misc]  # a base class chosen at run time
        def handle_events(self) -> None:
            super().handle_events()
            cycle = getattr(self, "cycle", None)
            if cycle is not None and not cycle.response_complete:
                guard.request_started(_fd_of(getattr(self, "transport", None)))

        def on_response_complete(self) -> None:
            guard.response_done(_fd_of(getattr(self, "transport", None)))
            super().on_response_complete()

    Guarded.__name__ = Guarded.__qualname__ = f"Guarded{base.__name__}"
    return Guarded


class _ExhaustionLog:
    """One warning line per interval for a failed ``accept``, with the count since."""

    def __init__(self, interval_s: float, clock: Callable[[], float]) -> None:
        self.interval_s = interval_s
        self.clock = clock
        self.last: float | None = None
        self.unlogged = 0

    def __call__(self, loop: asyncio.AbstractEventLoop, context: dict[str, Any]) -> None:
        exc = context.get("exception")
        if not (isinstance(exc, OSError) and exc.errno in _EXHAUSTED):
            loop.default_exception_handler(context)
            return
        self.unlogged += 1
        now = self.clock()
        if self.last is not None and now - self.last < self.interval_s:
            return
        name = errno.errorcode.get(exc.errno or 0, str(exc.errno))
        log.warning(
            "accept failed: %s (%s), %d time(s) since the last report; retrying each second",
            name,
            exc.strerror,
            self.unlogged,
        )
        self.last, self.unlogged = now, 0


def install_exhaustion_handler(
    loop: asyncio.AbstractEventLoop,
    interval_s: float = 60.0,
    clock: Callable[[], float] = time.monotonic,
) -> Callable[[], None]:
    """Route ``loop``'s resource-exhaustion reports through ``_ExhaustionLog``; returns
    the undo (the previous handler back)."""
    previous = loop.get_exception_handler()
    loop.set_exception_handler(_ExhaustionLog(interval_s, clock))
    return lambda: loop.set_exception_handler(previous)
