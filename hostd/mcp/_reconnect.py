"""``hostd mcp --connect``: a client API session that outlives its daemon's restarts.

The MCP client keeps ``hostd mcp`` for its whole session, while the daemon behind
the socket may be restarted. Each call runs on the current connection; a
connection the daemon closed is replaced by a new one at the next call, so the
first call after a restart succeeds. While nothing answers at the socket a call
fails with the opener's error (the CLI's ``no_daemon``, naming the socket), which
the tools turn into an ``isError`` result, never a dead server.

The opener waits for a daemon (``--wait``) unless the socket is as the last failed
open found it: the same file refused again, or still no file. So a daemon lost
(stopping, crashed, restarting: ``hostd stop && hostd serve`` removes the socket before
the new one binds it) is waited for once per change at the socket, whichever way it
went; one that stays down costs the MCP client a wait per change, not one per tool
call; and a socket that was not there when ``hostd mcp`` began (no daemon started) is
no reason to wait: the first call says so at once.

Connections are opened by ``open_session`` (the CLI passes ``hostd.client.connect``
for the socket: this package never imports the client library) and each is held
open by its own task in one task group, so it is entered and left in one task.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass
from typing import Any, Protocol

import anyio
from anyio.abc import TaskGroup, TaskStatus

from hostd._log import get_logger
from hostd.errors import ConnectionLost

__all__ = ["Reconnecting", "Session", "reconnecting"]

log = get_logger("hostd.mcp")


class Session(Protocol):
    """A connection's client API session (``hostd.client.AsyncClient``)."""

    @property
    def closed(self) -> bool: ...

    async def call(
        self, method: str, params: dict[str, Any] | None = None, *, on_progress: Any = None
    ) -> Any: ...


#: Opens a connection; its argument says whether to wait for a daemon that is starting.
Opener = Callable[[bool], AbstractAsyncContextManager[Session]]

# A write to a connection the daemon has closed: the request never left.
_UNSENT = (anyio.BrokenResourceError, anyio.ClosedResourceError, BrokenPipeError)

#: What is at the socket's path: its file's (device, inode), or None for no file.
Seen = tuple[int, int] | None


def socket_seen(where: str) -> Seen:
    """The file at ``where`` as ``Seen``; one that cannot be looked at is "no file"."""
    try:
        st = os.lstat(where)
    except OSError:
        return None
    return (st.st_dev, st.st_ino)


@dataclass(frozen=True, slots=True)
class Nobody:
    """An open that found no daemon, by what it saw at the socket before it tried."""

    at: Seen


def waits(last: Nobody | None, now: Seen) -> bool:
    """Whether an open waits for a daemon: ``last`` is the last open's failure (None: it
    succeeded), ``now`` what is at the socket. A change since (a file removed, bound
    anew) is a daemon stopping or starting, worth a wait; the same state again is a
    daemon still down, or never started, told at once."""
    return last is None or last.at != now


class _Link:
    __slots__ = ("session", "stop")

    def __init__(self) -> None:
        self.session: Session | None = None
        self.stop = anyio.Event()


class Reconnecting:
    """A ``Backend`` over whichever connection to the daemon is current."""

    def __init__(self, open_session: Opener, tg: TaskGroup, where: str) -> None:
        self._open = open_session
        self._tg = tg
        self._where = where
        self._lock = anyio.Lock()
        self._link: _Link | None = None
        self.connects = 0
        #: The last open's failure (``waits``), None after one that succeeded. At first
        #: "no file": a socket missing when ``hostd mcp`` begins is a daemon never
        #: started there, not one restarting.
        self.nobody: Nobody | None = Nobody(None)

    async def call(
        self, method: str, params: dict[str, Any] | None = None, *, on_progress: Any = None
    ) -> Any:
        for attempt in (1, 2):
            link = await self._current()
            assert link.session is not None  # set before the link is published
            try:
                return await link.session.call(method, params, on_progress=on_progress)
            except _UNSENT as exc:
                # The daemon went away before the request was written: nothing of it ran
                # there, so it goes once more on a new connection.
                self._drop(link)
                if attempt == 2:
                    raise self._lost() from exc
            except ConnectionLost as exc:
                # Sent, then the connection ended: it may have run, so it is not repeated.
                self._drop(link)
                raise self._lost() from exc
        raise AssertionError("unreachable")  # pragma: no cover

    def _lost(self) -> ConnectionLost:
        return ConnectionLost(
            f"the daemon at {self._where} closed the connection before answering; "
            "the next call connects again"
        )

    async def _current(self) -> _Link:
        async with self._lock:
            link = self._link
            if link is not None and link.session is not None and not link.session.closed:
                return link
            if link is not None:
                self._drop(link)
            link = _Link()
            seen = await anyio.to_thread.run_sync(socket_seen, self._where)
            try:
                await self._tg.start(self._hold, link, waits(self.nobody, seen))
            except Exception:  # the opener's error, raised to the call
                # As this open found it: a change during its wait (a stopping daemon's
                # socket removed) is a change still, waited for by the next call.
                self.nobody = Nobody(seen)
                raise
            self.nobody = None
            self._link = link
            self.connects += 1
            if self.connects > 1:
                log.info("mcp.reconnected", socket=self._where, connects=self.connects)
            return link

    async def _hold(self, link: _Link, patient: bool, *, task_status: TaskStatus[None]) -> None:
        opened = False
        try:
            async with self._open(patient) as session:
                link.session = session
                opened = True
                task_status.started()
                await link.stop.wait()
        except Exception as exc:
            if not opened:
                raise  # to ``_current``'s caller, through ``start``
            # The connection's own end (its reader failed): the link is dropped at the
            # next call; nothing here may take the server down.
            log.info("mcp.connection.ended", socket=self._where, error=type(exc).__name__)

    def _drop(self, link: _Link) -> None:
        link.stop.set()
        if self._link is link:
            self._link = None

    def close(self) -> None:
        if self._link is not None:
            self._drop(self._link)


@contextlib.asynccontextmanager
async def reconnecting(open_session: Opener, where: str) -> AsyncIterator[Reconnecting]:
    """A ``Reconnecting`` session for the block; its connection is closed at the end.
    Nothing is opened until the first call."""
    async with anyio.create_task_group() as tg:
        backend = Reconnecting(open_session, tg, where)
        try:
            yield backend
        finally:
            backend.close()
