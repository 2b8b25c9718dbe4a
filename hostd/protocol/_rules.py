"""Protocol rules as functions returning typed violations, never bare strings.

Each check names the rule id of the CGP specification it enforces and the field
it found wanting, so a malformed frame yields a readable list such as
``[Violation(rule="F3", field="citation_label", ...)]`` rather than a traceback.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from decimal import Decimal
from enum import StrEnum
from typing import Any

from pydantic import TypeAdapter, ValidationError

from ._bytes import canonical_token_cost, is_sha256_digest
from ._models import (
    FRAME_KINDS,
    Capabilities,
    ContextFrame,
    ContextQuery,
    HandshakeAck,
    ProviderInfo,
    Representation,
    a_json_type,
)
from ._time import is_timestamp
from ._version import is_version_string, version_family, versions_compatible

__all__ = [
    "LOCAL_ONLY_SCOPE",
    "Severity",
    "Violation",
    "check_as_of",
    "check_budget",
    "check_data_flow",
    "check_frame",
    "check_handshake",
    "check_kinds",
    "check_provider_info",
    "check_query",
    "check_representation_preferences",
    "check_timestamp",
    "check_version",
    "frame_in_window",
    "is_off_machine_scope",
    "parse_frame",
    "parse_frames",
    "parse_timestamp",
    "utc_timestamp",
]

LOCAL_ONLY_SCOPE = "local-only"

# F4: ``YYYY-MM-DDTHH:MM:SS(.f+)?Z``, uppercase T and Z.
_TIMESTAMP_RE = re.compile(r"(\d{4})-(\d{2})-(\d{2})T(\d{2}):(\d{2}):(\d{2})(\.\d+)?Z")


class Severity(StrEnum):
    #: The frame (or message) breaks a MUST and is dropped.
    ERROR = "error"
    #: Accepted, but worth reporting (an unknown kind, U2).
    NOTICE = "notice"


@dataclass(frozen=True, slots=True)
class Violation:
    """One broken rule: its spec id, the field at fault and a human message. A message
    never quotes a frame's values: violations reach reports and the log (C8)."""

    rule: str
    field: str
    message: str
    severity: Severity = Severity.ERROR

    def to_wire(self) -> dict[str, str]:
        return {
            "rule": self.rule,
            "field": self.field,
            "message": self.message,
            "severity": self.severity.value,
        }


def _blank(value: str | None) -> bool:
    return value is None or not value.strip()


# --- timestamps (F4) --------------------------------------------------------------


def parse_timestamp(value: str) -> tuple[datetime, Decimal] | None:
    """A comparable key for an F4 timestamp, or ``None`` when it breaks the profile.

    The fraction is kept exactly (``Decimal``) so nanosecond stamps compare right.
    """
    m = _TIMESTAMP_RE.fullmatch(value)
    if m is None:
        return None
    try:
        y, mo, d, h, mi, sec = (int(m.group(i)) for i in range(1, 7))
        whole = datetime(y, mo, d, h, mi, sec)
    except ValueError:
        return None
    frac = Decimal("0" + m.group(7)) if m.group(7) else Decimal(0)
    return whole, frac


_DATE_RE = re.compile(r"[0-9]{4}-[0-9]{2}-[0-9]{2}")
_OFFSET_RE = re.compile(
    r"([0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2})(\.[0-9]+)?([+-][0-9]{2}:[0-9]{2})"
)


def utc_timestamp(value: str) -> str | None:
    """``value`` as an F4 stamp: an F4 stamp as it is, a date (``2026-11-02``) as its
    midnight UTC, a time with an offset (``…T10:00:00+01:00``) as the same instant in UTC,
    its fraction kept digit for digit; ``None`` for anything else. What a person or an
    agent writes, made what the protocol carries (a provider only ever sees F4)."""
    if parse_timestamp(value) is not None:
        return value
    if _DATE_RE.fullmatch(value):
        stamp = f"{value}T00:00:00Z"
        return stamp if parse_timestamp(stamp) is not None else None
    shifted = _OFFSET_RE.fullmatch(value)
    if shifted is None:
        return None
    whole, fraction, offset = shifted.groups()
    try:
        instant = datetime.fromisoformat(whole + offset).astimezone(UTC)
    except ValueError:
        return None
    return instant.strftime("%Y-%m-%dT%H:%M:%S") + (fraction or "") + "Z"


def check_timestamp(value: str | None, field: str) -> list[Violation]:
    """F4: ``field``'s violation when ``value`` is not an RFC 3339 UTC time (``None`` passes)."""
    if value is None:
        return []
    if not isinstance(value, str) or not is_timestamp(value):
        # The value is never repeated: it may be a peer's text.
        return [
            Violation(
                "F4",
                field,
                "not a UTC time such as 2026-11-02T09:30:00Z (RFC 3339: date, 'T', time, "
                "an optional fraction of a second, then 'Z')",
            )
        ]
    return []


