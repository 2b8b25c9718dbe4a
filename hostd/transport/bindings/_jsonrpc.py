"""The JSON-RPC 2.0 provider binding's codec, host side (protocol.md §1).

Requests carry integer ids, so every call is correlated (H4) and may be
pipelined: a reply's ``id`` must be an integer we sent (``true`` or ``1.0`` would
hash like ``1``, so any other type reads as no key). A line that is not a
JSON-RPC response is a ``protocol_fault``; a request-shaped line with a
``method`` is a notification (``context/progress``). Error replies become
``ProviderError`` with the CGP code read from ``data.cgp_code`` (unknown or
absent → ``internal``, X1/X2); JSON-RPC's ``-32601`` is ``MethodNotFound``, one of
them, so a caller can tell "no such method" from a failed one. Pure and synchronous
(``_codec``).
"""

from __future__ import annotations

import itertools
from typing import Any

import orjson

from hostd.errors import (
    CorrelationMismatch,
    HostdError,
    IncompatibleVersion,
    MethodNotFound,
    ProtocolFault,
    ProviderError,
)
from hostd.protocol import (
    FORGET_METHOD,
    METHOD_NOT_FOUND,
    PROTOCOL_VERSION,
    REMEMBER_METHOD,
    CgpErrorCode,
    ContextQuery,
    ContextQueryResult,
    ForgetRequest,
    ForgetResult,
    FrameIdentity,
    HandshakeAck,
    HostInfo,
    RememberRequest,
    RememberResult,
    VerifyResponse,
    read_cgp_code,
)
from hostd.rpc import encode_line, make_notification, request_line

from ._codec import Fault, Message, Notice, Refusal, Reply, Request, query_wire, validate_reply
from ._unquoted import (
    answered,
    bad_line,
    described_id,
    json_type,
    parse_problem,
    refusal_tokens,
)

__all__ = ["JsonRpcCodec", "provider_error"]


def provider_error(error: Any) -> HostdError:
    """A JSON-RPC error object as a typed error; a malformed one is still an error (X2).
    Its message is the provider's own text (it may echo a frame): reported by size only."""
    if not isinstance(error, dict):
        return ProviderError("provider sent a malformed error object")
    data = error.get("data")
    given = data.get("cgp_code") if isinstance(data, dict) else None
    code = read_cgp_code(given)
    message = answered(code, error.get("message"), given)
    if code is CgpErrorCode.INCOMPATIBLE_VERSION:
        return IncompatibleVersion(message)
    if code is CgpErrorCode.UNAVAILABLE and isinstance(data, dict) and data.get("warming") is True:
        return ProviderError(message, cgp_code=code, warming=True)  # not ready yet: no fault
    number = error.get("code")
    if type(number) is int and number == METHOD_NOT_FOUND:
        return MethodNotFound(message, cgp_code=code)
    return ProviderError(message, cgp_code=code, **refusal_tokens(data))


class JsonRpcCodec:
    """The JSON-RPC wire for one provider: its request ids and how to read its replies."""

    name = "jsonrpc"
    correlation = True  # JSON-RPC always correlates by id

    def __init__(self, provider_id: str = "?") -> None:
        self.provider_id = provider_id
        self._ids = itertools.count(1)

    def __repr__(self) -> str:
        return f"<JsonRpcCodec {self.provider_id}>"

    def request(self, method: str, params: dict[str, Any], kind: str | None = None) -> Request:
        """Any method's request (a reranker's ``rerank``), keyed by the next id."""
        key = next(self._ids)
        return Request(request_line(method, params, key), key, kind or method)

    def notification(self, method: str, params: dict[str, Any] | None = None) -> Request:
        """A notification: nothing answers it."""
        return Request(encode_line(make_notification(method, params)), None, method)

    def handshake(self, host: HostInfo) -> Request:
        params = {"protocol_version": PROTOCOL_VERSION, "host": host.to_wire()}
        return self.request("context/handshake", params, "handshake")

    def query(self, query: ContextQuery | dict[str, Any]) -> Request:
        return self.request("context/query", {"query": query_wire(query)}, "query")

    def verify(self, frames: list[FrameIdentity]) -> Request:
        return self.request("context/verify", {"frames": [f.to_wire() for f in frames]}, "verify")

    def remember(self, request: RememberRequest) -> Request:
        return self.request(REMEMBER_METHOD, request.to_wire(), "remember")

    def forget(self, request: ForgetRequest) -> Request:
        return self.request(FORGET_METHOD, request.to_wire(), "forget")

    def shutdown(self) -> Request:
        return self.notification("context/shutdown")

    def read(self, data: bytes) -> Message | None:
        """One line: a reply or error reply by its id, a notification, or a fault. A query
        result's frames stay raw: the leg audit parses each, so one malformed frame
        costs only itself."""
        if not data or data.isspace():  # blank, without copying the line as strip() does
            return None
        try:
            msg = orjson.loads(data)
        except orjson.JSONDecodeError as exc:
            return Fault(bad_line(data, exc), parse_problem(exc))
        if not isinstance(msg, dict) or ("result" not in msg and "error" not in msg):
            if isinstance(msg, dict) and isinstance(msg.get("method"), str):
                return Notice(msg["method"], msg.get("params"))
            what = f"a JSON {json_type(msg)} without result or error"
            return Fault(
                ProtocolFault(f"not a JSON-RPC response ({len(data)} bytes, not quoted): {what}"),
                f"not a JSON-RPC response: {what}",
            )
        raw = msg.get("id")
        key = raw if type(raw) is int else None  # H4: only the integers we sent
        if "error" in msg:
            return Refusal(key, provider_error(msg["error"]), raw)
        return Reply(key, msg["result"], raw)

    def unmatched(self, message: Reply | Refusal) -> HostdError:
        raw = message.raw_key
        if raw is None:
            if isinstance(message, Refusal):
                # A provider's parse error about our line has id null; nothing waits on it.
                return CorrelationMismatch(f"error reply without id: {message.error.message}")
            return CorrelationMismatch("reply without an id (H4)")
        return CorrelationMismatch(f"reply with unknown id {described_id(raw)} (H4)")

    def handshake_ack(self, payload: Any) -> HandshakeAck:
        return validate_reply(HandshakeAck, payload, "handshake result")

    def query_result(self, payload: Any) -> ContextQueryResult:
        return validate_reply(ContextQueryResult, payload, "query result")

    def verify_response(self, payload: Any) -> VerifyResponse:
        return validate_reply(VerifyResponse, payload, "verify result")

    def remember_result(self, payload: Any) -> RememberResult:
        return validate_reply(RememberResult, payload, "remember result")

    def forget_result(self, payload: Any) -> ForgetResult:
        return validate_reply(ForgetResult, payload, "forget result")
