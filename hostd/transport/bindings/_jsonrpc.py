"""The JSON-RPC 2.0 provider binding, host side (protocol.md §1).

Owns request ids and the correlation table: requests are pipelined to one
provider and replies matched by ``id``. A reply with an unknown or missing id
is a ``correlation_mismatch`` fault of that provider (H4); a line that is not
a JSON-RPC response is a ``protocol_fault``; both end the stream and wake
every waiter with the error. Error replies become ``ProviderError`` with the
CGP code read from ``data.cgp_code`` (unknown or absent → ``internal``, X1/X2).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

import orjson
import structlog
from pydantic import ValidationError

from hostd.errors import (
    CorrelationMismatch,
    HostdError,
    IncompatibleVersion,
    ProtocolFault,
    ProviderError,
)
from hostd.protocol import (
    PROTOCOL_VERSION,
    CgpErrorCode,
    ContextQuery,
    ContextQueryResult,
    FrameIdentity,
    HandshakeAck,
    HostInfo,
    VerifyResponse,
    WireModel,
    read_cgp_code,
)
from hostd.rpc import encode_line, make_notification, make_request

from ..process._client import StartedCall, StreamClient, query_wire
from ._unquoted import bad_line, described_id, json_type, shape_error, unquoted

__all__ = ["JsonRpcClient", "provider_error", "validate_reply"]

log = structlog.get_logger("hostd.transport")

M = TypeVar("M", bound=WireModel)


def _request_line(method: str, params: dict[str, Any], key: int) -> bytes:
    """One JSON-RPC request, encoded as its line."""
    return encode_line(make_request(method, params, key))


def _query_result(result: Any) -> ContextQueryResult:
    return validate_reply(ContextQueryResult, result, "query result")


def validate_reply(model: type[M], data: Any, what: str) -> M:
    """A reply's body as its wire model; a bad shape is the provider's protocol fault."""
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        raise shape_error(what, exc) from exc


def provider_error(error: Any) -> HostdError:
    """A JSON-RPC error object as a typed error; a malformed one is still an error (X2).
    Its message is the provider's own text (it may echo a frame): reported by size only."""
    if not isinstance(error, dict):
        return ProviderError("provider sent a malformed error object")
    data = error.get("data")
    code = read_cgp_code(data.get("cgp_code") if isinstance(data, dict) else None)
    message = f"provider answered {code.value} (message: {unquoted(error.get('message'))})"
    if code is CgpErrorCode.INCOMPATIBLE_VERSION:
        return IncompatibleVersion(message)
    if code is CgpErrorCode.UNAVAILABLE and isinstance(data, dict) and data.get("warming") is True:
        return ProviderError(message, cgp_code=code, warming=True)  # not ready yet: no fault
    return ProviderError(message, cgp_code=code)


class JsonRpcClient(StreamClient):
    """Pipelined JSON-RPC calls over one line stream, fed by ``on_line`` (a child's pipe)."""

    binding = "jsonrpc"
    correlation = True  # JSON-RPC always correlates by id
    #: Told of each provider notification ``(method, params)`` (``context/progress``).
    on_notification: Callable[[str, Any], None] | None = None
    #: The handshake's raw result (it may say ``"ready": false``, ``_readiness``).
    handshake_result: Any = None

    def __repr__(self) -> str:
        return f"<JsonRpcClient {self.provider_id} {self._table!r}>"

    def _dispatch(self, line: bytes) -> HostdError | None:
        """The one reply path: decode the line, correlate it by id, hand the result to
        its caller, who validates it into the model of what it asked (``validate_reply``).
        A query result's frames stay raw: the leg audit parses each, so one malformed
        frame costs only itself."""
        if not line.strip():
            return None
        try:
            msg = orjson.loads(line)
        except orjson.JSONDecodeError as exc:
            return bad_line(line, exc)
        if not isinstance(msg, dict) or ("result" not in msg and "error" not in msg):
            if isinstance(msg, dict) and isinstance(msg.get("method"), str):
                if self.on_notification is not None:  # context/progress; others are ignored
                    self.on_notification(msg["method"], msg.get("params"))
                return None
            return ProtocolFault(
                f"not a JSON-RPC response ({len(line)} bytes, not quoted): a JSON "
                f"{json_type(msg)} without result or error"
            )
        key = msg.get("id")
        if key is None:
            if "error" in msg:
                # A provider's parse error about our line has id null; nothing waits on it.
                err = provider_error(msg["error"])
                return CorrelationMismatch(f"error reply without id: {err.message}")
            return CorrelationMismatch("reply without an id (H4)")
        # Our ids are integers: ``true`` or ``1.0`` would hash like ``1`` (H4).
        slot = self._table.pop(key) if type(key) is int else None
        if slot is None:
            if type(key) is int and self._late(key):
                return None  # a late reply to a request whose caller gave up
            return CorrelationMismatch(f"reply with unknown id {described_id(key)} (H4)")
        if "error" in msg:
            slot.fail(provider_error(msg["error"]))
        else:
            slot.resolve(msg["result"])
        return None

    async def call(self, method: str, params: dict[str, Any]) -> Any:
        key = next(self._ids)
        slot = self._table.add(key)
        try:
            async with self._send_lock:
                await self._send(_request_line(method, params, key))
            return await slot.wait()
        except BaseException:
            self._table.abandon(key)
            raise

    async def notify(self, method: str, params: dict[str, Any] | None = None) -> None:
        async with self._send_lock:
            await self._send(encode_line(make_notification(method, params)))

    async def handshake(self, host: HostInfo) -> HandshakeAck:
        result = await self.call(
            "context/handshake",
            {"protocol_version": PROTOCOL_VERSION, "host": host.to_wire()},
        )
        self.handshake_result = result
        return validate_reply(HandshakeAck, result, "handshake result")

    async def query(self, query: ContextQuery) -> ContextQueryResult:
        result = await self.call("context/query", {"query": query.to_wire()})
        return _query_result(result)

    def start_query(self, query: ContextQuery | dict[str, Any]) -> StartedCall | None:
        """Write a ``context/query`` now, with no event-loop turn, when the pipe takes it
        whole at once; ``None`` (nothing written) otherwise: then use ``query``.
        ``query`` may be given in its wire form (``to_wire()``); ``await
        started.result()`` is the ``ContextQueryResult``."""
        key = next(self._ids)
        line = _request_line("context/query", {"query": query_wire(query)}, key)
        return self._start(key, line, _query_result)

    async def verify(self, frames: list[FrameIdentity]) -> VerifyResponse:
        result = await self.call("context/verify", {"frames": [f.to_wire() for f in frames]})
        return validate_reply(VerifyResponse, result, "verify result")

    async def shutdown(self) -> None:
        await self.notify("context/shutdown")

    def close(self, error: HostdError) -> None:
        """Fail every waiter (the connection is being torn down)."""
        self._table.fail_all(error)