# --- frames -----------------------------------------------------------------------


#: What a member of each of pydantic's type errors takes, in the schema's words.
_EXPECTED = {
    "string_type": "a string",
    "float_type": "a number",
    "float_parsing": "a number",
    "int_type": "a number (an integer)",
    "int_parsing": "a number (an integer)",
    "bool_type": "a boolean",
    "list_type": "an array",
    "dict_type": "an object",
    "model_type": "an object",
    "model_attributes_type": "an object",
}


def schema_reason(error: Any) -> str:
    """A few words for one of pydantic's errors about a frame, the same wherever it is
    reported (check-provider's rows, the compose summary): ``missing``, or what was sent
    by its JSON type and what the member takes (``a number; expected a string``), never
    the value sent (C8). An error of another kind keeps pydantic's words, unless they
    quote what was sent: then only its type."""
    kind = error["type"]
    if kind == "missing":
        return "missing"
    if kind == "int_from_float":
        return "a fraction; expected a number (an integer)"
    if kind in _EXPECTED:
        return f"{a_json_type(error.get('input'))}; expected {_EXPECTED[kind]}"
    message = str(error["msg"])
    given = error.get("input")
    if isinstance(given, str) and given and given in message:
        return str(kind)
    return message


def parse_frame(data: Any) -> tuple[ContextFrame | None, list[Violation]]:
    """Parse one raw frame; a shape error becomes ``schema`` violations, not an exception."""
    try:
        frame = ContextFrame.model_validate(data)
    except ValidationError as exc:
        out = []
        for err in exc.errors():
            loc = ".".join(str(p) for p in err["loc"]) or "<frame>"
            out.append(Violation("schema", loc, schema_reason(err)))
        out.extend(_sent_cost(data, {str(err["loc"][0]) for err in exc.errors() if err["loc"]}))
        return None, out
    return frame, check_frame(frame)


#: The members B3 compares, and the one that decides whether it applies (P1–P4).
_COST_MEMBERS = frozenset({"content", "token_cost", "representation"})


def _sent_cost(data: Any, refused: set[str]) -> list[Violation]:
    """B3 on a frame the schema refused, as ``check_frame`` judges a parsed one: where
    B3 applies (a full or compact frame), its ``content`` is a string and its
    ``token_cost`` an integer, none of them refused, the declared cost must be
    ``ceil(utf8 bytes/4)``. ``check_frame`` reports every rule a frame breaks, so a
    frame with no title and a wrong cost is told both at once, not the cost only once
    the title is fixed."""
    if not isinstance(data, dict) or refused & _COST_MEMBERS:
        return []
    content, declared = data.get("content"), data.get("token_cost")
    if data.get("representation") not in (None, "full", "compact"):
        return []  # a reference frame's cost is P4's; an unknown one is P1's
    if not isinstance(content, str) or type(declared) is not int:
        return []
    honest = canonical_token_cost(content)
    return [] if declared == honest else [_b3(declared, honest)]


_FRAME_LIST: TypeAdapter[list[ContextFrame]] = TypeAdapter(list[ContextFrame])


def parse_frames(data: Sequence[Any]) -> list[tuple[ContextFrame | None, list[Violation]]]:
    """``parse_frame`` of each raw frame: the whole list validated in one call, and only
    when some frame breaks the schema, each on its own (so that one costs only itself).
    A frame already parsed is checked as it is."""
    frames: list[ContextFrame] | None = None
    if not any(isinstance(raw, ContextFrame) for raw in data):
        try:
            frames = _FRAME_LIST.validate_python(data)
        except ValidationError:
            frames = None
    if frames is None:
        return [
            (raw, check_frame(raw)) if isinstance(raw, ContextFrame) else parse_frame(raw)
            for raw in data
        ]
    return [(frame, check_frame(frame)) for frame in frames]


