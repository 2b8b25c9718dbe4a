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
X2), whatever the status it came with (``error_reply``: a server may answer its
error envelope with a 4xx or 5xx). A body that reads as the other binding's reply
(or an empty 2xx body: under ``jsonrpc`` a CGP-SDK server's answer to a message it
does not understand, under ``cgp`` a JSON-RPC server's to a notification) says which
binding to set. Plain synchronous code.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

from hostd.errors import HostdError, ProtocolFault, RemoteWire

from ..bindings import (
    CGP_SDK_WIRE,
    STDERR_HINT,
    UNKEYED,
    CgpCodec,
    Codec,
    Fault,
    JsonRpcCodec,
    Refusal,
    Reply,
    Request,
)

__all__ = ["error_reply", "other_binding", "read_as", "read_reply"]

T = TypeVar("T")

#: What to set when the body is the envelope wire's, or empty, under ``jsonrpc``.
_SAY_CGP = f'{CGP_SDK_WIRE}: set binding = "cgp" (check-provider: --binding cgp)'
#: What to set when the body is a JSON-RPC reply under ``cgp``.
_SAY_JSONRPC = (
    'the body is a JSON-RPC response: set binding = "jsonrpc" (check-provider: --binding jsonrpc)'
)
#: What to set when the body is empty under ``cgp``: a JSON-RPC server's answer (a 204,
#: say) to an envelope, which it reads as a notification (no ``jsonrpc`` member, no id).
_SAY_JSONRPC_EMPTY = (
    "an empty body is a JSON-RPC server's answer to what it reads as a notification: "
    'set binding = "jsonrpc" (check-provider: --binding jsonrpc)'
)


def _one(body: bytes) -> bytes:
    """The body as one line: a final newline (NDJSON's) allowed."""
    return body[:-1] if body.endswith(b"\n") else body


def _answers(message: Reply | Refusal, request: Request) -> bool:
    """Each exchange is its own request: a reply names it, or (an envelope without an
    id) names none; one that names another does not answer it (H4)."""
    return message.key == request.key or message.key is UNKEYED


def other_binding(codec: Codec, body: bytes) -> str | None:
    """The binding to set when ``body`` is the other binding's reply, or empty (under
    ``jsonrpc``, a CGP SDK server's answer to what it does not understand; under ``cgp``,
    a JSON-RPC server's to what it reads as a notification); ``None`` when nothing says
    so. Each binding's own codec reads it, the envelope's first: it checks a body's
    shape whole, where JSON-RPC's needs only a ``result`` member (which a ``frames``
    envelope has). Nothing is quoted."""
    body = _one(body)
    if codec.name not in ("jsonrpc", "cgp"):
        return None
    # Named as the provider: a codec may log what it reads (an envelope type it ignores).
    provider_id = str(getattr(codec, "provider_id", "?"))
    envelope = isinstance(CgpCodec(provider_id).read(body), Reply | Refusal)
    if codec.name == "jsonrpc":
        return _SAY_CGP if envelope or not body.strip() else None
    if not body.strip():
        return _SAY_JSONRPC_EMPTY
    if not envelope and isinstance(JsonRpcCodec(provider_id).read(body), Reply | Refusal):
        return _SAY_JSONRPC
    return None


def _wire(text: str, codec: Codec, body: bytes) -> RemoteWire:
    hint = other_binding(codec, body)
    return RemoteWire(f"{text}; {hint}" if hint else text)


def read_reply(codec: Codec, request: Request, body: bytes) -> Any:
    """The payload of the one reply to ``request`` that ``body`` holds."""
    body = _one(body)
    if not body.strip():
        raise _wire("empty response body where a reply was expected", codec, body)
    message = codec.read(body)
    if isinstance(message, Fault):
        # Never the body: a proxy's page may echo the request, its credential included.
        why = message.detail or message.error.message
        text = f"response body ({len(body)} bytes, not quoted) is not one reply: {why}"
        raise _wire(text, codec, body)
    if message is None:  # one the binding ignores: an envelope of a type it does not know
        size = f"response body ({len(body)} bytes, not quoted)"
        raise _wire(f"{size} is a message the binding ignores, not a reply", codec, body)
    if not isinstance(message, Reply | Refusal):
        raise _wire("response body is a notification, not a reply", codec, body)
    if not _answers(message, request):
        raise _wire(codec.unmatched(message).message, codec, body)
    if isinstance(message, Refusal):
        raise _served(message.error)
    return message.payload


def error_reply(codec: Codec, request: Request, body: bytes) -> HostdError | None:
    """The typed error of the one error reply to ``request`` that ``body`` holds (a cgp
    ``error`` envelope, a JSON-RPC error object with the request's id), as a pipe's
    error line gives it (X1, X2); ``None`` when the body is anything else."""
    body = _one(body)
    if not body.strip():
        return None
    message = codec.read(body)
    if isinstance(message, Refusal) and _answers(message, request):
        return _served(message.error)
    return None


def _served(error: HostdError) -> HostdError:
    """An error a remote provider answered, told as a server's: its own failure is
    explained in its server's log, not on a stderr hostd reads (a pipe's wording)."""
    if STDERR_HINT in error.message:
        error.message = error.message.replace(STDERR_HINT, "; the server's own log may say why")
        error.args = (error.message,)
    return error


def read_as(read: Callable[[Any], T], payload: Any) -> T:
    """``payload`` read into the model of what was asked; a bad shape is the body's
    fault (``wire``), chained from the codec's fault (a ``MalformedReply`` says what is
    wrong apart from its ``malformed <what>``: check-provider's row reads it)."""
    try:
        return read(payload)
    except ProtocolFault as exc:
        raise RemoteWire(exc.message) from exc
