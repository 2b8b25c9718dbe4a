"""compose_for_prompt: floors, caps, canonical-cost packing, citations and the audit."""

from __future__ import annotations

import json
from typing import Any

import pytest

from hostd.client import Audit
from hostd.compose import (
    EVIDENCE_PREAMBLE,
    ComposedPrompt,
    Floor,
    FloorsExceedBudget,
    PerProviderQuota,
    ReciprocalRankFusion,
    RoundRobinByRank,
    ScoreDescending,
    Strategy,
    compose_for_prompt,
)
from hostd.compose._render import render_floor
from hostd.errors import HostdError, error_to_wire
from hostd.protocol import ContextFrame, FrameId, canonical_token_cost

from ._helpers import block, digest_of, file_prov, fits, frame, sized

#: Room for every frame in a test that is not about the budget.
ROOMY = 10_000


def rendered_ids(out: ComposedPrompt) -> list[str]:
    """The frame id of each block of ``out``'s prompt, in prompt order: its fence's cite
    looked up in the citations (the fence names a frame by its cite alone)."""
    import re

    by_label = {c.label: c.frame.frame_id for c in out.citations}
    return [
        by_label[cite]
        for cite in re.findall(r'<frame provider="[^"]*" kind="[^"]*" cite="([^"]*)"', out.prompt)
    ]


def test_the_prompt_opens_with_the_constant_preamble() -> None:
    out = compose_for_prompt([("p", frame("1", content="hello"))], ROOMY)
    assert out.prompt.startswith(EVIDENCE_PREAMBLE)
    assert "never instructions" in EVIDENCE_PREAMBLE
    assert out.prompt[len(EVIDENCE_PREAMBLE) :] == (
        '<frame provider="p" kind="snippet" cite="label 1">\nhello\n</frame>\n'
    )


def test_an_empty_composition_is_an_empty_prompt() -> None:
    out = compose_for_prompt([], 100)
    assert out.prompt == ""
    assert out.citations == ()
    assert out.audit.entries == ()
    assert out.audit.tokens_used == 0


def test_packing_uses_the_canonical_cost_not_the_declared_one() -> None:
    liar = frame("liar", 0.9, sized(50), token_cost=1)  # declares 1, costs 50 (B3)
    honest = frame("honest", 0.5, sized(10))
    budget = fits(block("p", honest))
    out = compose_for_prompt([("p", liar), ("p", honest)], budget)
    assert rendered_ids(out) == ["honest"]
    (entry,) = [e for e in out.audit.entries if e.frame.frame_id == "liar"]
    assert entry.reason == "over_budget"
    assert entry.detail == {
        "cost": canonical_token_cost(block("p", liar)),
        "remaining": budget - fits(),
    }
    assert out.audit.tokens_used == budget == canonical_token_cost(out.prompt)


def test_the_packer_skips_a_frame_that_does_not_fit_and_keeps_walking() -> None:
    frames = [
        ("p", frame("big", 0.9, sized(80))),
        ("p", frame("mid", 0.8, sized(50))),
        ("p", frame("small", 0.7, sized(3))),
        ("p", frame("none", 0.6, None)),
    ]
    big, mid_f, small, none = (f for _, f in frames)
    budget = fits(block("p", big), block("p", small), block("p", none))
    out = compose_for_prompt(frames, budget, placement="ranked")
    assert rendered_ids(out) == ["big", "small", "none"]
    assert out.audit.tokens_used == budget == canonical_token_cost(out.prompt)
    mid = next(e for e in out.audit.entries if e.frame.frame_id == "mid")
    assert (mid.reason, mid.rank) == ("over_budget", 1)
    assert mid.detail == {
        "cost": canonical_token_cost(block("p", mid_f)),
        "remaining": budget - fits(block("p", big)),
    }


def test_a_non_ascii_frame_is_costed_by_its_utf8_bytes() -> None:
    wide = frame("wide", 0.9, "\u4e2d" * 8)  # 24 bytes, though only 8 chars
    narrow = frame("wide", 0.9, "x" * 8)
    budget = fits(block("p", wide))
    assert budget > fits(block("p", narrow))
    out = compose_for_prompt([("p", wide)], budget - 1)
    assert out.audit.entries[0].reason == "over_budget"
    assert compose_for_prompt([("p", wide)], budget).audit.entries[0].included


