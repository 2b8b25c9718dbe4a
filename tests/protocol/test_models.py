"""Wire models against the protocol's published vectors: parse, re-serialise, U1, U2."""

from __future__ import annotations

import json
from typing import Any

import jsonschema
import pytest

from hostd.protocol import (
    FRAME_KINDS,
    PROTOCOL_VERSION,
    Capabilities,
    ContextFrame,
    ContextQuery,
    ErrorEnvelope,
    FrameId,
    FramesEnvelope,
    HandshakeAckEnvelope,
    VerdictStatus,
    VerifiedEnvelope,
    check_frame,
    parse_envelope,
    parse_frame,
    read_cgp_code,
    sha256_digest,
    unknown_members,
)

from ._vectors import load_json, load_ndjson

REFERENCE = load_ndjson("schema/reference-vectors.ndjson")
SESSION = load_ndjson("examples/full-stdio-session.ndjson")
MESSAGES = load_json("examples/reference-messages.json")
SCHEMA = load_json("schema/contextgraph-envelope.schema.json")


def _strip_nulls(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _strip_nulls(v) for k, v in value.items() if v is not None}
    if isinstance(value, list):
        return [_strip_nulls(v) for v in value]
    return value


def _contained(original: Any, out: Any, path: str = "") -> None:
    """Every member of ``original`` is in ``out`` with the same value (defaults may be added)."""
    if isinstance(original, dict):
        assert isinstance(out, dict), path
        for key, value in original.items():
            assert key in out, f"{path}.{key} lost in re-serialisation"
            _contained(value, out[key], f"{path}.{key}")
    elif isinstance(original, list):
        assert isinstance(out, list) and len(out) == len(original), path
        for i, (a, b) in enumerate(zip(original, out, strict=True)):
            _contained(a, b, f"{path}[{i}]")
    else:
        assert original == out, f"{path}: {original!r} != {out!r}"


def _lint(defn: str, value: Any) -> None:
    """Validate what we emit against one authoring-strict schema definition."""
    jsonschema.validate(value, {"$defs": SCHEMA["$defs"], "$ref": f"#/$defs/{defn}"})


ALL_ENVELOPES = (
    [pytest.param(m, id=f"reference-{i + 1}") for i, m in enumerate(REFERENCE)]
    + [pytest.param(m, id=f"session-{i + 1}") for i, m in enumerate(SESSION)]
    + [pytest.param(m, id=f"messages-{i + 1}") for i, m in enumerate(MESSAGES)]
)


@pytest.mark.parametrize("message", ALL_ENVELOPES)
def test_every_published_envelope_parses_and_reserialises(message: dict) -> None:
    env = parse_envelope(message)
    assert env.type == message["type"]
    out = env.to_wire()
    _contained(_strip_nulls(message), out)
    # Idempotent: a second trip changes nothing.
    assert parse_envelope(out).to_wire() == out
    # What we emit passes the authoring-strict schema (it rejects unknown members).
    jsonschema.validate(out, SCHEMA)


def test_minimal_handshake_ack_defaults_to_any_kind_and_no_capabilities() -> None:
    ack = parse_envelope(REFERENCE[1])
    assert isinstance(ack, HandshakeAckEnvelope)
    assert ack.capabilities.query.kinds == []
    assert not (ack.capabilities.verify or ack.capabilities.correlation or ack.capabilities.graph)
    assert ack.provider.data_flow.egress_scopes == []


def test_maximal_handshake_ack_carries_egress_scopes_and_fingerprint() -> None:
    ack = parse_envelope(REFERENCE[2])
    assert ack.provider.data_flow.egress is True
    assert "acme:vector-store" in ack.provider.data_flow.egress_scopes
    assert ack.capabilities.embeddings_fingerprint == "bge-small-en-v1.5/384/l2"


def test_reference_frames_have_honest_costs_and_representations() -> None:
    env = parse_envelope(REFERENCE[6])
    assert isinstance(env, FramesEnvelope)
    frames = [ContextFrame.model_validate(f) for f in env.result.frames]
    assert [f.token_cost for f in frames] == [12, 10, 9, 0]
    assert [f.effective_representation for f in frames] == ["full", "full", "compact", "reference"]
    assert env.result.truncated is True and env.result.dropped_estimate == 12
    # Placeholder digests are well formed, so no frame breaks a rule.
    assert [[v.rule for v in check_frame(f)] for f in frames] == [[], [], [], []]
    for raw in env.result.frames:
        _lint("ContextFrame", ContextFrame.model_validate(raw).to_wire())


