"""The CGP NDJSON envelope binding (protocol.md §2): one tagged object per line."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import Field, TypeAdapter

from ._models import (
    Capabilities,
    ContextQuery,
    ContextQueryResult,
    ProviderInfo,
    VerifyRequest,
    VerifyResponse,
    WireModel,
)

__all__ = [
    "Envelope",
    "ErrorEnvelope",
    "FramesEnvelope",
    "HandshakeAckEnvelope",
    "HandshakeEnvelope",
    "QueryEnvelope",
    "ShutdownEnvelope",
    "VerifiedEnvelope",
    "VerifyEnvelope",
    "parse_envelope",
]


class HandshakeEnvelope(WireModel):
    type: Literal["handshake"] = "handshake"
    protocol_version: str


class HandshakeAckEnvelope(WireModel):
    type: Literal["handshake_ack"] = "handshake_ack"
    protocol_version: str
    provider: ProviderInfo
    capabilities: Capabilities = Field(default_factory=Capabilities)


class QueryEnvelope(WireModel):
    type: Literal["query"] = "query"
    query: ContextQuery
    id: str | None = None


class FramesEnvelope(WireModel):
    type: Literal["frames"] = "frames"
    result: ContextQueryResult
    id: str | None = None


class VerifyEnvelope(WireModel):
    type: Literal["verify"] = "verify"
    request: VerifyRequest


class VerifiedEnvelope(WireModel):
    type: Literal["verified"] = "verified"
    response: VerifyResponse
    #: Optional: SPEC prose correlates verify by id, the schema forbids it (vectors README).
    id: str | None = None


class ShutdownEnvelope(WireModel):
    type: Literal["shutdown"] = "shutdown"


class ErrorEnvelope(WireModel):
    type: Literal["error"] = "error"
    message: str
    id: str | None = None
    code: str | None = None


Envelope = Annotated[
    HandshakeEnvelope
    | HandshakeAckEnvelope
    | QueryEnvelope
    | FramesEnvelope
    | VerifyEnvelope
    | VerifiedEnvelope
    | ShutdownEnvelope
    | ErrorEnvelope,
    Field(discriminator="type"),
]

_ENVELOPE: TypeAdapter[Any] = TypeAdapter(Envelope)


def parse_envelope(data: Any) -> Any:
    """Parse one decoded envelope. Raises ``pydantic.ValidationError`` on a bad shape."""
    return _ENVELOPE.validate_python(data)