def test_duplicates_are_excluded_naming_the_frame_they_were_kept_as() -> None:
    d = digest_of("same")
    frames = [("a", frame("a1", 0.9, "same", digest=d)), ("b", frame("b1", 0.4, "same", digest=d))]
    out = compose_for_prompt(frames, ROOMY)
    by_id = {e.frame.frame_id: e for e in out.audit.entries}
    assert by_id["a1"].included and by_id["a1"].vouched_by == ("a", "b")
    assert by_id["b1"].reason == "duplicate"
    assert by_id["b1"].detail == {"kept": FrameId("a", "a1", d)}
    assert rendered_ids(out) == ["a1"]


def test_citations_follow_render_order_with_merged_provenance() -> None:
    d = digest_of("ev")
    p1, p2 = file_prov("file:///one", "L1"), file_prov("file:///two", "L2")
    frames = [
        ("a", frame("a1", 0.9, "ev", digest=d, provenance=[p1], label="one.rs L1")),
        ("b", frame("b1", 0.5, "ev", digest=d, provenance=[p2])),
        ("a", frame("a2", 0.8, "other", label="two.rs")),
        ("a", frame("a3", 0.7, "third", label="three.rs")),
    ]
    out = compose_for_prompt(frames, ROOMY)
    assert rendered_ids(out) == ["a1", "a3", "a2"]  # edges: rank 0, 2, 1
    assert [c.label for c in out.citations] == ["one.rs L1", "three.rs", "two.rs"]
    assert out.citations[0].frame == FrameId("a", "a1", d)
    assert [p.uri for p in out.citations[0].provenance] == ["file:///one", "file:///two"]


def test_a_repeated_label_is_made_unique_in_rank_order() -> None:
    frames = [
        ("a", frame("1", 0.9, "x", label="README")),
        ("b", frame("2", 0.8, "y", label="README")),
    ]
    out = compose_for_prompt(frames, ROOMY, placement="ranked")
    assert [c.label for c in out.citations] == ["README", "README #2"]
    # the second best keeps its suffix wherever placement puts it
    flipped = compose_for_prompt(frames, ROOMY, placement="edges")
    assert [c.label for c in flipped.citations] == ["README", "README #2"]
    assert canonical_token_cost(out.prompt) == canonical_token_cost(flipped.prompt)
    assert 'cite="README #2"' in out.prompt


def test_a_blank_label_falls_back_to_the_title() -> None:
    out = compose_for_prompt([("a", frame("1", label="  ", title="net.rs"))], ROOMY)
    assert out.citations[0].label == "net.rs"


def test_floors_are_admitted_first_and_pinned_top_or_bottom() -> None:
    floors: list[Floor | dict[str, Any]] = [
        Floor("pinned.md", sized(4, "TOP")),
        {"label": "selection", "content": sized(3, "BOTTOM"), "position": "bottom"},
    ]
    frames = [("p", frame("1", 0.9, sized(5))), ("p", frame("2", 0.8, sized(5)))]
    top = render_floor("pinned.md", sized(4, "TOP"), "top")
    bottom = render_floor("selection", sized(3, "BOTTOM"), "bottom")
    budget = fits(top, block("p", frames[0][1]), bottom)
    out = compose_for_prompt(frames, budget, floors=floors)
    assert out.prompt == EVIDENCE_PREAMBLE + top + block("p", frames[0][1]) + bottom
    assert top.startswith('<frame pinned="top" cite="pinned.md">\nTOP')
    assert bottom == '<frame pinned="bottom" cite="selection">\nBOTTOM------\n</frame>\n'
    assert out.audit.tokens_used == budget == canonical_token_cost(out.prompt)
    assert [f.to_wire() for f in out.audit.floors] == [
        {"label": "pinned.md", "position": "top", "tokens": canonical_token_cost(top)},
        {"label": "selection", "position": "bottom", "tokens": canonical_token_cost(bottom)},
    ]
    over = next(e for e in out.audit.entries if e.frame.frame_id == "2")
    assert over.reason == "over_budget"
    assert over.detail["cost"] > over.detail["remaining"]


