"""Wire models of the Context Graph Protocol semantic layer (pydantic v2).

Every model ignores members it does not know (U1): a 1.x minor may add an
optional field and a 1.0 peer drops it harmlessly. Models are deliberately
lenient about *values* (an empty title, a score of 3, a malformed digest
all parse); the rule functions in ``_rules`` judge values and return typed
violations, so a malformed frame becomes a list of named findings instead
of an exception.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Annotated, Any

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, TypeAdapter, ValidationInfo
from pydantic_core import PydanticCustomError

__all__ = [
    "FRAME_KINDS",
    "Capabilities",
    "ContentRef",
    "ContextFrame",
    "ContextQuery",
    "ContextQueryResult",
    "DataFlow",
    "FrameEmbedding",
    "FrameIdentity",
    "FrameVerdict",
    "HandshakeAck",
    "HandshakeRequest",
    "HostInfo",
    "Provenance",
    "ProviderInfo",
    "QueryCapability",
    "Relation",
    "RememberCapability",
    "Representation",
    "Transform",
    "VerdictStatus",
    "VerifyRequest",
    "VerifyResponse",
    "WireModel",
]

#: The closed kind set of the ``contextgraph/1`` family (U2). Anything else is
#: opaque evidence: accepted, flagged, never a crash.
FRAME_KINDS: frozenset[str] = frozenset(
    {"snippet", "symbol", "fact", "doc", "memory", "episode", "graph"}
)


class WireModel(BaseModel):
    """Base of every wire model: unknown members are ignored (U1)."""

    model_config = ConfigDict(extra="ignore", populate_by_name=True)

    def to_wire(self) -> dict[str, Any]:
        """The JSON-ready dict a peer receives: ``None`` members are omitted."""
        return self.model_dump(mode="json", exclude_none=True)


class Representation(StrEnum):
    """How a frame carries its content (P1–P4). Absent on the wire means ``full``."""

    FULL = "full"
    COMPACT = "compact"
    REFERENCE = "reference"


class VerdictStatus(StrEnum):
    """A provider's answer for one held frame (V3)."""

    VALID = "valid"
    STALE = "stale"
    GONE = "gone"
    UNKNOWN = "unknown"


class Provenance(WireModel):
    """One origin of a frame. ``type`` is an open vocabulary (``file``, ``derivation``, …)."""

    type: str
    uri: str | None = None
    range: str | None = None
    digest: str | None = None
    method: str | None = None
    by: str | None = None

    @staticmethod
    def many_to_wire(items: list[Provenance]) -> list[dict[str, Any]]:
        """``to_wire`` of each item, in one serializer call (not one per item)."""
        out: list[dict[str, Any]] = _PROVENANCE_LIST.dump_python(
            items, mode="json", exclude_none=True
        )
        return out


_PROVENANCE_LIST: TypeAdapter[list[Provenance]] = TypeAdapter(list[Provenance])


class Relation(WireModel):
    """A graph edge, surfaced by its human ``display_name`` (G1, G2)."""

    rel: str
    target_uri: str
    display_name: str | None = None


class ContentRef(WireModel):
    """Resolver handle of a compact or reference frame (P2, P3)."""

    provider_id: str
    uri: str
    expires_at: str | None = None


class Transform(WireModel):
    """What a compact frame did to its source (P2)."""

    method: str
    implementation: str
    version: str


def _json_number(value: Any, info: ValidationInfo) -> Any:
    """A number member as the schema types it: a JSON number (an integral ``2.0`` is the
    integer 2, as JSON Schema reads it). A string, even one that reads as a number, or a
    boolean is refused, never coerced: the rule table's ``schema`` (a string
    ``token_cost``). The error names the JSON type sent, never the value."""
    if isinstance(value, str | bool):
        whole = " (an integer)" if info.field_name in _INTEGERS else ""
        raise PydanticCustomError(
            "number_type",
            "{given}; expected a number{whole}",
            {"given": a_json_type(value), "whole": whole},
        )
    return value


