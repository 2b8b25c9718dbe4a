"""One hostd for the life of an adapter: a running daemon's socket, or a private daemon.

A framework retriever is an object an application keeps and calls from sync code,
from its event loop, or both. ``DaemonSession`` owns the client connection behind
it on an event loop of its own (a daemon thread, so it never holds up the
interpreter's exit): ``connect=SOCKET`` opens the daemon's socket on first use and
again after the daemon restarts, waiting up to ``wait`` seconds for a daemon that is
starting (the CLI's ``--wait``, by the client's own wait: ``hostd.client.connect``);
``config=PATH`` spawns ``hostd serve --stdio``
with that config on first use and keeps it (its providers stay warm) until
``close()``, or until the process exits (the child then reads end of input and
stops itself). Sync calls wait on that loop; async calls await it without holding
a thread, and cancelling one cancels the daemon's work (``$/cancel``), or, while the
connection is still opening (waiting for a daemon that is starting), stops that wait
when no other call waits for it.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math
import os
import threading
import weakref
from collections.abc import Mapping
from concurrent.futures import Future
from contextlib import AbstractAsyncContextManager
from functools import partial
from typing import Any

import anyio
import anyio.to_thread
from anyio.from_thread import BlockingPortal

from hostd.client import AsyncClient, ComposeResult, connect, spawn
from hostd.client._loop import start_loop
from hostd.config import DEFAULT_WAIT_S, discover_socket
from hostd.errors import ConfigError, ConnectionLost

__all__ = ["DaemonSession"]

#: How long ``close`` waits for the loop thread once the daemon is stopped.
_JOIN_S = 30.0
#: A call that met these found its connection gone, not an answer.
_GONE = (ConnectionLost, anyio.BrokenResourceError, anyio.ClosedResourceError)


class _Opening:
    """One connection, opened and then held open by one task on the session's loop
    (its context manager is entered and exited in that task, as its task group must
    be). ``client`` is the outcome of the opening: a sync call waits on it, an async
    call awaits it, and ``waiters`` counts both, so the last async call cancelled while
    it still waits for a daemon stops it (``stop``): no connection attempt outlives
    the calls that wanted it."""

    def __init__(
        self, portal: BlockingPortal, opener: AbstractAsyncContextManager[AsyncClient]
    ) -> None:
        self.client: Future[AsyncClient] = Future()
        self.waiters = 0
        self._portal = portal
        self._release: anyio.Event | None = None
        self.task = portal.start_task_soon(self._hold, opener)

    async def _hold(self, opener: AbstractAsyncContextManager[AsyncClient]) -> None:
        self._release = release = anyio.Event()
        try:
            async with opener as client:
                self.client.set_result(client)
                await release.wait()
        except anyio.get_cancelled_exc_class():
            self.client.cancel()  # stopped while it opened (a no-op once it had)
            raise
        except BaseException as exc:
            if not self.client.done():  # it never opened: every waiter is told why
                self.client.set_exception(exc)
            raise

    def ended(self) -> bool:
        """Whether it failed to open, or the connection it opened has closed."""
        client = self.client
        return client.done() and (
            client.cancelled() or client.exception() is not None or client.result().closed
        )

    def stop(self) -> None:
        """Cancel its task: an opening stops waiting, an open connection closes."""
        self.task.cancel()

    def close(self) -> None:
        """Close the connection (a spawned daemon drains and exits) and wait until it is."""
        release = self._release
        if release is None or not self.client.done():
            self.stop()
        else:
            with contextlib.suppress(Exception):  # the loop is stopping: it ends the task
                self._portal.call(release.set)
        with contextlib.suppress(Exception):  # the daemon is gone or going: no news
            self.task.result(_JOIN_S)


class _Loop:
    """The loop thread and the connection on it; closed by ``close`` or at GC."""

    def __init__(self) -> None:
        self.portal, self.thread = start_loop("hostd-adapter")
        self.opening: _Opening | None = None

    @property
    def client(self) -> AsyncClient | None:
        """The open connection, if there is one."""
        opening = self.opening
        if opening is None or not opening.client.done() or opening.ended():
            return None
        return opening.client.result()

    def drop_client(self) -> None:
        opening, self.opening = self.opening, None
        if opening is not None:
            opening.close()

    def close(self) -> None:
        self.drop_client()
        with contextlib.suppress(Exception):
            self.portal.call(self.portal.stop, True)
        self.thread.join(_JOIN_S)


def _discovered_socket() -> str:
    """The socket ``connect()`` with no argument tried: the discovered config's."""
    try:
        return str(discover_socket())
    except ConfigError:
        return "the socket of the config discovery finds (`hostd config path`)"


