"""In-process use of a daemon (the CLI's one-shot commands, ``hostd mcp`` without
``--connect``): a session that dispatches to the daemon's methods without a socket.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from hostd.errors import RpcError

from ._api import DaemonState, dispatch_one

__all__ = ["LocalSession"]


class _NullConnection:
    """The connection of an in-process session: ``$/progress`` goes to the caller's
    ``on_progress`` (as ``AsyncClient.call`` routes it), other notifications nowhere."""

    name = "local"

    def __init__(self, on_progress: Callable[[dict[str, Any]], Any] | None = None) -> None:
        self._on_progress = on_progress

    async def send(self, obj: Any) -> None:
        if self._on_progress is not None and obj.get("method") == "$/progress":
            self._on_progress(obj.get("params") or {})

    def cancel(self, id_: Any) -> None:
        return None


class LocalSession:
    """``call(method, params)`` against a daemon's methods without a socket."""

    def __init__(self, daemon: DaemonState) -> None:
        self._daemon = daemon

    async def call(
        self,
        method: str,
        params: dict[str, Any] | None = None,
        *,
        on_progress: Callable[[dict[str, Any]], Any] | None = None,
    ) -> Any:
        params = dict(params or {})
        if on_progress is not None:
            params["progress_token"] = "local"
        msg = {"jsonrpc": "2.0", "id": 1, "method": method, "params": params}
        reply = await dispatch_one(self._daemon, _NullConnection(on_progress), msg)
        if "error" in reply:
            err = reply["error"]
            raise RpcError(err.get("code", 0), err.get("message", ""), err.get("data"))
        return reply.get("result")