def test_verified_statuses_and_missing_codes() -> None:
    verified = parse_envelope(REFERENCE[8])
    assert isinstance(verified, VerifiedEnvelope)
    assert [v.verdict for v in verified.response.verdicts] == [
        VerdictStatus.VALID,
        VerdictStatus.STALE,
        VerdictStatus.STALE,
        VerdictStatus.GONE,
        VerdictStatus.UNKNOWN,
    ]
    assert verified.response.verdicts[1].replacement_digest is not None
    errors = [parse_envelope(m) for m in REFERENCE[10:13]]
    assert all(isinstance(e, ErrorEnvelope) for e in errors)
    # X2 absent code, X1 unknown code: both internal; bad_request is recognised.
    assert [read_cgp_code(e.code).value for e in errors] == ["internal", "bad_request", "internal"]
    assert errors[1].id is not None


def test_unrecognised_verdict_status_reads_as_unknown() -> None:
    verdict = {"frame": {"provider_id": "p", "frame_id": "f"}, "status": "maybe"}
    env = parse_envelope({"type": "verified", "response": {"verdicts": [verdict]}})
    assert env.response.verdicts[0].verdict is VerdictStatus.UNKNOWN


def test_session_transcript_budget_and_kinds() -> None:
    query = parse_envelope(SESSION[2]).query
    frames_env = parse_envelope(SESSION[3])
    frames = [ContextFrame.model_validate(f) for f in frames_env.result.frames]
    assert [f.token_cost for f in frames] == [32, 18]
    assert sum(f.token_cost for f in frames) <= query.max_tokens  # B1
    assert len(frames) <= query.max_frames  # B4
    assert {f.kind for f in frames} <= set(query.kinds)  # Q1
    verdicts = parse_envelope(SESSION[5]).response.verdicts
    by_id = {v.frame.frame_id: v for v in verdicts}
    assert by_id["repo-graph:retry-doc"].verdict is VerdictStatus.VALID
    assert by_id["repo-graph:retry-sym"].verdict is VerdictStatus.STALE


def test_upstream_example_defects_are_flagged() -> None:
    frames_msgs = [m for m in MESSAGES if m["type"] == "frames"]
    findings = {}
    for msg in frames_msgs:
        for raw in msg["result"]["frames"]:
            frame, violations = parse_frame(raw)
            assert frame is not None
            findings[frame.id] = {v.rule for v in violations}
    # Short digests break D1; the compact runbook misstates its cost (24, honest 20).
    assert "D1" in findings["cloud-docs:runbook-compact"]
    assert "B3" in findings["cloud-docs:runbook-compact"]


def test_egress_provider_in_examples_declares_a_third_party_scope() -> None:
    acks = [parse_envelope(m) for m in MESSAGES if m["type"] == "handshake_ack"]
    egress = [a for a in acks if a.provider.data_flow.egress]
    assert egress and egress[0].provider.data_flow.egress_scopes == ["third-party-model"]
    assert egress[0].capabilities.verify is False


def test_compact_fixture_digest_covers_the_inline_bytes() -> None:
    raw = load_json("fixtures/context-frame.compact.valid.json")
    frame, violations = parse_frame(raw)
    assert frame is not None and violations == []
    assert frame.content is not None
    assert sha256_digest(frame.content.encode("utf-8")) == frame.content_digest


def test_reference_fixture_has_no_content_and_costs_nothing() -> None:
    frame, violations = parse_frame(load_json("fixtures/context-frame.reference.valid.json"))
    assert frame is not None and violations == []
    assert frame.content is None and frame.token_cost == 0


@pytest.mark.parametrize("case", ["missing", "blank"])
def test_missing_or_blank_citation_is_named_f3(case: str) -> None:
    raw = load_json("fixtures/context-frame.missing-citation.invalid.json")[case]
    frame, violations = parse_frame(raw)
    assert frame is not None
    f3 = [v for v in violations if v.rule == "F3"]
    assert [v.field for v in f3] == ["citation_label"]


