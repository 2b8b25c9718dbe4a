"""``hostd.client``'s typed results, read from wire dicts: every member an attribute,
unknown members carried but never read (U1), ``to_wire()`` the dict received, and a
reply that does not fit one ``UnexpectedReply`` naming fields, never values."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from hostd.client import ComposeResult, Evidence, UnexpectedReply

TEXT = st.text(max_size=12)
DIGEST = st.just("sha256:" + "ab" * 32)
FLOAT = st.floats(allow_nan=False, allow_infinity=False, width=64)
COUNT = st.integers(0, 10**9)
JSON = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**53), 2**53) | FLOAT | TEXT,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(TEXT, inner, max_size=3),
    max_leaves=8,
)
#: Members no model knows: a newer daemon's additions.
UNKNOWN = st.dictionaries(st.sampled_from(["sparkle", "next_1", "zz"]), JSON, max_size=2)


@st.composite
def obj(draw: st.DrawFn, required: dict[str, Any], optional: dict[str, Any]) -> dict[str, Any]:
    """An object with every ``required`` member, any subset of ``optional`` ones (each
    present with a value, present as ``null`` where the strategy allows it, or absent)
    and maybe unknown members."""
    out = {k: draw(s) for k, s in required.items()}
    for k, s in optional.items():
        if draw(st.booleans()):
            out[k] = draw(s)
    for k, v in draw(UNKNOWN).items():
        out.setdefault(k, v)
    return out


def frame_ref() -> st.SearchStrategy[dict[str, Any]]:
    return obj({"provider_id": TEXT, "frame_id": TEXT}, {"content_digest": st.none() | DIGEST})


def verification() -> st.SearchStrategy[dict[str, Any]]:
    state = st.sampled_from(["source_verified", "content_checked", "unverifiable", "unchecked"])
    return obj({"state": state}, {"reason": st.none() | TEXT, "content_checked": st.booleans()})


def provenance() -> st.SearchStrategy[dict[str, Any]]:
    return obj(
        {"type": st.sampled_from(["file", "derivation"])},
        {"uri": st.none() | TEXT, "range": st.none() | TEXT, "digest": DIGEST},
    )


def evidence() -> st.SearchStrategy[dict[str, Any]]:
    return obj(
        {
            "label": TEXT,
            "provider_id": TEXT,
            "frame_id": TEXT,
            "kind": TEXT,
            "title": TEXT,
            "uri": st.none() | TEXT,
            "range": st.none() | TEXT,
            "content": st.none() | st.text(max_size=40),
            "content_digest": st.none() | DIGEST,
            "score": st.none() | FLOAT,
            "rank": st.none() | COUNT,
            "verification": st.none() | verification(),
        },
        {},
    )


def audit_entry() -> st.SearchStrategy[dict[str, Any]]:
    return obj(
        {
            "frame": frame_ref(),
            "provider": TEXT,
            "disposition": st.sampled_from(["included", "excluded"]),
        },
        {
            "reason": TEXT,
            "detail": st.dictionaries(TEXT, JSON, max_size=3),
            "rank": COUNT,
            "score": st.none() | FLOAT,
            "tokens": COUNT,
            "position": st.none() | COUNT,
            "verification": st.none() | verification(),
            "vouched_by": st.lists(TEXT, max_size=2),
        },
    )


def report() -> st.SearchStrategy[dict[str, Any]]:
    return obj(
        {
            "provider_id": TEXT,
            "status": st.sampled_from(["ok", "timeout", "no_consent", "warming"]),
            "frames_offered": COUNT,
            "frames_accepted": COUNT,
            "latency_ms": FLOAT,
            "tokens_accepted": COUNT,
            "violations": st.lists(st.dictionaries(TEXT, JSON, max_size=2), max_size=2),
        },
        {
            "max_tokens": COUNT,
            "share": COUNT,
            "error": obj({"code": TEXT, "message": TEXT}, {}),
            "missing_scopes": st.lists(TEXT, max_size=2),
        },
    )


def compose_reply() -> st.SearchStrategy[dict[str, Any]]:
    audit = obj(
        {
            "entries": st.lists(audit_entry(), max_size=3),
            "global_budget": COUNT,
            "tokens_used": COUNT,
            "policy": st.dictionaries(TEXT, JSON, max_size=3),
            "floors": st.lists(
                obj({"label": TEXT, "position": TEXT, "tokens": COUNT}, {}), max_size=2
            ),
        },
        {},
    )
    usage = obj(
        {
            "budget_consumed": COUNT,
            "global_budget": COUNT,
            "frames": st.lists(obj({"frame": frame_ref(), "token_cost": COUNT}, {}), max_size=2),
            "providers": st.dictionaries(TEXT, COUNT, max_size=2),
        },
        {
            "prompt": obj(
                {"bytes": COUNT, "canonical_tokens": COUNT},
                {"tokens": COUNT, "tokenizer": TEXT},
            )
        },
    )
    reason = obj({"reason": TEXT}, {"provider": st.none() | TEXT, "detail": st.none() | TEXT})
    return obj(
        {
            "prompt": st.text(max_size=40),
            "citations": st.lists(
                obj(
                    {"label": TEXT, "frame": frame_ref(), "provenance": st.lists(provenance())},
                    {},
                ),
                max_size=3,
            ),
            "audit": audit,
            "providers": st.lists(report(), max_size=2),
            "usage": usage,
            "request_id": TEXT,
        },
        {
            "evidence": st.lists(evidence(), max_size=3),
            "verification": st.dictionaries(TEXT, JSON, max_size=3),
            "recorded": st.booleans(),
            "degraded": st.booleans(),
            "degraded_reasons": st.lists(reason, max_size=2),
        },
    )


def _canonical(value: Any) -> str:
    return json.dumps(value, sort_keys=True, ensure_ascii=False)


@pytest.mark.slow
@settings(max_examples=150, deadline=None)
@given(compose_reply())
def test_to_wire_gives_back_the_exact_dict_received(wire: dict[str, Any]) -> None:
    result = ComposeResult.model_validate(wire)
    back = result.to_wire()
    assert back == wire
    # Not merely equal: the same JSON (no 1 read back as 1.0, no null added or lost).
    assert _canonical(back) == _canonical(wire)
    assert result.prompt == wire["prompt"] and result.request_id == wire["request_id"]
    assert [e.content for e in result.evidence] == [e["content"] for e in wire.get("evidence", [])]
    assert [c.to_wire() for c in result.citations] == wire["citations"]


@settings(max_examples=50, deadline=None)
@given(compose_reply())
def test_members_read_as_attributes(wire: dict[str, Any]) -> None:
    result = ComposeResult.model_validate(wire)
    assert [e.frame.frame_id for e in result.audit.entries] == [
        e["frame"]["frame_id"] for e in wire["audit"]["entries"]
    ]
    assert [e.included for e in result.audit.entries] == [
        e["disposition"] == "included" for e in wire["audit"]["entries"]
    ]
    assert len(result.audit.included()) + len(result.audit.excluded()) == len(result.audit.entries)
    assert [(r.provider_id, r.ok) for r in result.providers] == [
        (r["provider_id"], r["status"] == "ok") for r in wire["providers"]
    ]
    assert result.tokens_used == wire["audit"]["tokens_used"]
    assert result.degraded is wire.get("degraded")


def _minimal() -> dict[str, Any]:
    return {
        "prompt": "p",
        "citations": [],
        "audit": {"entries": [], "global_budget": 10, "tokens_used": 0, "policy": {}},
        "providers": [],
        "usage": {"budget_consumed": 0, "global_budget": 10, "frames": [], "providers": {}},
        "request_id": "r-1",
    }


def test_an_unknown_member_is_carried_but_not_read() -> None:
    wire = _minimal()
    wire["hologram"] = {"nested": [1, 2.5, None]}
    wire["audit"]["sparkle"] = True
    result = ComposeResult.model_validate(wire)
    assert result.to_wire() == wire
    assert "hologram" not in ComposeResult.model_fields
    # Without asking for it, there is no evidence: the list is empty, the wire unchanged.
    assert result.evidence == [] and "evidence" not in result.to_wire()
    assert result.degraded is None and result.degraded_reasons == []


def test_a_citation_reads_its_rank_as_hostd_compose_json_gives_it() -> None:
    wire = _minimal()
    a = {"provider_id": "files", "frame_id": "a.c#L1-9", "content_digest": None}
    b = {"provider_id": "files", "frame_id": "b.c#L4-7", "content_digest": None}
    # Prompt order (``edges``: the best first, the next best last) is not rank order.
    wire["citations"] = [{"label": "a.c", "frame": a}, {"label": "b.c", "frame": b}]
    wire["audit"]["entries"] = [
        {"frame": a, "provider": "files", "disposition": "included", "rank": 0},
        {"frame": b, "provider": "files", "disposition": "included", "rank": 1},
        {"frame": {**b, "frame_id": "x"}, "provider": "files", "disposition": "excluded"},
    ]
    wire["citations"].reverse()
    result = ComposeResult.model_validate(wire)
    assert [(c.label, c.rank) for c in result.citations] == [("b.c", 1), ("a.c", 0)]
    # Read, not received: the wire's dict is what came.
    assert result.to_wire() == wire and "rank" not in result.citations[0].to_wire()


@settings(max_examples=50, deadline=None)
@given(compose_reply())
def test_citation_ranks_are_the_clis(wire: dict[str, Any]) -> None:
    from hostd._citations import ranked_citations

    result = ComposeResult.model_validate(wire)
    assert [c.rank for c in result.citations] == [c.get("rank") for c in ranked_citations(wire)]


def test_evidence_reads_who_vouched_for_it_off_its_included_audit_entry() -> None:
    wire = _minimal()
    kept = {"provider_id": "semantic", "frame_id": "a.c#L1-9", "content_digest": "sha256:1"}
    plain = {"provider_id": "files", "frame_id": "b.c#L1-2", "content_digest": None}
    item = {"kind": "snippet", "title": "a.c", "content": "x"}
    # The first is a span merged from two providers' copies: its content (the union)
    # has a digest of its own, so only its place in the prompt finds its entry.
    wire["evidence"] = [
        {**item, **kept, "label": "a.c", "content_digest": "sha256:union"},
        {**item, **plain, "label": "b.c"},
    ]
    wire["audit"]["entries"] = [
        {"frame": plain, "provider": "files", "disposition": "included", "position": 1}
        | {"vouched_by": ["files"]},
        {"frame": kept, "provider": "semantic", "disposition": "included", "position": 0}
        | {"vouched_by": ["files", "semantic"]},
        {"frame": {**kept, "provider_id": "files"}, "provider": "files"}
        | {"disposition": "excluded", "reason": "duplicate", "vouched_by": ["memory"]},
    ]
    result = ComposeResult.model_validate(wire)
    assert [e.vouched_by for e in result.evidence] == [["files", "semantic"], ["files"]]
    # Read, not received: the wire's dict is what came.
    assert result.to_wire() == wire and "vouched_by" not in result.evidence[0].to_wire()
    # A daemon whose audit names none: empty.
    for entry in wire["audit"]["entries"]:
        entry.pop("vouched_by")
    assert [e.vouched_by for e in ComposeResult.model_validate(wire).evidence] == [[], []]


def test_evidence_reads_its_validity_window() -> None:
    item = Evidence.model_validate(
        {"label": "fact #2", "provider_id": "memory", "frame_id": "mem-2", "kind": "fact"}
        | {"title": "staging DB", "valid_from": "2026-06-01T00:00:00Z", "valid_to": None}
    )
    assert (item.valid_from, item.valid_to) == ("2026-06-01T00:00:00Z", None)


def test_the_models_are_frozen() -> None:
    item = Evidence(label="l", provider_id="p", frame_id="f", kind="doc", title="t")
    with pytest.raises(ValueError, match="frozen"):
        item.content = "changed"


@pytest.mark.parametrize(
    ("path", "value", "where"),
    [
        (("audit", "tokens_used"), "SECRET-ONE", "audit.tokens_used"),
        (("prompt",), ["SECRET-ONE"], "prompt"),
        (("usage", "providers"), {"alpha": "SECRET-ONE"}, "usage.providers.alpha"),
    ],
)
def test_a_reply_that_does_not_fit_names_the_field_never_the_value(
    path: tuple[str, ...], value: Any, where: str
) -> None:
    from hostd.client._results import parse_reply

    wire = _minimal()
    target = wire
    for key in path[:-1]:
        target = target[key]
    target[path[-1]] = value
    with pytest.raises(UnexpectedReply) as caught:
        parse_reply(ComposeResult, wire, "context/compose")
    err = caught.value
    assert where in err.data["fields"] and where in str(err)
    assert "SECRET" not in str(err) and "SECRET" not in repr(err.data)
    assert err.__cause__ is None and err.__suppress_context__  # the pydantic text quotes it
    assert err.reason == "unexpected_reply"


def test_a_missing_member_is_named() -> None:
    from hostd.client._results import parse_reply

    wire = _minimal()
    del wire["request_id"]
    with pytest.raises(UnexpectedReply) as caught:
        parse_reply(ComposeResult, wire, "context/compose")
    assert caught.value.data["fields"] == ["request_id"]


def test_docs_api_md_names_every_model_and_member() -> None:
    import re
    from pathlib import Path

    import hostd.client as client
    from hostd.client._results import WireResult

    api = (Path(__file__).resolve().parents[2] / "docs" / "api.md").read_text("utf-8")
    section = api.split("### Typed results\n", 1)[1].split("\n### ", 1)[0]
    rows = {
        name: row
        for row in section.splitlines()
        if row.startswith("| `")
        for name in re.findall(r"`([A-Z]\w+)`", row.split("|")[1])
    }
    models = [
        name
        for name in client.__all__
        if isinstance(getattr(client, name), type)
        and issubclass(getattr(client, name), WireResult)
        and name != "WireResult"
    ]
    assert sorted(rows) == sorted(models)
    for name in models:
        named = set(re.findall(r"`(\w+)", rows[name].split("|")[2]))
        missing = set(getattr(client, name).model_fields) - named
        assert not missing, (name, missing)
    assert "`include_content?`" in api and "### The evidence" in api


def test_a_legs_note_is_a_typed_member_present_or_not() -> None:
    from hostd.client import ProviderReport

    quiet = ProviderReport.model_validate({"provider_id": "files", "status": "ok"})
    assert quiet.note is None  # an attribute on every leg, not only those that sent one
    told = {"provider_id": "files", "status": "ok", "note": "nothing fit: no frame within 1"}
    assert ProviderReport.model_validate(told).note == told["note"]