def check_frame(frame: ContextFrame) -> list[Violation]:
    """Frame validity: F1–F5, D1, P1–P4, B3, G1–G2 and the U2 notice.

    This runs on every frame of every leg, so the common case (a valid full
    frame) takes a straight path with no allocation beyond the result list.
    """
    v: list[Violation] = []
    score = frame.score
    # NaN fails both comparisons, infinities one: no separate finiteness test.
    if not (0.0 <= score <= 1.0):
        v.append(Violation("F1", "score", f"score {score!r} is outside [0, 1]"))
    if _blank(frame.title):
        v.append(Violation("F2", "title", "title is empty"))
    if _blank(frame.citation_label):
        v.append(Violation("F3", "citation_label", "citation_label is missing or blank"))
    if frame.valid_from is not None or frame.valid_to is not None or frame.recorded_at is not None:
        for name in ("valid_from", "valid_to", "recorded_at"):
            v.extend(check_timestamp(getattr(frame, name), name))
    for i, prov in enumerate(frame.provenance):
        if prov.type == "file" and not is_sha256_digest(prov.digest):
            v.append(
                Violation(
                    "F5",
                    f"provenance[{i}].digest",
                    "file provenance needs a sha256:<64 lowercase hex> digest",
                )
            )
    if frame.content_digest is not None and not is_sha256_digest(frame.content_digest):
        v.append(
            Violation(
                "D1",
                "content_digest",
                "not sha256:<64 lowercase hex> (not quoted)",
            )
        )
    if (
        frame.representation is None
        and frame.content is not None
        and frame.content_ref is None
        and frame.transform is None
        and frame.canonical_content_hash is None
    ):
        # The common full frame: only B3 can fail.
        honest = canonical_token_cost(frame.content)
        if frame.token_cost != honest:
            v.append(_b3(frame.token_cost, honest))
    else:
        v.extend(_check_representation(frame))
    for i, rel in enumerate(frame.relations):
        if _blank(rel.display_name):
            v.append(
                Violation("G1", f"relations[{i}].display_name", "relation has no display_name")
            )
        if _blank(rel.target_uri):
            v.append(Violation("G2", f"relations[{i}].target_uri", "relation target_uri is empty"))
    if frame.kind not in FRAME_KINDS:
        v.append(
            Violation(
                "U2",
                "kind",
                "unknown kind: kept as opaque evidence",
                Severity.NOTICE,
            )
        )
    return v


def _b3(declared: int, honest: int) -> Violation:
    return Violation(
        "B3",
        "token_cost",
        f"declared token_cost {declared} but ceil(utf8 bytes/4) is {honest}",
    )


def _check_representation(frame: ContextFrame) -> list[Violation]:
    rep = frame.effective_representation
    v: list[Violation] = []
    honest = canonical_token_cost(frame.content)
    if rep == Representation.FULL:
        if frame.content is None:
            v.append(Violation("P1", "content", "a full frame must carry content"))
        for name in ("content_ref", "transform", "canonical_content_hash"):
            if getattr(frame, name) is not None:
                v.append(Violation("P1", name, f"a full frame must not carry {name}"))
    elif rep == Representation.COMPACT:
        for name in ("content", "content_digest", "canonical_content_hash", "transform"):
            if getattr(frame, name) is None:
                v.append(Violation("P2", name, f"a compact frame must carry {name}"))
        if frame.content_ref is None:
            v.append(Violation("P2", "content_ref", "a compact frame must carry content_ref"))
    elif rep == Representation.REFERENCE:
        for name in ("content_ref", "canonical_content_hash"):
            if getattr(frame, name) is None:
                v.append(Violation("P3", name, f"a reference frame must carry {name}"))
        for name in ("content", "content_digest", "transform"):
            if getattr(frame, name) is not None:
                v.append(Violation("P3", name, f"a reference frame must not carry {name}"))
        if frame.token_cost != 0:
            v.append(
                Violation(
                    "P4",
                    "token_cost",
                    f"a reference frame declares token_cost 0, not {frame.token_cost}",
                )
            )
        return v
    else:
        v.append(
            Violation("P1", "representation", f"unknown representation {frame.representation!r}")
        )
        return v
    if frame.token_cost != honest:
        v.append(_b3(frame.token_cost, honest))
    return v


# --- leg-level rules (B1, B4, Q1, Q2) ------------------------------------------------


def check_kinds(query: ContextQuery, frames: Iterable[ContextFrame]) -> list[Violation]:
    """Q1: with a non-empty ``kinds``, no frame may be of another kind."""
    if not query.kinds:
        return []
    allowed = set(query.kinds)
    return [
        Violation("Q1", f"frames[{i}].kind", f"kind not in requested {sorted(allowed)}")
        for i, f in enumerate(frames)
        if f.kind not in allowed
    ]


def frame_in_window(frame: ContextFrame, as_of: str) -> bool:
    """Whether ``as_of`` falls in the frame's half-open ``[valid_from, valid_to)`` (Q2).

    A missing bound is open. Unparseable bounds make the frame fall outside.
    """
    at = parse_timestamp(as_of)
    return at is not None and _in_window(frame, at)


