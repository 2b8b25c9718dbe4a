"""``Client``: a small blocking wrapper over ``AsyncClient``, for scripts.

It runs the async client on its own event loop thread (an anyio blocking portal)
and returns what the async client returns: ``compose`` a ``ComposeResult``.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Awaitable, Callable, Iterator, Mapping, Sequence
from typing import Any

from anyio.from_thread import BlockingPortal, start_blocking_portal

from ._async import AsyncClient, Used, connect, connect_tcp, spawn
from ._results import ComposeResult

__all__ = ["Client"]


class Client:
    """A blocking wrapper over ``AsyncClient`` (it runs its own event loop thread)."""

    def __init__(self, portal: BlockingPortal, client: AsyncClient) -> None:
        self._portal = portal
        self._client = client

    @classmethod
    @contextlib.contextmanager
    def connect(
        cls,
        path: str | os.PathLike[str] | None = None,
        *,
        config: str | os.PathLike[str] | None = None,
    ) -> Iterator[Client]:
        """``connect`` (its socket discovery too), blocking."""
        with (
            start_blocking_portal(backend="asyncio") as portal,
            portal.wrap_async_context_manager(connect(path, config=config)) as client,
        ):
            yield cls(portal, client)

    @classmethod
    @contextlib.contextmanager
    def connect_tcp(cls, host: str, port: int, token: str) -> Iterator[Client]:
        with (
            start_blocking_portal(backend="asyncio") as portal,
            portal.wrap_async_context_manager(connect_tcp(host, port, token)) as client,
        ):
            yield cls(portal, client)

    @classmethod
    @contextlib.contextmanager
    def spawn(cls, config: str | os.PathLike[str] | None = None, **kwargs: Any) -> Iterator[Client]:
        """Start ``hostd serve --stdio`` as a child with ``config`` and talk to it; stop it
        on exit. ``kwargs`` are ``hostd.client.spawn``'s: ``stderr`` (the daemon's log;
        inherited unless given), ``log_level`` (``warning`` while the log shares your
        stderr; ``None`` keeps the config's), ``env``, ``cwd``, ``command``, ``grace_s``."""
        with (
            start_blocking_portal(backend="asyncio") as portal,
            portal.wrap_async_context_manager(spawn(config, **kwargs)) as client,
        ):
            yield cls(portal, client)

    def _run(self, fn: Callable[..., Awaitable[Any]], *args: Any, **kwargs: Any) -> Any:
        return self._portal.call(lambda: fn(*args, **kwargs))

    def call(self, method: str, params: dict[str, Any] | None = None) -> Any:
        return self._run(self._client.call, method, params)

    def compose(
        self, goal: str, *, budget: int | None = None, include_content: bool = True, **params: Any
    ) -> ComposeResult:
        """``context/compose`` (``AsyncClient.compose``): a ``ComposeResult``."""
        result: ComposeResult = self._run(
            self._client.compose, goal, budget=budget, include_content=include_content, **params
        )
        return result

    def query(self, goal: str, *, budget: int | None = None, **params: Any) -> Any:
        return self._run(self._client.query, goal, budget=budget, **params)

    def providers(self) -> list[dict[str, Any]]:
        result: list[dict[str, Any]] = self._run(self._client.providers)
        return result

    def consent_grant(self, provider: str, scope: str, grantor: str = "client") -> Any:
        return self._run(self._client.consent_grant, provider, scope, grantor)

    def consent_revoke(self, provider: str, scope: str, grantor: str = "client") -> Any:
        return self._run(self._client.consent_revoke, provider, scope, grantor)

    def consent_list(self, provider: str | None = None) -> list[dict[str, Any]]:
        result: list[dict[str, Any]] = self._run(self._client.consent_list, provider)
        return result

    def usage(self, request_id: str) -> Any:
        return self._run(self._client.usage, request_id)

    def feedback(
        self,
        result: ComposeResult | Mapping[str, Any] | str,
        used: Sequence[Used],
        *,
        helpful: bool | None = None,
        note: str | None = None,
    ) -> dict[str, Any]:
        reply: dict[str, Any] = self._run(
            self._client.feedback, result, used, helpful=helpful, note=note
        )
        return reply

    def status(self) -> dict[str, Any]:
        result: dict[str, Any] = self._run(self._client.status)
        return result

    def shutdown(self) -> Any:
        return self._run(self._client.shutdown)
