"""Each protocol rule has a case that breaks it and a case that keeps it."""

from __future__ import annotations

from typing import Any

import pytest

from hostd.protocol import (
    PROTOCOL_VERSION,
    Capabilities,
    ContextFrame,
    ContextQuery,
    HandshakeAck,
    ProviderInfo,
    accept_frames,
    check_as_of,
    check_budget,
    check_frame,
    check_handshake,
    check_kinds,
    check_provider_info,
    check_query,
    check_representation_preferences,
    check_version,
    frame_in_window,
    parse_frame,
    parse_frames,
    sha256_digest,
    versions_compatible,
)

DIGEST = sha256_digest(b"x")


def frame(**over: Any) -> ContextFrame:
    base: dict[str, Any] = {
        "id": "f1",
        "kind": "snippet",
        "title": "A title",
        "content": "abcdefgh",
        "score": 0.5,
        "token_cost": 2,
        "citation_label": "a.py L1-2",
    }
    base.update(over)
    return ContextFrame.model_validate(base)


def rules(f: ContextFrame) -> list[tuple[str, str]]:
    return [(v.rule, v.field) for v in check_frame(f)]


def test_a_good_frame_has_no_violations() -> None:
    assert rules(frame()) == []


@pytest.mark.parametrize(
    ("over", "expected"),
    [
        ({"score": 1.01}, ("F1", "score")),
        ({"score": -0.1}, ("F1", "score")),
        ({"score": float("nan")}, ("F1", "score")),
        ({"title": ""}, ("F2", "title")),
        ({"title": "  "}, ("F2", "title")),
        ({"citation_label": None}, ("F3", "citation_label")),
        ({"citation_label": " \t "}, ("F3", "citation_label")),
        ({"valid_from": "2026-01-01 00:00:00Z"}, ("F4", "valid_from")),
        ({"valid_to": "2026-01-01T00:00:00+00:00"}, ("F4", "valid_to")),
        ({"recorded_at": "2026-13-01T00:00:00Z"}, ("F4", "recorded_at")),
        ({"recorded_at": "2026-01-01t00:00:00z"}, ("F4", "recorded_at")),
        ({"provenance": [{"type": "file", "uri": "file:///a"}]}, ("F5", "provenance[0].digest")),
        (
            {"provenance": [{"type": "file", "digest": "sha256:ABC"}]},
            ("F5", "provenance[0].digest"),
        ),
        ({"content_digest": "sha256:1234"}, ("D1", "content_digest")),
        ({"token_cost": 3}, ("B3", "token_cost")),
        ({"content": None, "token_cost": 0}, ("P1", "content")),
        (
            {"transform": {"method": "m", "implementation": "i", "version": "1"}},
            ("P1", "transform"),
        ),
        ({"relations": [{"rel": "calls", "target_uri": "x"}]}, ("G1", "relations[0].display_name")),
        (
            {"relations": [{"rel": "calls", "target_uri": "", "display_name": "X"}]},
            ("G2", "relations[0].target_uri"),
        ),
    ],
)
def test_broken_frame_rules_are_named(over: dict, expected: tuple[str, str]) -> None:
    assert expected in rules(frame(**over))


def test_valid_timestamps_and_file_digest_pass() -> None:
    f = frame(
        valid_from="2026-01-01T00:00:00Z",
        valid_to="2026-01-01T00:00:00.123456789Z",
        recorded_at="2026-02-28T23:59:59.5Z",
        provenance=[{"type": "file", "uri": "file:///a", "range": "L1-2", "digest": DIGEST}],
        content_digest=DIGEST,
        relations=[{"rel": "calls", "target_uri": "sym://x", "display_name": "x()"}],
    )
    assert rules(f) == []


@pytest.mark.parametrize(
    ("member", "sent", "said"),
    [
        ("token_cost", "2", "a string; expected a number (an integer)"),
        ("score", "0.5", "a string; expected a number"),
        ("score", True, "a boolean; expected a number"),
        ("token_cost", False, "a boolean; expected a number (an integer)"),
    ],
)
def test_a_number_sent_as_a_string_or_boolean_is_a_schema_violation(
    member: str, sent: Any, said: str
) -> None:
    """The schema's types, as the rule table says (a string ``token_cost``): a string
    that reads as a number is refused, never coerced, by the fast path and the exact one,
    naming the member and never quoting what was sent."""
    raw = {**_raw(0), member: sent}
    assert accept_frames([raw]) is None
    [(got, found)] = parse_frames([raw])
    assert got is None
    assert [(v.rule, v.field, v.message) for v in found] == [("schema", member, said)]


