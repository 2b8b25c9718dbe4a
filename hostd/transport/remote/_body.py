"""Bodies of a remote provider's HTTP exchanges: one request per POST, one reply per response.

Plain sync code: build the body of a ``handshake``/``query``/``verify`` in either
binding and read the one reply in the response body. ``jsonrpc`` POSTs the same
JSON-RPC 2.0 requests a local provider reads on stdin (protocol.md §1); ``cgp`` POSTs
one upstream envelope (protocol.md §2, the spec's HTTP binding: one envelope as the
request body, one as the response body). A body that is not exactly one valid reply
of the expected kind is ``RemoteWire`` (the leg's ``wire`` failure); an error reply
becomes the same ``ProviderError`` a local provider's would (X1, X2).
"""

from __future__ import annotations

import itertools
from typing import Any

import orjson
from pydantic import ValidationError

from hostd.errors import ProtocolFault, RemoteWire
from hostd.protocol import (
    PROTOCOL_VERSION,
    ContextQuery,
    ContextQueryResult,
    ErrorEnvelope,
    FrameIdentity,
    FramesEnvelope,
    HandshakeAck,
    HandshakeAckEnvelope,
    HostInfo,
    VerifiedEnvelope,
    VerifyResponse,
    WireModel,
    parse_envelope,
)
from hostd.rpc import encode, make_request

from ..bindings._cgp import _envelope_error
from ..bindings._jsonrpc import provider_error, validate_reply
from ..process._client import query_wire

__all__ = ["CgpCodec", "Exchange", "JsonRpcCodec", "RemoteCodec", "codec_for"]


def _decode(body: bytes) -> Any:
    """The one JSON value of a body (a final newline allowed: NDJSON's one line)."""
    if body.endswith(b"\n"):
        body = body[:-1]
    if not body.strip():
        raise RemoteWire("empty response body where a reply was expected")
    try:
        return orjson.loads(body)
    except orjson.JSONDecodeError:
        raise RemoteWire(f"response body is not one JSON value: {body[:80]!r}") from None


def _model(model: type[WireModel], data: Any, what: str) -> Any:
    """The reply's result as its wire model; a bad shape is the body's fault (``wire``)."""
    try:
        return validate_reply(model, data, what)
    except ProtocolFault as exc:
        raise RemoteWire(exc.message) from None


class Exchange:
    """One request's body and how to read its reply (``read`` raises on a bad or error one)."""

    __slots__ = ("body", "kind", "key")

    def __init__(self, body: bytes, kind: str, key: Any) -> None:
        self.body = body
        self.kind = kind  # "handshake" | "query" | "verify"
        self.key = key


class JsonRpcCodec:
    """The JSON-RPC binding over HTTP: the body is one request object, the reply one
    response object whose ``id`` must be the request's (H4)."""

    binding = "jsonrpc"

    def __init__(self) -> None:
        self._ids = itertools.count(1)

    def _request(self, method: str, params: dict[str, Any], kind: str) -> Exchange:
        key = next(self._ids)
        body = encode(make_request(method, params, key), strict=True)
        return Exchange(body, kind, key)

    def handshake(self, host: HostInfo) -> Exchange:
        params = {"protocol_version": PROTOCOL_VERSION, "host": host.to_wire()}
        return self._request("context/handshake", params, "handshake")

    def query(self, query: ContextQuery | dict[str, Any]) -> Exchange:
        return self._request("context/query", {"query": query_wire(query)}, "query")

    def verify(self, frames: list[FrameIdentity]) -> Exchange:
        return self._request("context/verify", {"frames": [f.to_wire() for f in frames]}, "verify")

    def read(self, exchange: Exchange, body: bytes) -> Any:
        msg = _decode(body)
        if not isinstance(msg, dict) or ("result" in msg) == ("error" in msg):
            raise RemoteWire("response body is not one JSON-RPC response")
        key = msg.get("id")
        if type(key) is not int or key != exchange.key:
            raise RemoteWire(f"reply id {key!r} is not the request's {exchange.key} (H4)")
        if "error" in msg:
            raise provider_error(msg["error"])
        result = msg["result"]
        if exchange.kind == "handshake":
            return _model(HandshakeAck, result, "handshake result")
        if exchange.kind == "query":
            return _model(ContextQueryResult, result, "query result")
        return _model(VerifyResponse, result, "verify result")


class CgpCodec:
    """The spec's HTTP binding: one envelope per POST body, one per response body. A
    query carries an ``id`` (each exchange is its own request, so the reply is always
    correlated; one that carries another id is a wire fault)."""

    binding = "cgp"

    def __init__(self) -> None:
        self._ids = itertools.count(1)

    def handshake(self, host: HostInfo) -> Exchange:
        body = orjson.dumps({"type": "handshake", "protocol_version": PROTOCOL_VERSION})
        return Exchange(body, "handshake", None)

    def query(self, query: ContextQuery | dict[str, Any]) -> Exchange:
        key = f"q{next(self._ids)}"
        body = orjson.dumps({"type": "query", "query": query_wire(query), "id": key})
        return Exchange(body, "query", key)

    def verify(self, frames: list[FrameIdentity]) -> Exchange:
        request = {"frames": [f.to_wire() for f in frames]}
        return Exchange(orjson.dumps({"type": "verify", "request": request}), "verify", None)

    def read(self, exchange: Exchange, body: bytes) -> Any:
        data = _decode(body)
        try:
            env = parse_envelope(data)
        except (ValueError, ValidationError):
            raise RemoteWire(f"response body is not one CGP envelope: {body[:80]!r}") from None
        if isinstance(env, ErrorEnvelope):
            raise _envelope_error(env)
        if exchange.kind == "handshake" and isinstance(env, HandshakeAckEnvelope):
            return HandshakeAck(
                protocol_version=env.protocol_version,
                provider=env.provider,
                capabilities=env.capabilities,
            )
        if exchange.kind == "query" and isinstance(env, FramesEnvelope):
            if env.id is not None and env.id != exchange.key:
                raise RemoteWire(f"frames for id {env.id!r}, asked {exchange.key!r} (H4)")
            result: ContextQueryResult = env.result
            return result
        if exchange.kind == "verify" and isinstance(env, VerifiedEnvelope):
            return env.response
        raise RemoteWire(f"expected the reply to {exchange.kind}, got {env.type!r}")


RemoteCodec = JsonRpcCodec | CgpCodec


def codec_for(binding: str) -> RemoteCodec:
    if binding == "jsonrpc":
        return JsonRpcCodec()
    if binding == "cgp":
        return CgpCodec()
    raise ValueError(f"a remote provider's binding is 'jsonrpc' or 'cgp', not {binding!r}")