def a_json_type(value: Any) -> str:
    """A decoded JSON value's type as a schema violation says it (``a string``,
    ``an array``, ``null`` …): its type, never the value."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int | float):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list | tuple):
        return "an array"
    return "an object"


#: The integer members ``_json_number`` guards, so its refusal says which it expects.
_INTEGERS = frozenset(
    {"token_cost", "canonical_token_cost", "dropped_estimate", "unindexed_changes"}
)
#: A number a peer sends (``_json_number``).
_Number = BeforeValidator(_json_number)


class FrameEmbedding(WireModel):
    fingerprint: str
    #: Each item a JSON number, as a frame's score is (``_json_number``).
    vector: list[Annotated[float, _Number]] | None = None


class ContextFrame(WireModel):
    """The unit of exchange. ``content`` is untrusted data, never instructions (R3).

    ``kind`` is kept as a plain string: an unknown kind is opaque evidence (U2).
    """

    id: str
    kind: str
    title: str
    content: str | None = None
    content_digest: str | None = None
    uri: str | None = None
    representation: str | None = None
    content_fidelity: str | None = None
    canonical_content_hash: str | None = None
    content_ref: ContentRef | None = None
    transform: Transform | None = None
    minimum_content_fidelity: str | None = None
    inline_content_requirement: str | None = None
    score: Annotated[float, _Number]
    token_cost: Annotated[int, _Number]
    canonical_token_cost: Annotated[int, _Number] | None = None
    tokenizer_ref: str | None = None
    valid_from: str | None = None
    valid_to: str | None = None
    recorded_at: str | None = None
    provenance: list[Provenance] = Field(default_factory=list)
    citation_label: str | None = None
    embedding: FrameEmbedding | None = None
    relations: list[Relation] = Field(default_factory=list)

    @property
    def effective_representation(self) -> str:
        """The representation, ``full`` when absent (P1)."""
        return self.representation or Representation.FULL.value


class ContextQuery(WireModel):
    """A retrieval request. ``max_tokens`` is a hard contract (B1), not a hint."""

    goal: str
    query_text: str | None = None
    embedding: list[float] | None = None
    kinds: list[str] = Field(default_factory=list)
    anchors: list[str] = Field(default_factory=list)
    max_frames: Annotated[int, Field(ge=0, le=2**32 - 1)]
    max_tokens: Annotated[int, Field(ge=0, le=2**32 - 1)]
    as_of: str | None = None
    #: Absent means ``[full]``; kept ``None`` when absent so the normalised form
    #: matches the reference serialiser (it omits the member).
    representation_preferences: list[str] | None = None


class ContextQueryResult(WireModel):
    """A provider's answer to ``context/query``.

    ``frames`` stay raw dicts here: the host audits each frame on its own, so one
    malformed frame costs that frame only (see ``parse_frame``). ``frames`` is required,
    as the CGP schema's ``ContextQueryResult`` requires it: a reply without it (its
    frames under another name) is malformed, never an answer with no frame. The schema
    requires ``truncated`` too, but hand-written providers often leave it out: an
    absent one reads as ``false`` (check-provider warns about it).
    """

    frames: list[Any]
    truncated: bool = False
    #: A JSON number, never a string that reads as one (``_json_number``), as a frame's
    #: token_cost: a reply sending ``"3"`` is malformed, not read as 3.
    dropped_estimate: Annotated[int, _Number] | None = None
    #: hostd's extension: files changed since the index this answer came from was built,
    #: while the provider builds the next (``providers.files`` on a large tree). A
    #: figure, not text: the leg's note says it in hostd's words (never a peer's). A
    #: JSON number, as ``dropped_estimate``.
    unindexed_changes: Annotated[int, Field(ge=0, le=2**32 - 1), _Number] | None = None
    #: hostd's extension: answered while the provider still warms, from what it had
    #: built when the query came (its progress then: ``phase``, ``done``, ``total``).
    #: Read leniently (``hostd.transport.progress_figures``): a figure of the wrong
    #: type is dropped, never the reply.
    warming: Any = None


class DataFlow(WireModel):
    """What a provider does with data; ``egress`` is the consent-critical member (C1)."""

    reads: bool = False
    writes: bool = False
    egress: bool = False
    egress_scopes: list[str] = Field(default_factory=list)


class ProviderInfo(WireModel):
    name: str
    version: str
    data_flow: DataFlow = Field(default_factory=DataFlow)


class QueryCapability(WireModel):
    kinds: list[str] = Field(default_factory=list)


class RememberCapability(WireModel):
    """``capabilities.remember`` (hostd's extension): the provider stores entries of
    these kinds through ``memory/remember`` (``hostd.protocol._memory``)."""

    kinds: list[str] = Field(default_factory=list)


class Capabilities(WireModel):
    """What a provider can do. Empty ``query.kinds`` means any kind (Q1)."""

    query: QueryCapability = Field(default_factory=QueryCapability)
    correlation: bool = False
    graph: bool = False
    embeddings_fingerprint: str | None = None
    verify: bool = False
    representations: list[str] = Field(default_factory=list)
    resolve: bool = False
    #: hostd's extension (``hostd.protocol._memory``): the provider stores entries sent
    #: by ``memory/remember``. Absent: it stores nothing (a peer that does not know the
    #: member ignores it, U1).
    remember: RememberCapability | None = None


class HostInfo(WireModel):
    name: str
    version: str


class HandshakeRequest(WireModel):
    """Params of ``context/handshake`` on the JSON-RPC binding."""

    protocol_version: str
    host: HostInfo


class HandshakeAck(WireModel):
    """Result of ``context/handshake`` (and body of the CGP ``handshake_ack``)."""

    protocol_version: str
    provider: ProviderInfo
    capabilities: Capabilities = Field(default_factory=Capabilities)


class FrameIdentity(WireModel):
    """The wire form of a FrameId: ``(provider_id, frame_id, content_digest|null)`` (D2)."""

    provider_id: str
    frame_id: str
    content_digest: str | None = None


class VerifyRequest(WireModel):
    """Identities only, never bodies (V1)."""

    frames: list[FrameIdentity] = Field(default_factory=list)


class FrameVerdict(WireModel):
    frame: FrameIdentity
    #: An unrecognised status string is read as ``unknown`` by the host (V3):
    #: the value is kept as text and interpreted by ``verdict_status``.
    status: str
    replacement_digest: str | None = None

    @property
    def verdict(self) -> VerdictStatus:
        try:
            return VerdictStatus(self.status)
        except ValueError:
            return VerdictStatus.UNKNOWN


class VerifyResponse(WireModel):
    verdicts: list[FrameVerdict] = Field(default_factory=list)