def test_floors_over_budget_fail_loudly_naming_each_cost() -> None:
    floors = [Floor("a", sized(6)), Floor("b", sized(5), "bottom")]
    a, b = render_floor("a", sized(6), "top"), render_floor("b", sized(5), "bottom")
    ca, cb = canonical_token_cost(a), canonical_token_cost(b)
    budget = fits(a, b) - 1  # the floors' content alone would fit; with fences they do not
    assert budget > 11
    with pytest.raises(FloorsExceedBudget) as info:
        compose_for_prompt([("p", frame("1"))], budget, floors=floors)
    err = info.value
    assert isinstance(err, ValueError) and isinstance(err, HostdError)
    assert err.reason == "floors_exceed_budget"
    assert err.floors == [("a", ca), ("b", cb)]
    assert (err.total, err.budget, err.preamble) == (budget + 1, budget, fits())
    assert f"'a' costs {ca}" in str(err) and f"'b' costs {cb}" in str(err)
    wire = error_to_wire(err)
    assert wire["data"]["reason"] == "floors_exceed_budget"
    assert wire["data"]["floors"] == [{"label": "a", "cost": ca}, {"label": "b", "cost": cb}]
    assert wire["data"]["preamble"] == fits()
    assert compose_for_prompt([], budget + 1, floors=floors).tokens_used == budget + 1


def test_a_budget_below_the_preamble_is_an_empty_prompt_or_a_floors_error() -> None:
    small = fits() - 1
    out = compose_for_prompt([("p", frame("1", content="x"))], small)
    assert (out.prompt, out.tokens_used, out.citations) == ("", 0, ())
    (entry,) = out.audit.entries
    assert entry.reason == "over_budget" and entry.detail["remaining"] == 0
    assert entry.detail["cost"] == canonical_token_cost(block("p", frame("1", content="x")))
    with pytest.raises(FloorsExceedBudget, match="preamble"):
        compose_for_prompt([], small, floors=[("f", "")])
    assert compose_for_prompt([], 0).prompt == ""


