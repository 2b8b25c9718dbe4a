"""In-process use of a daemon (the CLI's one-shot commands, ``hostd mcp`` without
``--connect``): a session that calls the client API's methods directly.

No envelope is built and no JSON-RPC library runs: ``call`` validates the params
into the method's model and awaits it (``_api.call_local``, over the direct
dispatcher), in the same request scope as a request off the wire (request id,
counters, ``request.done``). Its errors are the ``RpcError`` a socket client gets,
and its progress notes go straight to the caller's ``on_progress``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from ._api import DaemonState, call_local

__all__ = ["LocalSession"]


class _NoPeer:
    """The connection of an in-process session: nothing to notify, nothing to cancel
    (a caller cancels its own task)."""

    name = "local"
    peer: str | None = None

    async def send(self, obj: Any) -> None:
        return None

    def cancel(self, id_: Any) -> None:
        return None


_PEER = _NoPeer()


class LocalSession:
    """``call(method, params)`` against a daemon's methods without a socket."""

    def __init__(self, daemon: DaemonState) -> None:
        self._daemon = daemon

    async def call(
        self,
        method: str,
        params: Mapping[str, Any] | None = None,
        *,
        on_progress: Callable[[dict[str, Any]], Any] | None = None,
    ) -> Any:
        """``method``'s result; ``RpcError`` as the wire would answer. ``on_progress``
        hears the request's progress notes (``$/progress`` params, as
        ``AsyncClient.call`` hands them on)."""
        return await call_local(self._daemon, _PEER, method, params, on_progress)
