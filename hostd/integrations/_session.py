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
a thread, and cancelling one cancels the daemon's work (``$/cancel``).
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
from contextlib import AbstractContextManager
from functools import partial
from typing import Any

import anyio
import anyio.to_thread
from anyio.from_thread import BlockingPortal

from hostd.client import AsyncClient, ComposeResult, connect, spawn
from hostd.config import DEFAULT_WAIT_S, discover_socket
from hostd.errors import ConfigError, ConnectionLost

__all__ = ["DaemonSession"]

#: How long ``close`` waits for the loop thread once the daemon is stopped.
_JOIN_S = 30.0
#: A call that met these found its connection gone, not an answer.
_GONE = (ConnectionLost, anyio.BrokenResourceError, anyio.ClosedResourceError)


def _start_loop() -> tuple[BlockingPortal, threading.Thread]:
    started: Future[BlockingPortal] = Future()

    async def serve() -> None:
        async with BlockingPortal() as portal:
            started.set_result(portal)
            await portal.sleep_until_stopped()

    def run() -> None:
        try:
            anyio.run(serve, backend="asyncio")
        except BaseException as exc:  # handed to the thread that waits for the portal
            if not started.done():
                started.set_exception(exc)

    thread = threading.Thread(target=run, name="hostd-adapter", daemon=True)
    thread.start()
    return started.result(), thread


class _Loop:
    """The loop thread and the open connection on it; closed by ``close`` or at GC."""

    def __init__(self) -> None:
        self.portal, self.thread = _start_loop()
        self.opened: AbstractContextManager[AsyncClient] | None = None
        self.client: AsyncClient | None = None

    def drop_client(self) -> None:
        opened, self.opened, self.client = self.opened, None, None
        if opened is not None:
            with contextlib.suppress(Exception):  # the daemon is gone or going: no news
                opened.__exit__(None, None, None)

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

    def _client(self) -> tuple[BlockingPortal, AsyncClient, bool]:
        """The open connection, opened (again) when there is none or it has ended; and
        whether it was opened for this call."""
        with self._lock:
            if self._loop is None:
                self._loop = _Loop()
                self._finalizer = weakref.finalize(self, self._loop.close)
            loop = self._loop
            if loop.client is not None and not loop.client.closed:
                return loop.portal, loop.client, False
            loop.drop_client()
            opened = loop.portal.wrap_async_context_manager(self._opener())
            try:
                loop.client = opened.__enter__()
            except OSError as exc:
                where = (
                    f"could not start hostd with config {self._config}"
                    if self._config is not None
                    else f"no hostd answers at {self._connect or _discovered_socket()}"
                    " (start one with `hostd serve`)"
                )
                waited = f"; waited {self._wait:g} s" if self._waited else ""
                raise ConnectionError(f"{where}: {exc.strerror or exc}{waited}") from exc
            loop.opened = opened
            return loop.portal, loop.client, True

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
            portal, client, fresh = await anyio.to_thread.run_sync(self._client)
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
