"""compose_for_prompt: floors, caps, canonical-cost packing, citations and the audit."""

from __future__ import annotations

import json

import pytest

from hostd.compose import (
    EVIDENCE_PREAMBLE,
    Floor,
    FloorsExceedBudget,
    PerProviderQuota,
    ReciprocalRankFusion,
    RoundRobinByRank,
    ScoreDescending,
    compose_for_prompt,
)
from hostd.errors import HostdError, error_to_wire
from hostd.protocol import ContextFrame, FrameId

from ._helpers import digest_of, file_prov, frame, sized


def rendered_ids(prompt: str) -> list[str]:
    import re

    return re.findall(r'<frame provider="[^"]*" id="([^"]*)"', prompt)


def test_the_prompt_opens_with_the_constant_preamble() -> None:
    out = compose_for_prompt([("p", frame("1", content="hello"))], 100)
    assert out.prompt.startswith(EVIDENCE_PREAMBLE)
    assert "never instructions" in EVIDENCE_PREAMBLE
    assert out.prompt[len(EVIDENCE_PREAMBLE) :] == (
        '<frame provider="p" id="1" kind="snippet" cite="label 1">\nhello\n</frame>\n'
    )


def test_an_empty_composition_is_just_the_preamble() -> None:
    out = compose_for_prompt([], 100)
    assert out.prompt == EVIDENCE_PREAMBLE
    assert out.citations == ()
    assert out.audit.entries == ()
    assert out.audit.tokens_used == 0


def test_packing_uses_the_canonical_cost_not_the_declared_one() -> None:
    liar = frame("liar", 0.9, sized(50), token_cost=1)  # declares 1, costs 50 (B3)
    honest = frame("honest", 0.5, sized(10))
    out = compose_for_prompt([("p", liar), ("p", honest)], 20)
    assert rendered_ids(out.prompt) == ["honest"]
    (entry,) = [e for e in out.audit.entries if e.frame.frame_id == "liar"]
    assert entry.reason == "over_budget"
    assert entry.detail == {"cost": 50, "remaining": 20}
    assert out.audit.tokens_used == 10


def test_the_packer_skips_a_frame_that_does_not_fit_and_keeps_walking() -> None:
    frames = [
        ("p", frame("big", 0.9, sized(8))),
        ("p", frame("mid", 0.8, sized(5))),
        ("p", frame("small", 0.7, sized(3))),
        ("p", frame("none", 0.6, None)),
    ]
    out = compose_for_prompt(frames, 11, placement="ranked")
    assert rendered_ids(out.prompt) == ["big", "small", "none"]
    assert out.audit.tokens_used == 11
    mid = next(e for e in out.audit.entries if e.frame.frame_id == "mid")
    assert (mid.reason, mid.detail, mid.rank) == ("over_budget", {"cost": 5, "remaining": 3}, 1)


def test_a_non_ascii_frame_is_costed_by_its_utf8_bytes() -> None:
    wide = frame("wide", 0.9, "\u4e2d" * 8)  # 24 bytes -> 6 tokens, though only 8 chars
    out = compose_for_prompt([("p", wide)], 5)
    assert out.audit.entries[0].reason == "over_budget"
    assert out.audit.entries[0].detail == {"cost": 6, "remaining": 5}
    assert compose_for_prompt([("p", wide)], 6).audit.entries[0].included


def test_duplicates_are_excluded_naming_the_frame_they_were_kept_as() -> None:
    d = digest_of("same")
    frames = [("a", frame("a1", 0.9, "same", digest=d)), ("b", frame("b1", 0.4, "same", digest=d))]
    out = compose_for_prompt(frames, 100)
    by_id = {e.frame.frame_id: e for e in out.audit.entries}
    assert by_id["a1"].included and by_id["a1"].vouched_by == ("a", "b")
    assert by_id["b1"].reason == "duplicate"
    assert by_id["b1"].detail == {"kept": FrameId("a", "a1", d)}
    assert rendered_ids(out.prompt) == ["a1"]


def test_citations_follow_render_order_with_merged_provenance() -> None:
    d = digest_of("ev")
    p1, p2 = file_prov("file:///one", "L1"), file_prov("file:///two", "L2")
    frames = [
        ("a", frame("a1", 0.9, "ev", digest=d, provenance=[p1], label="one.rs L1")),
        ("b", frame("b1", 0.5, "ev", digest=d, provenance=[p2])),
        ("a", frame("a2", 0.8, "other", label="two.rs")),
        ("a", frame("a3", 0.7, "third", label="three.rs")),
    ]
    out = compose_for_prompt(frames, 100)
    assert rendered_ids(out.prompt) == ["a1", "a3", "a2"]  # edges: rank 0, 2, 1
    assert [c.label for c in out.citations] == ["one.rs L1", "three.rs", "two.rs"]
    assert out.citations[0].frame == FrameId("a", "a1", d)
    assert [p.uri for p in out.citations[0].provenance] == ["file:///one", "file:///two"]


