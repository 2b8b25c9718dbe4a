"""The CGP NDJSON envelope binding (protocol.md §2): one tagged object per line."""

from __future__ import annotations

import functools
from typing import Annotated, Any, Literal, get_args

from pydantic import ConfigDict, Field, TypeAdapter

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
    "ENVELOPE_TYPES",
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


#: Each envelope's validator is built by its first use: only a provider speaking the
#: envelope wire (a CGP SDK's) needs them, and a daemon's start builds none.
_ON_USE = ConfigDict(defer_build=True)


class HandshakeEnvelope(WireModel):
    model_config = _ON_USE
    type: Literal["handshake"] = "handshake"
    protocol_version: str


class HandshakeAckEnvelope(WireModel):
    model_config = _ON_USE
    type: Literal["handshake_ack"] = "handshake_ack"
    protocol_version: str
    provider: ProviderInfo
    capabilities: Capabilities = Field(default_factory=Capabilities)


class QueryEnvelope(WireModel):
    model_config = _ON_USE
    type: Literal["query"] = "query"
    query: ContextQuery
    id: str | None = None


class FramesEnvelope(WireModel):
    model_config = _ON_USE
    type: Literal["frames"] = "frames"
    result: ContextQueryResult
    id: str | None = None


class VerifyEnvelope(WireModel):
    model_config = _ON_USE
    type: Literal["verify"] = "verify"
    request: VerifyRequest


class VerifiedEnvelope(WireModel):
    model_config = _ON_USE
    type: Literal["verified"] = "verified"
    response: VerifyResponse
    #: Optional: SPEC prose correlates verify by id, the schema forbids it (vectors README).
    id: str | None = None


class ShutdownEnvelope(WireModel):
    model_config = _ON_USE
    type: Literal["shutdown"] = "shutdown"


class ErrorEnvelope(WireModel):
    model_config = _ON_USE
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


@functools.cache
def _envelope() -> TypeAdapter[Any]:
    return TypeAdapter(Envelope)  # built by the first envelope parsed (_ON_USE)


#: The envelope vocabulary of this revision (SPEC §2.1): every ``type`` hostd implements.
ENVELOPE_TYPES: frozenset[str] = frozenset(
    model.model_fields["type"].default for model in get_args(get_args(Envelope)[0])
)


def parse_envelope(data: Any) -> Any:
    """Parse one decoded envelope; ``None`` for one whose ``type`` is a string outside
    the vocabulary (``ENVELOPE_TYPES``). A receiver must not reject an envelope only
    because it does not implement its type (SPEC §2.1, §13): the vocabulary grows within
    ``contextgraph/1``, so the caller ignores it. Raises ``pydantic.ValidationError`` on
    a bad shape: not an object, no ``type``, a ``type`` that is not a string, or a known
    type whose members are wrong."""
    if isinstance(data, dict):
        kind = data.get("type")
        if isinstance(kind, str) and kind not in ENVELOPE_TYPES:
            return None
    return _envelope().validate_python(data)