def test_floors_that_exactly_fill_the_budget_leave_nothing_contested() -> None:
    budget = fits(render_floor("f", sized(2), "top"))
    out = compose_for_prompt([("p", frame("1", content="abc"))], budget, floors=[("f", sized(2))])
    assert out.audit.tokens_used == budget
    assert out.audit.entries[0].reason == "over_budget"
    assert out.audit.entries[0].detail["remaining"] == 0


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
    frames = [("big", frame(f"b{i}", 0.9 - i / 100, sized(10), label="l")) for i in range(5)]
    frames += [("small", frame(f"s{i}", 0.5 - i / 100, sized(10), label="l")) for i in range(5)]
    cost = canonical_token_cost(block("big", frames[0][1], "l #10"))
    fixed = fits(render_floor("f", sized(10), "top"))
    remainder = 5 * cost  # room for five frames after the floor
    out = compose_for_prompt(
        frames, fixed + remainder, caps={"big": 0.4}, floors=[("f", sized(10))]
    )
    # big may use floor(0.4 * remainder) tokens: two frames
    included = [e.frame.frame_id for e in out.audit.entries if e.included]
    assert sorted(included) == ["b0", "b1", "s0", "s1", "s2"]
    capped = [e for e in out.audit.entries if e.reason == "provider_cap"]
    assert [e.frame.frame_id for e in capped] == ["b2", "b3", "b4"]
    assert capped[0].detail == {"provider": "big", "cap": (2 * remainder) // 5, "share": 0.4}


def test_a_star_cap_applies_to_every_provider_not_named() -> None:
    frames = [(p, frame(f"{p}{i}", 0.9 - i / 10, sized(10))) for p in "abc" for i in range(3)]
    cost = canonical_token_cost(block("a", frames[0][1]))
    out = compose_for_prompt(frames, fits() + 9 * cost + 8, caps={"*": 0.25, "a": 1.0})
    used: dict[str, int] = {}
    for e in out.audit.entries:
        if e.included:
            used[e.provider_id] = used.get(e.provider_id, 0) + 1
    assert used == {"a": 3, "b": 2, "c": 2}


def test_over_budget_wins_over_a_cap_when_the_frame_would_not_fit_anyway() -> None:
    frames = [("a", frame("a1", 0.9, sized(10))), ("a", frame("a2", 0.8, sized(30)))]
    out = compose_for_prompt(frames, fits(block("a", frames[0][1])) + 15, caps={"a": 0.5})
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
        ROOMY,
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


def test_an_excluded_entry_names_its_frames_label_when_composition_had_the_frame() -> None:
    d = digest_of("same")
    frames = [
        ("a", frame("a1", 0.9, "same", digest=d, label="TICKET-1 login fails")),
        ("b", frame("b1", 0.4, "same", digest=d, label="notes.md L3-9")),  # a copy of a1
        ("a", frame("a2", 0.8, sized(10), label="", title="retry.md")),  # no label: its title
        ("c", frame("c1", 0.7, sized(100), label="TICKET-1 login fails")),  # a repeated label
    ]
    # room for a1 and a2, not c1; a's cap leaves room for a1 alone
    budget = fits(block("a", frames[0][1]), block("a", frames[2][1])) + 20
    out = compose_for_prompt(
        frames,
        budget,
        caps={"a": 0.5},
        excluded=[(FrameId("d", "bad"), "invalid_frame", {"rules": "F3"})],
    )
    reasons = {e.frame.frame_id: (e.reason, e.label) for e in out.audit.excluded()}
    assert reasons == {
        "b1": ("duplicate", "notes.md L3-9"),
        "a2": ("provider_cap", "retry.md"),
        "c1": ("over_budget", "TICKET-1 login fails"),  # its own, not the " #2" it was priced with
        # dropped before composition: only its FrameId reached it, no text of it is told
        "bad": ("invalid_frame", None),
    }
    wire = {e["frame"]["frame_id"]: e for e in out.audit.entry_dicts()}
    assert "label" not in wire["bad"] and "label" not in wire["a1"]
    # the client's typed audit reads the same
    read = Audit.model_validate(out.audit.to_wire())
    assert {e.frame.frame_id: e.label for e in read.excluded()} == {
        k: label for k, (_, label) in reasons.items()
    }


def test_verification_is_copied_into_included_entries_with_unchecked_as_default() -> None:
    a, b = frame("a", 0.9, "one", with_digest=True), frame("b", 0.8, "two")
    state = {"state": "source_verified"}
    out = compose_for_prompt([("p", a), ("p", b)], ROOMY, verification={FrameId.of("p", a): state})
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
    budget = fits(block("a", frames[0][1])) + 10
    out = compose_for_prompt(
        frames,
        budget,
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
    assert audit["global_budget"] == budget
    assert audit["tokens_used"] == budget - 10 == canonical_token_cost(out.prompt)
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
    assert by_reason["over_budget"]["detail"] == {
        "cost": canonical_token_cost(block("b", frames[2][1])),
        "remaining": 10,
    }
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
        frames, fits() + 100, caps={"b": 0.1}, excluded=[(FrameId("z", "z"), "stale", {})]
    )
    offered = sorted([FrameId.of(p, f) for p, f in frames] + [FrameId("z", "z")])
    assert sorted(e.frame for e in out.audit.entries) == offered
    for e in out.audit.entries:
        assert (e.reason is None) == e.included
    assert out.audit.tokens_used == canonical_token_cost(out.prompt) <= fits() + 100
    assert out.audit.tokens_used <= fits() + sum(e.tokens or 0 for e in out.audit.included())


# The starvation case: an embedding provider scoring 0.80-0.95 next to a lexical
# one topping out near 0.4, with budget for four frames.
def starvation_frames() -> list:
    sem = [("semantic", frame(f"s{i}", 0.95 - i * 0.02, sized(10, f"s{i}"))) for i in range(8)]
    lex = [("lexical", frame(f"l{i}", 0.41 - i * 0.05, sized(10, f"l{i}"))) for i in range(8)]
    return sem + lex


# Room for four of those blocks (each, with its fence, costs at most this).
FOUR_FRAMES = fits() + 4 * (10 + 20)


def included_providers(strategy: Strategy | str) -> set[str]:
    out = compose_for_prompt(starvation_frames(), FOUR_FRAMES, strategy=strategy)
    assert len(out.citations) == 4
    return {c.frame.provider_id for c in out.citations}


def test_score_descending_starves_the_low_scale_provider() -> None:
    assert included_providers(ScoreDescending()) == {"semantic"}


@pytest.mark.parametrize(
    "strategy", [RoundRobinByRank(), ReciprocalRankFusion(), PerProviderQuota(1)]
)
def test_rank_based_policies_include_both_providers(strategy: Strategy) -> None:
    assert included_providers(strategy) == {"semantic", "lexical"}


def test_a_client_api_strategy_value_is_accepted_as_is() -> None:
    out = compose_for_prompt(starvation_frames(), FOUR_FRAMES, strategy={"rrf": {"k": 60}})
    assert out.audit.policy["strategy"] == "rrf"
    assert {c.frame.provider_id for c in out.citations} == {"semantic", "lexical"}
    with pytest.raises(ValueError, match="unknown strategy"):
        compose_for_prompt([], 10, strategy="best")


def test_composing_leaves_the_input_frames_untouched() -> None:
    d = digest_of("same")
    a = frame("a1", 0.9, "same", digest=d, provenance=[file_prov("file:///1")])
    b = frame("b1", 0.4, "same", digest=d, provenance=[file_prov("file:///2")])
    before = (a.model_dump(), b.model_dump())
    compose_for_prompt([("a", a), ("b", b)], ROOMY)
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
    budget = fits(*(block("a", f) for _, f in frames if f.id in ("high", "orig", "low")))
    out = compose_for_prompt(frames, budget, excluded=[(FrameId("c", "x"), "stale", {})])
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
    data: dict[str, Any] = {
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
        compose_for_prompt([("p", built)], ROOMY).to_wire()
        == compose_for_prompt([("p", validated)], ROOMY).to_wire()
    )


@pytest.mark.parametrize("empty_last", [True, False])
def test_packer_walk_stops_only_where_nothing_ahead_can_fit(empty_last: bool) -> None:
    # The cheapest frame overall ranks first, so the walk cannot stop early on its
    # account; hundreds of frames later it must find (or not) the free frame.
    big = [("p", frame(f"big{i:04d}", 0.9 - i * 1e-4, sized(50, f"b{i}"))) for i in range(700)]
    pairs = [("p", frame("tiny", 1.0, sized(1, "t"))), *big]
    if empty_last:
        pairs.append(("q", frame("free", 0.0, "")))
    blocks = [block(p, f) for p, f in pairs[:2]] + [block("q", frame("free", 0.0, ""))]
    budget = fits(*blocks)
    out = compose_for_prompt(pairs, budget, placement="ranked")
    included = [e.frame.frame_id for e in out.audit.included()]
    assert included == (["tiny", "big0000", "free"] if empty_last else ["tiny", "big0000"])
    over = [e for e in out.audit.excluded() if e.reason == "over_budget"]
    assert len(over) == 699
    assert {e.detail["remaining"] for e in over} == {budget - fits(*blocks[:2])}
    assert [e.rank for e in out.audit.entries] == list(range(len(pairs)))


def test_an_excluded_detail_with_an_integer_past_64_bits_is_still_audited() -> None:
    # Earlier stages pass their own detail dicts; an integer no JSON double or orjson
    # holds must not crash the audit's ordering of two entries for one identity.
    fid = FrameId("c", "q")
    excluded = [(fid, "quarantined", {"n": 2**70}), (fid, "quarantined", {"n": 1})]
    for order in (excluded, excluded[::-1]):
        out = compose_for_prompt([("a", frame("a1", 0.9, "alpha"))], 10_000, excluded=order)
        details = [e.get("detail") for e in out.audit.entry_dicts() if e.get("reason")]
        assert len(details) == 2