STRICT = load_json("fixtures/strict-validation.invalid.json")["cases"]


@pytest.mark.parametrize("case", STRICT, ids=[c["name"] for c in STRICT])
def test_strict_profile_names_the_unknown_path_while_live_parsing_ignores_it(case: dict) -> None:
    assert unknown_members(case["input"], case["target"]) == [case["unknown_path"]]
    model = ContextFrame if case["target"] == "frame" else ContextQuery
    parsed = model.model_validate(case["input"])  # U1: live input keeps working
    assert "future_field" not in json.dumps(parsed.to_wire())


def test_unknown_kind_is_opaque_evidence_with_a_notice() -> None:
    raw = {
        "id": "x",
        "kind": "hologram",
        "title": "t",
        "content": "abcd",
        "score": 0.5,
        "token_cost": 1,
        "citation_label": "x",
    }
    frame, violations = parse_frame(raw)
    assert frame is not None and frame.kind == "hologram"
    assert frame.kind not in FRAME_KINDS  # what the U2 rule checks
    assert [(v.rule, v.severity.value) for v in violations] == [("U2", "notice")]


def test_shape_errors_become_named_violations_not_exceptions() -> None:
    frame, violations = parse_frame({"id": "x", "kind": "fact", "score": "high"})
    assert frame is None
    fields = {v.field for v in violations}
    assert {"title", "score", "token_cost"} <= fields
    assert all(v.rule == "schema" for v in violations)
    frame, violations = parse_frame("not an object")
    assert frame is None and violations


def test_frame_id_orders_canonically_with_missing_digest_first() -> None:
    ids = [
        FrameId("b", "1", None),
        FrameId("a", "2", "sha256:1"),
        FrameId("a", "1", "sha256:2"),
        FrameId("a", "1", None),
        FrameId("a", "1", "sha256:1"),
    ]
    assert sorted(ids) == [
        FrameId("a", "1", None),
        FrameId("a", "1", "sha256:1"),
        FrameId("a", "1", "sha256:2"),
        FrameId("a", "2", "sha256:1"),
        FrameId("b", "1", None),
    ]
    assert len({FrameId("a", "1", None), FrameId("a", "1", None)}) == 1
    assert FrameId("a", "1", None) != FrameId("a", "1", "")


def test_frame_id_wire_round_trip() -> None:
    fid = FrameId("p", "f", "sha256:" + "0" * 64)
    assert FrameId.from_wire(fid.to_wire()) == fid
    assert FrameId.from_wire({"provider_id": "p", "frame_id": "f"}).content_digest is None


@pytest.mark.parametrize("digest", [None, "", "sha256:" + "0" * 64])
def test_frame_id_survives_pickle_and_copy_with_its_fields(digest: str | None) -> None:
    import copy
    import pickle

    fid = FrameId("p", "f", digest)
    for clone in (pickle.loads(pickle.dumps(fid)), copy.copy(fid), copy.deepcopy(fid)):
        assert type(clone) is FrameId and clone == fid and hash(clone) == hash(fid)
        assert (clone.provider_id, clone.frame_id, clone.content_digest) == ("p", "f", digest)
    assert fid == ("p", "f", digest is not None, digest or "")  # it is its own sort key
    assert repr(fid) == f"FrameId(provider_id='p', frame_id='f', content_digest={digest!r})"


@pytest.mark.parametrize("digest", [None, "", "sha256:" + "0" * 64])
def test_frame_id_of_and_many_build_what_the_constructor_builds(digest: str | None) -> None:
    frame = ContextFrame(
        id="f", kind="doc", title="t", score=0.5, token_cost=0, content_digest=digest
    )
    made = FrameId("p", "f", digest)
    for fid in (FrameId.of("p", frame), *FrameId.many("p", [frame])):
        assert type(fid) is FrameId and fid == made and hash(fid) == hash(made)
        assert fid.content_digest == digest
    assert FrameId.many("p", []) == []


def test_capabilities_ignore_unknown_members() -> None:
    caps = Capabilities.model_validate({"query": {"kinds": ["doc"], "x": 1}, "teleport": True})
    assert caps.query.kinds == ["doc"]


def test_protocol_version_constant_is_well_formed() -> None:
    _lint("versionString", PROTOCOL_VERSION)