@pytest.mark.parametrize(
    ("over", "said"),
    [
        ({"title": None}, ("title", "null; expected a string")),
        ({"title": 5}, ("title", "a number; expected a string")),
        ({"title": ["a"]}, ("title", "an array; expected a string")),
        ({"id": 7}, ("id", "a number; expected a string")),
        ({"kind": {"k": "v"}}, ("kind", "an object; expected a string")),
        ({"provenance": "file.py"}, ("provenance", "a string; expected an array")),
        ({"token_cost": 1.5}, ("token_cost", "a fraction; expected a number (an integer)")),
    ],
)
def test_a_member_of_the_wrong_json_type_is_said_in_a_few_words(
    over: dict[str, Any], said: tuple[str, str]
) -> None:
    """A schema violation says what was sent by its JSON type and what the member takes,
    never the value, in the same few words wherever it is reported."""
    [(got, found)] = parse_frames([{**_raw(0), **over}])
    assert got is None
    assert [(v.field, v.message) for v in found] == [said]


def test_a_missing_member_is_said_missing() -> None:
    raw = _raw(0)
    del raw["title"]
    [(_got, found)] = parse_frames([raw])
    assert [(v.rule, v.field, v.message) for v in found] == [("schema", "title", "missing")]


@pytest.mark.parametrize(("member", "sent"), [("token_cost", 2.0), ("score", 1)])
def test_a_json_number_of_the_other_form_is_still_a_number(member: str, sent: Any) -> None:
    """JSON has one number type: ``2.0`` is the integer 2 (as JSON Schema's ``integer``
    reads it), ``1`` the score 1.0."""
    raw = {**_raw(0), member: sent}
    [(got, found)] = parse_frames([raw])
    assert got is not None and found == []
    assert getattr(got, member) == sent


def _raw(i: int, **over: Any) -> dict[str, Any]:
    return {**frame(id=f"f{i}").model_dump(mode="json", exclude_none=True), **over}


def _outcome(pair: tuple[ContextFrame | None, list[Any]]) -> tuple[Any, list[Any]]:
    got, found = pair
    return (None if got is None else got.model_dump()), [(v.rule, v.field) for v in found]


@pytest.mark.parametrize(
    "bad",
    [
        None,  # every frame good: one validation of the list
        {"score": "high"},  # a schema error: each on its own
        {"title": " "},  # valid shape, a rule broken (F2)
        {"token_cost": 99},  # B3
    ],
)
def test_a_reply_parses_as_each_of_its_frames_would_alone(bad: dict[str, Any] | None) -> None:
    raws: list[Any] = [_raw(i) for i in range(5)]
    if bad is not None:
        raws[2] = {**raws[2], **bad}
    raws.append(frame(id="parsed"))  # already a frame: checked as it is
    want = [
        _outcome((r, check_frame(r)) if isinstance(r, ContextFrame) else parse_frame(r))
        for r in raws
    ]
    assert [_outcome(p) for p in parse_frames(raws)] == want
    assert [_outcome(p) for p in parse_frames(raws[:-1])] == want[:-1]
    # a schema error costs its own frame only
    assert [got is None for got, _ in parse_frames(raws)] == [
        bad is not None and "score" in bad and i == 2 for i in range(6)
    ]


def test_non_file_provenance_needs_no_digest() -> None:
    assert rules(frame(provenance=[{"type": "derivation", "range": "step:2"}])) == []


def _ref(**over: Any) -> ContextFrame:
    base = {
        "representation": "reference",
        "content": None,
        "token_cost": 0,
        "canonical_content_hash": DIGEST,
        "content_ref": {"provider_id": "p", "uri": "ctx://p/1"},
    }
    base.update(over)
    return frame(**base)


def _compact(**over: Any) -> ContextFrame:
    base = {
        "representation": "compact",
        "content_digest": sha256_digest(b"abcdefgh"),
        "canonical_content_hash": DIGEST,
        "transform": {"method": "summary", "implementation": "x", "version": "1"},
        "content_ref": {"provider_id": "p", "uri": "ctx://p/1"},
    }
    base.update(over)
    return frame(**base)


