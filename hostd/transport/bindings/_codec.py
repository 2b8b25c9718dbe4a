"""What a binding codec is: a pure, synchronous translator between hostd's calls and one wire.

A codec builds each request a provider is sent (``handshake``, ``query``, ``verify``,
``shutdown``, and hostd's memory writes ``remember`` and ``forget``) as bytes with the
correlation key its reply will carry (``Request``), and reads one message a provider
wrote (one line of a pipe, one HTTP response body) as a ``Reply``, a ``Refusal`` (an
error reply, already a typed error, X1/X2), a ``Notice`` (a notification) or a ``Fault``
(the peer broke the wire). It does no I/O and never waits: a carrier (a child's pipes,
an HTTPS endpoint, check-provider's raw pipes) moves the bytes and keeps the correlation
table, as h11 leaves the sockets to whoever drives it. A reply's payload is read into
the model of what was asked by ``handshake_ack`` (where the codec learns what it needs
of the provider: whether it pipelines, the name it answers ``verify`` under),
``query_result`` (frames left raw for the leg audit), ``verify_response``,
``remember_result`` and ``forget_result``; a binding that carries no memory write raises
``NotSupported`` as it is asked to build one; a payload of the wrong shape raises
``ProtocolFault`` (a carrier may re-type it, as HTTPS does to ``RemoteWire``).

Nothing a provider wrote is quoted in a fault (``_unquoted``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Final, Protocol, TypeVar

from pydantic import ValidationError

from hostd.errors import HostdError
from hostd.protocol import (
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
    WireModel,
)

from ._unquoted import shape_error

__all__ = [
    "UNKEYED",
    "Codec",
    "Fault",
    "Message",
    "Notice",
    "Refusal",
    "Reply",
    "Request",
    "query_wire",
    "validate_reply",
]

M = TypeVar("M", bound=WireModel)


class _Unkeyed:
    __slots__ = ()

    def __repr__(self) -> str:
        return "UNKEYED"


#: The key of a request answered in lock-step: its reply carries no id of its own, so
#: one such request is in flight at a time (a CGP handshake or verify, and every query
#: to a CGP provider that does not declare ``correlation``).
UNKEYED: Final[Any] = _Unkeyed()


def query_wire(query: ContextQuery | dict[str, Any]) -> dict[str, Any]:
    """A query's wire form: a ``ContextQuery`` serialised, or a dict already in that form."""
    return query if isinstance(query, dict) else query.to_wire()


def validate_reply(model: type[M], data: Any, what: str) -> M:
    """A reply's payload as its wire model; a bad shape is the provider's
    ``MalformedReply`` (``malformed <what>: result.frames is missing …``), raised in the
    call it answers: that call's alone."""
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        raise shape_error(what, exc) from exc


@dataclass(frozen=True, slots=True)
class Request:
    """One message to send: ``line`` (one JSON value and its newline: a pipe writes it
    as it is, an HTTP body is ``body``), the ``key`` its reply will carry (``UNKEYED``
    for lock-step, ``None`` when nothing answers it) and ``kind`` (``handshake``,
    ``query``, ``verify``, ``shutdown``, or a method name)."""

    line: bytes
    key: Any
    kind: str

    @property
    def body(self) -> bytes:
        """The message without its newline (one HTTP request body)."""
        return self.line[:-1]


@dataclass(frozen=True, slots=True)
class Reply:
    """A reply: ``key`` to correlate it by (``None`` when it carries no usable one),
    ``raw_key`` as the peer sent it (to describe, never to quote), ``label`` its name
    on the wire (``reply``, ``frames``, ``verified``…)."""

    key: Any
    payload: Any
    raw_key: Any = None
    label: str = "reply"


@dataclass(frozen=True, slots=True)
class Refusal:
    """An error reply, already the typed error its caller gets (X1, X2)."""

    key: Any
    error: HostdError
    raw_key: Any = None
    label: str = "error"


@dataclass(frozen=True, slots=True)
class Notice:
    """A notification from the provider (``context/progress``)."""

    method: str
    params: Any


@dataclass(frozen=True, slots=True)
class Fault:
    """The peer broke the wire: the stream (or the exchange) ends with ``error``.
    ``detail``: what is wrong, without the size of what was read (a carrier that
    names its own unit, an HTTP body, says it), never the peer's text."""

    error: HostdError
    detail: str | None = None


Message = Reply | Refusal | Notice | Fault


class Codec(Protocol):
    """One binding's wire, for one provider (a codec keeps its ids and what it learnt
    from the handshake, so each connection has its own)."""

    #: The binding's registry name.
    name: str
    #: Whether queries carry a key of their own (pipelined); otherwise lock-step.
    correlation: bool

    def handshake(self, host: HostInfo) -> Request: ...
    def query(self, query: ContextQuery | dict[str, Any]) -> Request: ...
    def verify(self, frames: list[FrameIdentity]) -> Request: ...
    def remember(self, request: RememberRequest) -> Request:
        """``memory/remember`` (hostd's extension): ``NotSupported`` on a binding that
        carries no memory write."""
        ...

    def forget(self, request: ForgetRequest) -> Request: ...
    def shutdown(self) -> Request: ...
    def read(self, data: bytes) -> Message | None:
        """One message (``None``: nothing to act on: a blank line, or a message the
        binding ignores, as a CGP envelope of a type hostd does not implement)."""
        ...

    def unmatched(self, message: Reply | Refusal) -> HostdError:
        """The fault of a reply no request waits for (H4)."""
        ...

    def handshake_ack(self, payload: Any) -> HandshakeAck: ...
    def query_result(self, payload: Any) -> ContextQueryResult: ...
    def verify_response(self, payload: Any) -> VerifyResponse: ...
    def remember_result(self, payload: Any) -> RememberResult: ...
    def forget_result(self, payload: Any) -> ForgetResult: ...