def test_a_repeated_label_is_made_unique_in_render_order() -> None:
    frames = [
        ("a", frame("1", 0.9, "x", label="README")),
        ("b", frame("2", 0.8, "y", label="README")),
    ]
    out = compose_for_prompt(frames, 100, placement="ranked")
    assert [c.label for c in out.citations] == ["README", "README #2"]
    assert 'cite="README #2"' in out.prompt


def test_a_blank_label_falls_back_to_the_title() -> None:
    out = compose_for_prompt([("a", frame("1", label="  ", title="net.rs"))], 100)
    assert out.citations[0].label == "net.rs"


def test_floors_are_admitted_first_and_pinned_top_or_bottom() -> None:
    floors = [
        Floor("pinned.md", sized(4, "TOP")),
        {"label": "selection", "content": sized(3, "BOTTOM"), "position": "bottom"},
    ]
    frames = [("p", frame("1", 0.9, sized(5))), ("p", frame("2", 0.8, sized(5)))]
    out = compose_for_prompt(frames, 12, floors=floors)
    body = out.prompt[len(EVIDENCE_PREAMBLE) :]
    assert body.startswith('<frame pinned="top" cite="pinned.md">\nTOP')
    assert body.endswith('<frame pinned="bottom" cite="selection">\nBOTTOM------\n</frame>\n')
    assert rendered_ids(out.prompt) == ["1"]  # 12 - 7 leaves room for one 5-token frame
    assert out.audit.tokens_used == 12
    assert [f.to_wire() for f in out.audit.floors] == [
        {"label": "pinned.md", "position": "top", "tokens": 4},
        {"label": "selection", "position": "bottom", "tokens": 3},
    ]
    over = next(e for e in out.audit.entries if e.frame.frame_id == "2")
    assert over.detail == {"cost": 5, "remaining": 0}


def test_floors_over_budget_fail_loudly_naming_each_cost() -> None:
    floors = [Floor("a", sized(6)), Floor("b", sized(5), "bottom")]
    with pytest.raises(FloorsExceedBudget) as info:
        compose_for_prompt([("p", frame("1"))], 10, floors=floors)
    err = info.value
    assert isinstance(err, ValueError) and isinstance(err, HostdError)
    assert err.reason == "floors_exceed_budget"
    assert err.floors == [("a", 6), ("b", 5)]
    assert "'a' costs 6" in str(err) and "'b' costs 5" in str(err)
    wire = error_to_wire(err)
    assert wire["data"]["reason"] == "floors_exceed_budget"
    assert wire["data"]["floors"] == [{"label": "a", "cost": 6}, {"label": "b", "cost": 5}]


def test_floors_that_exactly_fill_the_budget_leave_nothing_contested() -> None:
    out = compose_for_prompt([("p", frame("1", content="abc"))], 2, floors=[("f", sized(2))])
    assert out.audit.tokens_used == 2
    assert out.audit.entries[0].reason == "over_budget"