def test_representation_rules_p2_p3_p4() -> None:
    assert rules(_ref()) == []
    assert rules(_compact()) == []
    assert ("P3", "content") in rules(_ref(content=""))
    assert ("P3", "content_digest") in rules(_ref(content_digest=DIGEST))
    assert ("P3", "content_ref") in rules(_ref(content_ref=None))
    assert ("P4", "token_cost") in rules(_ref(token_cost=5))
    assert ("P2", "transform") in rules(_compact(transform=None))
    assert ("P2", "content_ref") in rules(_compact(content_ref=None))
    assert ("B3", "token_cost") in rules(_compact(token_cost=40))
    assert ("P1", "representation") in rules(frame(representation="hologram"))


def test_p5_only_advertised_representations_are_requested() -> None:
    q = ContextQuery(
        goal="g", max_frames=1, max_tokens=1, representation_preferences=["compact", "full"]
    )
    assert [v.rule for v in check_representation_preferences(q, Capabilities())] == ["P5"]
    caps = Capabilities(representations=["compact"], resolve=True)
    assert check_representation_preferences(q, caps) == []


def _query(**over: Any) -> ContextQuery:
    base: dict[str, Any] = {"goal": "g", "max_frames": 2, "max_tokens": 4}
    base.update(over)
    return ContextQuery.model_validate(base)


def test_b1_b4_use_honest_costs() -> None:
    cheap = frame(content="abcd", token_cost=1)
    assert check_budget(_query(), [cheap, cheap]) == []
    assert [v.rule for v in check_budget(_query(), [cheap, cheap, cheap, cheap, cheap])] == [
        "B1",
        "B4",
    ]
    three = check_budget(_query(max_tokens=10), [cheap, cheap, cheap])
    assert [v.rule for v in three] == ["B4"]
    # A frame lying low (declares 1, costs 4) still counts 3 against max_tokens.
    liar = frame(content="abcdefghijklmnop", token_cost=1)
    assert [v.rule for v in check_budget(_query(), [liar, cheap])] == ["B1"]


def test_q1_kinds_filter() -> None:
    f = frame(kind="fact")
    assert check_kinds(_query(), [f]) == []  # empty kinds = any
    assert check_kinds(_query(kinds=["fact"]), [f]) == []
    assert [v.rule for v in check_kinds(_query(kinds=["doc"]), [f])] == ["Q1"]


def test_q2_half_open_window() -> None:
    f = frame(valid_from="2026-01-01T00:00:00Z", valid_to="2026-02-01T00:00:00Z")
    assert frame_in_window(f, "2026-01-01T00:00:00Z")  # at valid_from: inside
    assert frame_in_window(f, "2026-01-31T23:59:59.999Z")
    assert not frame_in_window(f, "2026-02-01T00:00:00Z")  # at valid_to: outside
    assert not frame_in_window(f, "2025-12-31T23:59:59Z")
    assert frame_in_window(frame(), "1999-01-01T00:00:00Z")  # open bounds
    assert check_as_of(_query(), [f]) == []
    assert [v.rule for v in check_as_of(_query(as_of="2026-03-01T00:00:00Z"), [f])] == ["Q2"]


def test_fractional_seconds_compare_exactly() -> None:
    f = frame(valid_to="2026-01-01T00:00:00.0000001Z")
    assert frame_in_window(f, "2026-01-01T00:00:00Z")
    assert not frame_in_window(f, "2026-01-01T00:00:00.0000001Z")


def test_query_checks() -> None:
    assert check_query(_query()) == []
    assert [v.rule for v in check_query(_query(as_of="yesterday"))] == ["F4"]
    assert [v.field for v in check_query(_query(goal=" "))] == ["goal"]


@pytest.mark.parametrize(
    ("theirs", "ok"),
    [
        ("contextgraph/1.0-draft", True),
        ("contextgraph/1.0", True),
        ("contextgraph/1.7", True),
        ("contextgraph/2.0", False),
        ("contextgraph/10.0", False),
        ("contextgraph/1", False),
        ("cgp/1.0", False),
        ("", False),
    ],
)
def test_version_family_compatibility(theirs: str, ok: bool) -> None:
    assert versions_compatible(PROTOCOL_VERSION, theirs) is ok
    assert (check_version(PROTOCOL_VERSION, theirs) == []) is ok