class DaemonSession:
    """``compose`` and ``acompose`` against one hostd (``connect`` xor ``config``).

    ``spawn_options`` go to ``hostd.client.spawn`` (``env``, ``cwd``, ``stderr``,
    ``grace_s``) when a daemon is spawned from ``config``. ``wait``: how long opening
    the socket waits for a daemon that is starting, said once on ``log`` (info) when a
    wait begins.
    """

    def __init__(
        self,
        *,
        connect: str | os.PathLike[str] | None = None,
        config: str | os.PathLike[str] | None = None,
        spawn_options: Mapping[str, Any] | None = None,
        wait: float = DEFAULT_WAIT_S,
        log: logging.Logger | None = None,
    ) -> None:
        if connect is not None and config is not None:
            raise ValueError("give connect (a daemon's socket) or config (spawn one), not both")
        if isinstance(wait, bool) or not isinstance(wait, int | float):
            raise TypeError(f"wait must be a number of seconds, not {type(wait).__name__}")
        if not math.isfinite(wait) or wait < 0:
            raise ValueError(f"wait must be a finite number of seconds >= 0, got {wait!r}")
        self._connect = connect
        self._config = config
        self._spawn_options = dict(spawn_options or {})
        self._wait = float(wait)
        self._log = log if log is not None else logging.getLogger(__name__)
        self._waited = False
        self._lock = threading.Lock()
        self._loop: _Loop | None = None
        self._finalizer: weakref.finalize[Any, Any] | None = None

    def _opener(self) -> contextlib.AbstractAsyncContextManager[AsyncClient]:
        if self._config is not None:
            return spawn(self._config, **self._spawn_options)
        self._waited = False
        return connect(self._connect, wait=self._wait, on_wait=self._waiting)

    def _waiting(self, socket: os.PathLike[str], wait: float) -> None:
        self._waited = True
        self._log.info("waiting up to %g s for a hostd daemon at %s", wait, socket)

    def _begin(self) -> tuple[BlockingPortal, _Opening, bool]:
        """The connection, open or still opening (calls that come while it opens share
        it), a new one when there is none or it has ended; and whether this call waits
        for it to open. The caller is one of its ``waiters`` until ``_done_waiting``."""
        with self._lock:
            if self._loop is None:
                self._loop = _Loop()
                self._finalizer = weakref.finalize(self, self._loop.close)
            loop = self._loop
            opening = loop.opening
            if opening is None or opening.ended():
                loop.drop_client()
                opening = loop.opening = _Opening(loop.portal, self._opener())
            opening.waiters += 1
            return loop.portal, opening, not opening.client.done()

    def _done_waiting(self, opening: _Opening, *, cancelled: bool = False) -> bool:
        """This call no longer waits for ``opening``. A ``cancelled`` call that was its
        last waiter while it still opens stops it; True when it did."""
        with self._lock:
            opening.waiters -= 1
            if not cancelled or opening.waiters or opening.client.done():
                return False
            if self._loop is not None and self._loop.opening is opening:
                self._loop.opening = None
            opening.stop()
            return True

    def _unreachable(self, exc: OSError) -> ConnectionError:
        where = (
            f"could not start hostd with config {self._config}"
            if self._config is not None
            else f"no hostd answers at {self._connect or _discovered_socket()}"
            " (start one with `hostd serve`)"
        )
        waited = f"; waited {self._wait:g} s" if self._waited else ""
        return ConnectionError(f"{where}: {exc.strerror or exc}{waited}")

    def _client(self) -> tuple[BlockingPortal, AsyncClient, bool]:
        """The open connection, opened (again) when there is none or it has ended; and
        whether it was opened for this call. Blocks while it opens."""
        portal, opening, fresh = self._begin()
        try:
            return portal, opening.client.result(), fresh
        except OSError as exc:
            raise self._unreachable(exc) from exc
        finally:
            self._done_waiting(opening)

    async def _aclient(self) -> tuple[BlockingPortal, AsyncClient, bool]:
        """``_client`` for an async call: the opening is awaited, not waited for in a
        thread, so cancelling the call returns at once; the last call to give up on an
        opening stops it, and is told only once its task has ended."""
        begun: list[tuple[BlockingPortal, _Opening, bool]] = []
        try:
            await anyio.to_thread.run_sync(lambda: begun.append(self._begin()))
            portal, opening, fresh = begun[0]
            client = await asyncio.shield(asyncio.wrap_future(opening.client))
        except asyncio.CancelledError:
            # Cancelled while the worker thread began (it ran on: this call is counted)
            # or while the connection opened.
            if begun and self._done_waiting(begun[0][1], cancelled=True):
                await asyncio.wait([asyncio.wrap_future(begun[0][1].task)])
            raise
        except OSError as exc:
            self._done_waiting(opening)
            raise self._unreachable(exc) from exc
        self._done_waiting(opening)
        return portal, client, fresh

    def _forget(self, client: AsyncClient) -> None:
        """``client``'s connection is gone: the next call opens a new one."""
        with self._lock:
            if self._loop is not None and self._loop.client is client:
                self._loop.drop_client()

    def compose(self, goal: str, params: Mapping[str, Any]) -> ComposeResult:
        """``context/compose`` from sync code (not from this session's own loop).

        A call that finds a kept connection gone (the daemon restarted since the last
        call, and the end of its connection is not yet read) is sent once more on a new
        one; a new connection that fails is the caller's error."""
        while True:
            portal, client, fresh = self._client()
            try:
                result = portal.call(partial(client.compose, goal, **params))
            except _GONE:
                if fresh:
                    raise
                self._forget(client)
                continue
            return result

    async def acompose(self, goal: str, params: Mapping[str, Any]) -> ComposeResult:
        """``context/compose`` from an asyncio loop; cancelling it cancels the request.
        A kept connection found gone is replaced once, as in ``compose``."""
        while True:
            portal, client, fresh = await self._aclient()
            try:
                call = partial(client.compose, goal, **params)
                result = await asyncio.wrap_future(portal.start_task_soon(call))
                return result
            except _GONE:
                if fresh:
                    raise
                self._forget(client)

    def close(self) -> None:
        """Close the connection (a spawned daemon drains and exits) and stop the loop."""
        with self._lock:
            if self._finalizer is not None:
                self._finalizer()  # runs _Loop.close once, and never again at GC
            self._loop = None
            self._finalizer = None