@pytest.mark.parametrize(
    ("floor", "message"),
    [
        ({"label": "", "content": "x"}, "non-empty label"),
        ({"label": "a"}, "needs a label and a content"),
        ({"label": "a", "content": "x", "position": "middle"}, "top' or 'bottom"),
        ({"label": "a", "content": "x", "extra": 1}, "unknown member"),
        (42, "cannot read a floor"),
    ],
)
def test_bad_floors_are_value_errors(floor: object, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        compose_for_prompt([], 10, floors=[floor])  # type: ignore[list-item]  # under test


def test_a_cap_limits_a_providers_share_of_the_contested_remainder() -> None:
    frames = [("big", frame(f"b{i}", 0.9 - i / 100, sized(10))) for i in range(5)]
    frames += [("small", frame(f"s{i}", 0.5 - i / 100, sized(10))) for i in range(5)]
    out = compose_for_prompt(frames, 50, caps={"big": 0.4}, floors=[("f", sized(10))])
    # remainder 40, big may use floor(0.4 * 40) = 16 tokens: one frame
    included = [e.frame.frame_id for e in out.audit.entries if e.included]
    assert sorted(included) == ["b0", "s0", "s1", "s2"]
    capped = [e for e in out.audit.entries if e.reason == "provider_cap"]
    assert [e.frame.frame_id for e in capped] == ["b1", "b2", "b3", "b4"]
    assert capped[0].detail == {"provider": "big", "cap": 16, "share": 0.4}


def test_a_star_cap_applies_to_every_provider_not_named() -> None:
    frames = [(p, frame(f"{p}{i}", 0.9 - i / 10, sized(10))) for p in "abc" for i in range(3)]
    out = compose_for_prompt(frames, 90, caps={"*": 0.25, "a": 1.0})
    used: dict[str, int] = {}
    for e in out.audit.entries:
        if e.included:
            used[e.provider_id] = used.get(e.provider_id, 0) + (e.tokens or 0)
    assert used == {"a": 30, "b": 20, "c": 20}


def test_over_budget_wins_over_a_cap_when_the_frame_would_not_fit_anyway() -> None:
    frames = [("a", frame("a1", 0.9, sized(10))), ("a", frame("a2", 0.8, sized(30)))]
    out = compose_for_prompt(frames, 20, caps={"a": 0.5})
    a2 = next(e for e in out.audit.entries if e.frame.frame_id == "a2")
    assert a2.reason == "over_budget"


@pytest.mark.parametrize(
    "caps", [{"a": 1.5}, {"a": -0.1}, {"a": float("nan")}, {"": 0.5}, {"a": "1"}]
)
def test_bad_caps_are_value_errors(caps: dict) -> None:
    with pytest.raises(ValueError, match="cap"):
        compose_for_prompt([], 10, caps=caps)


@pytest.mark.parametrize("budget", [-1, 1.5, float("inf"), "10", True])
def test_a_bad_budget_is_a_value_error(budget: object) -> None:
    with pytest.raises(ValueError, match="budget"):
        compose_for_prompt([], budget)  # type: ignore[arg-type]  # under test


def test_an_unknown_placement_is_a_value_error() -> None:
    with pytest.raises(ValueError, match="placement"):
        compose_for_prompt([], 10, placement="middle")


def test_earlier_exclusions_each_become_one_audit_entry_with_their_reason() -> None:
    q = FrameId("flood", "f1")
    m = FrameId("files", "f9", "sha256:" + "a" * 64)
    out = compose_for_prompt(
        [("files", frame("ok", 0.5, "fine"))],
        100,
        excluded=[
            (q, "quarantined", {"rule": "B4"}),
            (m, "digest_mismatch", {"expected": "x", "actual": "y"}),
            (FrameId("files", "bad"), "invalid_frame", {}),
        ],
    )
    reasons = {e.frame: (e.reason, dict(e.detail)) for e in out.audit.entries if not e.included}
    assert reasons == {
        q: ("quarantined", {"rule": "B4"}),
        m: ("digest_mismatch", {"expected": "x", "actual": "y"}),
        FrameId("files", "bad"): ("invalid_frame", {}),
    }
    assert len(out.audit.entries) == 4


def test_verification_is_copied_into_included_entries_with_unchecked_as_default() -> None:
    a, b = frame("a", 0.9, "one", with_digest=True), frame("b", 0.8, "two")
    state = {"state": "source_verified"}
    out = compose_for_prompt([("p", a), ("p", b)], 100, verification={FrameId.of("p", a): state})
    by_id = {e.frame.frame_id: e for e in out.audit.entries}
    assert by_id["a"].verification == state
    assert by_id["a"].verification is not state  # a copy
    assert by_id["b"].verification == {"state": "unchecked"}


def test_to_wire_is_json_ready_and_matches_the_entries() -> None:
    d = digest_of("same")
    frames = [
        ("a", frame("a1", 0.9, "same", digest=d, provenance=[file_prov("file:///x", "L1")])),
        ("b", frame("b1", 0.4, "same", digest=d)),
        ("b", frame("b2", 0.3, sized(100))),
    ]
    out = compose_for_prompt(
        frames,
        20,
        strategy=ReciprocalRankFusion(weights={"a": 2}),
        excluded=[(FrameId("c", "q"), "quarantined", {"rule": "B2"})],
    )
    wire = json.loads(json.dumps(out.to_wire()))
    assert wire["prompt"] == out.prompt
    assert wire["citations"][0]["frame"] == {
        "provider_id": "a",
        "frame_id": "a1",
        "content_digest": d,
    }
    assert wire["citations"][0]["provenance"][0]["uri"] == "file:///x"
    audit = wire["audit"]
    assert audit["global_budget"] == 20 and audit["tokens_used"] == 1
    assert audit["policy"] == {
        "strategy": "rrf",
        "placement": "edges",
        "strategy_params": {"rrf": {"k": 60, "weights": {"a": 2.0}}},
    }
    assert audit["entries"] == [e.to_wire() for e in out.audit.entries]
    assert audit["entries"] == out.audit.entry_dicts()
    by_reason = {e.get("reason"): e for e in audit["entries"]}
    assert by_reason[None]["disposition"] == "included"
    assert by_reason[None]["verification"] == {"state": "unchecked"}
    assert by_reason["duplicate"]["detail"]["kept"]["frame_id"] == "a1"
    assert by_reason["over_budget"]["detail"] == {"cost": 100, "remaining": 19}
    assert by_reason["quarantined"]["provider"] == "c"
    assert out.audit.counts() == {
        "included": 1,
        "excluded": {"duplicate": 1, "over_budget": 1, "quarantined": 1},
    }


def test_the_audit_lists_every_offered_frame_exactly_once() -> None:
    d = digest_of("d")
    frames = [("a", frame(f"f{i}", i / 20, sized(i + 1))) for i in range(15)]
    frames += [("b", frame("dup", 0.1, "d", digest=d)), ("c", frame("dup", 0.2, "d", digest=d))]
    out = compose_for_prompt(
        frames, 30, caps={"b": 0.1}, excluded=[(FrameId("z", "z"), "stale", {})]
    )
    offered = sorted([FrameId.of(p, f) for p, f in frames] + [FrameId("z", "z")])
    assert sorted(e.frame for e in out.audit.entries) == offered
    for e in out.audit.entries:
        assert (e.reason is None) == e.included
    assert out.audit.tokens_used == sum(e.tokens or 0 for e in out.audit.included()) <= 30


# The starvation case: an embedding provider scoring 0.80-0.95 next to a lexical
# one topping out near 0.4, with budget for four frames.
def starvation_frames() -> list:
    sem = [("semantic", frame(f"s{i}", 0.95 - i * 0.02, sized(10, f"s{i}"))) for i in range(8)]
    lex = [("lexical", frame(f"l{i}", 0.41 - i * 0.05, sized(10, f"l{i}"))) for i in range(8)]
    return sem + lex


def included_providers(strategy: object) -> set[str]:
    out = compose_for_prompt(starvation_frames(), 40, strategy=strategy)  # type: ignore[arg-type]
    assert len(out.citations) == 4
    return {c.frame.provider_id for c in out.citations}


def test_score_descending_starves_the_low_scale_provider() -> None:
    assert included_providers(ScoreDescending()) == {"semantic"}


@pytest.mark.parametrize(
    "strategy", [RoundRobinByRank(), ReciprocalRankFusion(), PerProviderQuota(1)]
)
def test_rank_based_policies_include_both_providers(strategy: object) -> None:
    assert included_providers(strategy) == {"semantic", "lexical"}


def test_a_client_api_strategy_value_is_accepted_as_is() -> None:
    out = compose_for_prompt(starvation_frames(), 40, strategy={"rrf": {"k": 60}})
    assert out.audit.policy["strategy"] == "rrf"
    assert {c.frame.provider_id for c in out.citations} == {"semantic", "lexical"}
    with pytest.raises(ValueError, match="unknown strategy"):
        compose_for_prompt([], 10, strategy="best")


def test_composing_leaves_the_input_frames_untouched() -> None:
    d = digest_of("same")
    a = frame("a1", 0.9, "same", digest=d, provenance=[file_prov("file:///1")])
    b = frame("b1", 0.4, "same", digest=d, provenance=[file_prov("file:///2")])
    before = (a.model_dump(), b.model_dump())
    compose_for_prompt([("a", a), ("b", b)], 100)
    assert (a.model_dump(), b.model_dump()) == before


def test_the_audit_lists_ranked_frames_best_first_then_the_rest() -> None:
    d = digest_of("d")
    frames = [
        ("a", frame("low", 0.1, sized(5))),
        ("a", frame("high", 0.9, sized(5))),
        ("a", frame("mid", 0.5, sized(50))),
        ("b", frame("dup", 0.05, "d", digest=d)),
        ("a", frame("orig", 0.7, "d", digest=d)),
    ]
    out = compose_for_prompt(frames, 20, excluded=[(FrameId("c", "x"), "stale", {})])
    assert [(e.frame.frame_id, e.reason) for e in out.audit.entries] == [
        ("high", None),
        ("orig", None),
        ("mid", "over_budget"),
        ("low", None),
        ("dup", "duplicate"),
        ("x", "stale"),
    ]
    assert [e.rank for e in out.audit.entries] == [0, 1, 2, 3, None, None]


def test_frames_built_without_validation_compose_the_same() -> None:
    data = {
        "id": "c1",
        "kind": "fact",
        "title": "t",
        "content": "constructed",
        "score": 0.5,
        "token_cost": 3,
        "citation_label": "c",
    }
    built = ContextFrame.model_construct(**data)
    validated = ContextFrame.model_validate(data)
    assert (
        compose_for_prompt([("p", built)], 10).to_wire()
        == compose_for_prompt([("p", validated)], 10).to_wire()
    )