def test_version_mismatch_is_h3_and_malformed_is_h1() -> None:
    assert [v.rule for v in check_version(PROTOCOL_VERSION, "contextgraph/2.0")] == ["H3"]
    assert [v.rule for v in check_version(PROTOCOL_VERSION, "nonsense")] == ["H1"]


@pytest.mark.parametrize("theirs", ["contextgraph/1", "contextgraph/2.0"])
def test_a_version_refused_names_the_value_to_send(theirs: str) -> None:
    (violation,) = check_version(PROTOCOL_VERSION, theirs)
    assert violation.message.endswith(f"; send {PROTOCOL_VERSION!r}"), violation.message


def _info(**over: Any) -> ProviderInfo:
    base: dict[str, Any] = {"name": "p", "version": "1.0", "data_flow": {"reads": True}}
    base.update(over)
    return ProviderInfo.model_validate(base)


def test_h2_names_and_versions_must_not_be_empty() -> None:
    assert check_provider_info(_info()) == []
    assert [(v.rule, v.field) for v in check_provider_info(_info(name=""))] == [
        ("H2", "provider.name")
    ]
    assert [(v.rule, v.field) for v in check_provider_info(_info(version=" "))] == [
        ("H2", "provider.version")
    ]


def test_c5_off_machine_scope_with_egress_false() -> None:
    local = _info(data_flow={"egress": False, "egress_scopes": ["local-only"]})
    assert check_provider_info(local) == []
    liar = _info(data_flow={"egress": False, "egress_scopes": ["local-only", "acme:store"]})
    assert [(v.rule, v.field) for v in check_provider_info(liar)] == [
        ("C5", "data_flow.egress_scopes[1]")
    ]
    honest = _info(data_flow={"egress": True, "egress_scopes": ["third-party-model"]})
    assert check_provider_info(honest) == []


def test_check_handshake_combines_version_and_identity() -> None:
    ack = HandshakeAck(protocol_version="contextgraph/2.0", provider=_info(name=""))
    assert sorted(v.rule for v in check_handshake(PROTOCOL_VERSION, ack)) == ["H2", "H3"]


def test_violations_serialise_with_rule_and_field() -> None:
    (v,) = check_frame(frame(title=""))
    assert v.to_wire() == {
        "rule": "F2",
        "field": "title",
        "message": "title is empty",
        "severity": "error",
    }


@pytest.mark.parametrize(
    ("given", "stamp"),
    [
        ("2026-11-02T09:30:00Z", "2026-11-02T09:30:00Z"),
        ("2026-11-02T09:30:00.25Z", "2026-11-02T09:30:00.25Z"),
        ("2026-11-02", "2026-11-02T00:00:00Z"),
        ("2026-11-02T10:30:00+01:00", "2026-11-02T09:30:00Z"),
        ("2026-11-01T23:30:00.500-01:00", "2026-11-02T00:30:00.500Z"),
        ("2026-02-30", None),
        ("yesterday", None),
        ("2026-11-02T10:30:00+25:00", None),
    ],
)
def test_a_date_or_an_offset_time_is_made_its_utc_stamp(given: str, stamp: str | None) -> None:
    from hostd.protocol import check_timestamp, utc_timestamp

    assert utc_timestamp(given) == stamp
    if stamp is not None:
        assert check_timestamp(stamp, "as_of") == []


def test_the_api_takes_a_date_as_of_and_a_date_valid_from_as_their_utc_stamps() -> None:
    from hostd.server import ComposeParams
    from hostd.server._params import RememberParams

    params = ComposeParams.model_validate({"goal": "g", "as_of": "2026-03-01"})
    assert params.as_of == "2026-03-01T00:00:00Z"
    kept = ComposeParams.model_validate({"goal": "g", "as_of": "not a time"})
    assert kept.as_of == "not a time"  # refused later by the F4 check, in its words
    write = RememberParams.model_validate(
        {"kind": "fact", "title": "t", "content": "c", "valid_from": "2026-03-01T01:00:00+01:00"}
    )
    assert write.valid_from == "2026-03-01T00:00:00Z"
