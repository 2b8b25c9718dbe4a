"""``Client``: a small blocking wrapper over ``AsyncClient``, for scripts and for programs
that keep one connection for their whole life.

It runs the async client on its own event loop thread (an anyio blocking portal)
and returns what the async client returns: ``compose`` a ``ComposeResult``. It is
open from the moment ``connect``/``connect_tcp``/``spawn`` returns: use it in a
``with`` block, or keep it and call ``close()``.

A client never keeps its program from ending: its loop thread is a daemon thread (a
plain blocking portal's worker thread is joined at exit, and its loop never ends by
itself, so a script that crashed before ``close()`` hung for ever), and every client
still open when the interpreter exits is closed then (``_close_open``), so a spawned
daemon is stopped as ``close()`` stops it.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import weakref
from collections.abc import Awaitable, Callable, Iterator, Mapping, Sequence
from contextlib import AbstractAsyncContextManager
from types import TracebackType
from typing import Any, Self

import anyio
from anyio.from_thread import BlockingPortal
from typing_extensions import Unpack

from hostd.errors import CallTimeout, ConnectionLost

from ._async import (
    AsyncClient,
    ComposeOptions,
    ProgressCallback,
    Used,
    _seconds,
    connect,
    connect_tcp,
    spawn,
)
from ._loop import start_loop
from ._results import ComposeResult, Forgotten, Reloaded, Remembered

__all__ = ["Client"]

Opener = Callable[[], AbstractAsyncContextManager[AsyncClient]]

#: The clients not closed yet: closed at interpreter exit (``_close_open``).
_OPEN: weakref.WeakSet[Client] = weakref.WeakSet()


@contextlib.contextmanager
def _portal() -> Iterator[BlockingPortal]:
    """A blocking portal on a loop in a daemon thread (``start_loop``), stopped on exit."""
    portal, thread = start_loop("hostd-client-loop")
    try:
        yield portal
    finally:
        with contextlib.suppress(RuntimeError):  # a loop already gone: nothing to stop
            portal.call(portal.stop, True)
        thread.join()


def _close_open() -> None:
    """Close every client still open as the interpreter exits (a spawned daemon is
    stopped, a connection ended as ``close()`` ends it)."""
    for client in list(_OPEN):
        with contextlib.suppress(Exception):
            client.close()


atexit.register(_close_open)


class Client:
    """A blocking client of one daemon (it runs its own event loop thread).

    Made by ``Client.connect``, ``Client.connect_tcp`` or ``Client.spawn``, open when
    they return; ``close()`` (or leaving its ``with`` block) ends it. A socket client
    whose daemon went away and came back reconnects on the next call (``reconnect``):
    only a call made on a connection already ended is sent again on a new one, so no
    request is ever sent twice; one in flight when the daemon goes raises
    ``ConnectionLost``.
    """

    def __init__(self, opener: Opener, *, reconnect: bool = False) -> None:
        """Open ``opener()``'s connection now (the classmethods are the way in)."""
        self._opener = opener
        self._reconnect = reconnect
        self._stack = contextlib.ExitStack()
        self._connection = contextlib.ExitStack()
        try:
            self._portal = self._stack.enter_context(_portal())
            self._client = self._open()
        except BaseException:
            self._stack.close()
            raise
        self._stack.push(self._connection)  # closed first: the connection, then the loop
        self._closed = False
        _OPEN.add(self)

    def _open(self) -> AsyncClient:
        opened = self._portal.wrap_async_context_manager(self._opener())
        client: AsyncClient = self._connection.enter_context(opened)
        return client

    @classmethod
    def connect(
        cls,
        path: str | os.PathLike[str] | None = None,
        *,
        config: str | os.PathLike[str] | None = None,
        reconnect: bool = True,
        wait: float = 0.0,
    ) -> Client:
        """``connect`` (its socket discovery too), blocking; ``NoDaemon`` when nothing
        listens there. ``wait``: seconds to wait for a daemon that is starting, here and
        at each reconnect (a restart's gap)."""
        _seconds(wait, "wait", zero=True)
        return cls(lambda: connect(path, config=config, wait=wait), reconnect=reconnect)

    @classmethod
    def connect_tcp(
        cls, host: str, port: int, token: str, *, reconnect: bool = True, wait: float = 0.0
    ) -> Client:
        """``connect_tcp``, blocking; ``NoDaemon`` when nothing listens there, ``RpcError``
        (``unauthorized``) for a wrong token. ``wait``: seconds to wait for a daemon that is
        starting, here and at each reconnect (a restart's gap)."""
        _seconds(wait, "wait", zero=True)
        return cls(lambda: connect_tcp(host, port, token, wait=wait), reconnect=reconnect)

    @classmethod
    def spawn(cls, config: str | os.PathLike[str] | None = None, **kwargs: Any) -> Client:
        """Start ``hostd serve --stdio`` as a child with ``config`` and talk to it; stop it
        on ``close()``. ``kwargs`` are ``hostd.client.spawn``'s: ``stderr`` (the daemon's
        log; inherited unless given), ``log_level`` (``warning`` while the log shares your
        stderr; ``None`` keeps the config's), ``env``, ``cwd``, ``command``, ``grace_s``.
        A daemon that died is not started again: its calls raise ``ConnectionLost``."""
        return cls(lambda: spawn(config, **kwargs))

    # -- life -----------------------------------------------------------------------------

    @property
    def closed(self) -> bool:
        """True after ``close()``, or once the connection ended and will not be reopened."""
        return self._closed or (self._client.closed and not self._reconnect)

    @property
    def connected(self) -> bool:
        """True while the connection is up (one that ended may be reopened by the next
        call: ``reconnect``)."""
        return not self._closed and not self._client.closed

    def close(self) -> None:
        """End the connection (a spawned daemon is stopped) and the loop thread. Again: no-op."""
        if not self._closed:
            self._closed = True
            _OPEN.discard(self)
            self._stack.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def _run(
        self,
        fn: Callable[[AsyncClient], Awaitable[Any]],
        timeout: float | None = None,
        method: str = "",
    ) -> Any:
        if self._closed:
            raise ConnectionLost("this client is closed")
        if self._client.closed and self._reconnect:
            self._connection.close()  # the ended connection's reader and socket
            self._client = self._open()  # NoDaemon while the daemon is not back
        if timeout is None:
            return self._portal.call(fn, self._client)
        seconds = _seconds(timeout, "timeout")  # before any call is made
        return self._portal.call(_within, seconds, method, fn, self._client)

    # -- the API (AsyncClient's, blocking) ------------------------------------------------

    def call(
        self, method: str, params: dict[str, Any] | None = None, *, timeout: float | None = None
    ) -> Any:
        """Call ``method``; its result, or ``RpcError``. With ``timeout`` (seconds) and no
        answer by then, the call is cancelled in the daemon and ``CallTimeout`` raised."""
        return self._run(lambda c: c.call(method, params), timeout, method)

    def compose(
        self,
        goal: str,
        *,
        budget: int | None = None,
        include_content: bool = True,
        timeout: float | None = None,
        on_progress: ProgressCallback | None = None,
        **options: Unpack[ComposeOptions],
    ) -> ComposeResult:
        """``context/compose`` (``AsyncClient.compose``): a ``ComposeResult``. ``timeout``
        is this client's wait in seconds (``call``); ``timeout_ms``, among ``options``,
        the daemon's deadline for the providers' legs. ``on_progress`` is called with each
        ``$/progress`` of the request, on the client's loop thread."""
        result: ComposeResult = self._run(
            lambda c: c.compose(
                goal,
                budget=budget,
                include_content=include_content,
                on_progress=on_progress,
                **options,
            ),
            timeout,
            "context/compose",
        )
        return result

    def query(
        self, goal: str, *, budget: int | None = None, timeout: float | None = None, **options: Any
    ) -> Any:
        return self._run(
            lambda c: c.query(goal, budget=budget, **options), timeout, "context/query"
        )

    def providers(self) -> list[dict[str, Any]]:
        result: list[dict[str, Any]] = self._run(lambda c: c.providers())
        return result

    def consent_grant(self, provider: str, scope: str, grantor: str = "client") -> Any:
        return self._run(lambda c: c.consent_grant(provider, scope, grantor))

    def consent_revoke(self, provider: str, scope: str, grantor: str = "client") -> Any:
        return self._run(lambda c: c.consent_revoke(provider, scope, grantor))

    def consent_list(self, provider: str | None = None) -> list[dict[str, Any]]:
        result: list[dict[str, Any]] = self._run(lambda c: c.consent_list(provider))
        return result

    def usage(self, request_id: str) -> Any:
        return self._run(lambda c: c.usage(request_id))

    def feedback(
        self,
        result: ComposeResult | Mapping[str, Any] | str,
        used: Sequence[Used],
        *,
        helpful: bool | None = None,
        note: str | None = None,
    ) -> dict[str, Any]:
        reply: dict[str, Any] = self._run(
            lambda c: c.feedback(result, used, helpful=helpful, note=note)
        )
        return reply

    def remember(
        self,
        content: str,
        *,
        title: str,
        kind: str = "fact",
        valid_from: str | None = None,
        valid_to: str | None = None,
        supersedes: str | None = None,
        provider: str | None = None,
        timeout_ms: int | None = None,
    ) -> Remembered:
        """``memory/remember`` (``AsyncClient.remember``): the committed entry."""
        result: Remembered = self._run(
            lambda c: c.remember(
                content,
                title=title,
                kind=kind,
                valid_from=valid_from,
                valid_to=valid_to,
                supersedes=supersedes,
                provider=provider,
                timeout_ms=timeout_ms,
            )
        )
        return result

    def forget(
        self,
        id: str,  # noqa: A002 - the wire name
        *,
        provider: str | None = None,
        timeout_ms: int | None = None,
    ) -> Forgotten:
        """``memory/forget`` (``AsyncClient.forget``): the deleted entry's id."""
        result: Forgotten = self._run(
            lambda c: c.forget(id, provider=provider, timeout_ms=timeout_ms)
        )
        return result

    def status(self) -> dict[str, Any]:
        result: dict[str, Any] = self._run(lambda c: c.status())
        return result

    def reload(self) -> Reloaded:
        """``host/reload`` (``AsyncClient.reload``): what the reload changed."""
        result: Reloaded = self._run(lambda c: c.reload())
        return result

    def shutdown(self) -> Any:
        return self._run(lambda c: c.shutdown())


async def _within(
    seconds: float,
    method: str,
    fn: Callable[[AsyncClient], Awaitable[Any]],
    client: AsyncClient,
) -> Any:
    """``fn(client)``'s result, or ``CallTimeout`` once ``seconds`` have passed: the
    cancel reaches the call, which sends ``$/cancel`` so the daemon drops the work."""
    with anyio.move_on_after(seconds):
        return await fn(client)
    raise CallTimeout(
        f"hostd did not answer {method} within {seconds:g} s; the call was cancelled",
        method=method,
        timeout_s=seconds,
    )