def _in_window(frame: ContextFrame, at: tuple[datetime, Decimal]) -> bool:
    """``frame_in_window`` with ``as_of`` parsed once for the whole leg; a frame with
    no bounds (the common case) builds no ``datetime`` at all."""
    if frame.valid_from is not None:
        lo = parse_timestamp(frame.valid_from)
        if lo is None or at < lo:
            return False
    if frame.valid_to is not None:
        hi = parse_timestamp(frame.valid_to)
        if hi is None or at >= hi:
            return False
    return True


def check_as_of(query: ContextQuery, frames: Iterable[ContextFrame]) -> list[Violation]:
    """Q2: with ``as_of`` set, every frame's validity window must contain it."""
    if query.as_of is None:
        return []
    at = parse_timestamp(query.as_of)
    return [
        Violation(
            "Q2",
            f"frames[{i}]",
            f"valid [{f.valid_from}, {f.valid_to}) does not contain as_of {query.as_of}",
        )
        for i, f in enumerate(frames)
        if at is None or not _in_window(f, at)
    ]


def check_budget(
    query: ContextQuery, frames: Sequence[ContextFrame], honest: int | None = None
) -> list[Violation]:
    """B1 and B4 on the honest (recomputed) costs, never the declared ones (B3).
    ``honest`` is their total when the caller already computed it (``accept_frames``)."""
    v: list[Violation] = []
    if honest is None:
        honest = sum(
            0
            if f.effective_representation == Representation.REFERENCE
            else canonical_token_cost(f.content)
            for f in frames
        )
    if honest > query.max_tokens:
        v.append(
            Violation(
                "B1",
                "frames",
                f"frames cost {honest} tokens, over the query's max_tokens {query.max_tokens}",
            )
        )
    if len(frames) > query.max_frames:
        v.append(
            Violation(
                "B4",
                "frames",
                f"{len(frames)} frames returned, over the query's max_frames {query.max_frames}",
            )
        )
    return v


def check_query(query: ContextQuery) -> list[Violation]:
    """A query's violations: a blank goal, an ``as_of`` that is not an F4 timestamp."""
    v: list[Violation] = []
    if _blank(query.goal):
        v.append(Violation("schema", "goal", "goal is empty"))
    v.extend(check_timestamp(query.as_of, "as_of"))
    return v


def check_representation_preferences(
    query: ContextQuery, capabilities: Capabilities
) -> list[Violation]:
    """P5: a host asks only for representations the provider advertised (full always)."""
    advertised = set(capabilities.representations) | {Representation.FULL.value}
    return [
        Violation(
            "P5",
            "representation_preferences",
            f"{rep!r} was not advertised in capabilities.representations",
        )
        for rep in query.representation_preferences or ()
        if rep not in advertised
    ]


# --- handshake (H1–H3, H2, C5) -------------------------------------------------------


def check_version(ours: str, theirs: str) -> list[Violation]:
    """H1/H3: a malformed version or a different major family is a named violation,
    naming the value to send (``ours``): an author fixes it from the message alone."""
    if not is_version_string(theirs):
        return [
            Violation(
                "H1",
                "protocol_version",
                f"{theirs!r} is not contextgraph/<major>.<minor>[-draft]; send {ours!r}",
            )
        ]
    if not versions_compatible(ours, theirs):
        return [
            Violation(
                "H3",
                "protocol_version",
                f"family {version_family(theirs)!r} differs from ours "
                f"{version_family(ours)!r}; send {ours!r}",
            )
        ]
    return []


def is_off_machine_scope(scope: str) -> bool:
    """Every egress scope but ``local-only`` (custom ``vendor:name`` ones included)."""
    return scope != LOCAL_ONLY_SCOPE


def check_data_flow(info: ProviderInfo) -> list[Violation]:
    """C5: an off-machine scope alongside ``egress: false`` is a contradiction."""
    flow = info.data_flow
    if flow.egress:
        return []
    return [
        Violation(
            "C5",
            f"data_flow.egress_scopes[{i}]",
            f"off-machine scope {scope!r} declared with egress: false",
        )
        for i, scope in enumerate(flow.egress_scopes)
        if is_off_machine_scope(scope)
    ]


def check_provider_info(info: ProviderInfo) -> list[Violation]:
    """H2 (non-empty name and version) and C5."""
    v: list[Violation] = []
    if _blank(info.name):
        v.append(Violation("H2", "provider.name", "provider name is empty"))
    if _blank(info.version):
        v.append(Violation("H2", "provider.version", "provider version is empty"))
    v.extend(check_data_flow(info))
    return v


def check_handshake(ours: str, ack: HandshakeAck) -> list[Violation]:
    """Everything a host checks before sending any payload: H1–H3, H2, C5."""
    return [*check_version(ours, ack.protocol_version), *check_provider_info(ack.provider)]
