"""One HTTP exchange read through the binding's codec: one request per POST, one reply per body.

The request body is the codec's request without its newline: ``jsonrpc`` POSTs
the same JSON-RPC 2.0 request a local provider reads on stdin (protocol.md §1),
``cgp`` one upstream envelope (protocol.md §2, the spec's HTTP binding: one
envelope as the request body, one as the response body). The response body is
read by the same codec that reads a child's lines (a final newline allowed:
NDJSON's one line). A body that is not exactly one reply to that request is
``RemoteWire`` (the leg's ``wire`` failure): empty, not one message, a
notification, a reply that names another request (H4) or a payload of the wrong
shape; an error reply becomes the same typed error a local provider's would (X1,
X2). Plain synchronous code.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

from hostd.errors import ProtocolFault, RemoteWire

from ..bindings import UNKEYED, Codec, Fault, Refusal, Reply, Request

__all__ = ["read_reply", "read_as"]

T = TypeVar("T")


def read_reply(codec: Codec, request: Request, body: bytes) -> Any:
    """The payload of the one reply to ``request`` that ``body`` holds."""
    if body.endswith(b"\n"):
        body = body[:-1]
    if not body.strip():
        raise RemoteWire("empty response body where a reply was expected")
    message = codec.read(body)
    if isinstance(message, Fault):
        # Never the body: a proxy's page may echo the request, its credential included.
        why = message.detail or message.error.message
        raise RemoteWire(f"response body ({len(body)} bytes, not quoted) is not one reply: {why}")
    if not isinstance(message, Reply | Refusal):
        raise RemoteWire("response body is a notification, not a reply")
    # Each exchange is its own request: a reply names it, or (an envelope without an
    # id) names none; one that names another is a wire fault (H4).
    if message.key != request.key and message.key is not UNKEYED:
        raise RemoteWire(codec.unmatched(message).message)
    if isinstance(message, Refusal):
        raise message.error
    return message.payload


def read_as(read: Callable[[Any], T], payload: Any) -> T:
    """``payload`` read into the model of what was asked; a bad shape is the body's
    fault (``wire``)."""
    try:
        return read(payload)
    except ProtocolFault as exc:
        raise RemoteWire(exc.message) from None
