"""Span-aware dedup: touching regions of one verified source quoted once (F5, F17)."""

from __future__ import annotations

from collections import Counter
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from hostd.client import Audit
from hostd.compose import EVIDENCE_PREAMBLE, FloorsExceedBudget, compose_for_prompt
from hostd.protocol import (
    ContextFrame,
    FrameId,
    Provenance,
    address_line_range,
    canonical_token_cost,
    sha256_digest,
)

URI = "file:///srv/repo/module.py"
SOURCE = "".join(f"line {n:02d} of the module, distinct words {n * 7919}\n" for n in range(1, 13))
DATA = SOURCE.encode()
VERIFIED = {"state": "source_verified"}


def window(fid: str, rng: str, score: float = 0.5, *, content: str | None = None) -> ContextFrame:
    """A frame quoting ``rng`` of the source, honest digests (F5, F17)."""
    body = address_line_range(DATA, rng)
    text = body.decode() if content is None else content
    return ContextFrame(
        id=fid,
        kind="snippet",
        title=f"module.py {rng}",
        content=text,
        content_digest=sha256_digest(text.encode()),
        uri=URI,
        score=score,
        token_cost=canonical_token_cost(text),
        citation_label=f"module.py {rng}",
        provenance=[Provenance(type="file", uri=URI, range=rng, digest=sha256_digest(body))],
    )


def verified(*pairs: tuple[str, ContextFrame]) -> dict[FrameId, dict[str, Any]]:
    return {FrameId.of(p, f): dict(VERIFIED) for p, f in pairs}


def compose(pairs: list[tuple[str, ContextFrame]], **kw: Any):
    kw.setdefault("verification", verified(*pairs))
    kw.setdefault("sources", {URI: DATA})
    return compose_for_prompt(pairs, kw.pop("budget", 4000), **kw)


def entries(result) -> dict[str, dict[str, Any]]:
    return {e["frame"]["frame_id"]: e for e in result.audit.entry_dicts()}


def source_lines_in(prompt: str) -> Counter[str]:
    return Counter(line for line in prompt.splitlines() if line.startswith("line "))


SHIFTED = [("lexical", window("a", "L1-6", 0.4)), ("dense", window("b", "L4-9", 0.8))]


def test_shifted_windows_become_one_verified_frame_with_every_line_once() -> None:
    merged = compose(SHIFTED)
    apart = compose(SHIFTED, sources=None)
    assert source_lines_in(merged.prompt) == Counter(SOURCE.splitlines()[:9])
    assert source_lines_in(apart.prompt)["line 05 of the module, distinct words 39595"] == 2
    # the overlap (three lines) and one fence are paid once
    overlap = canonical_token_cost(address_line_range(DATA, "L4-6").decode())
    assert merged.tokens_used <= apart.tokens_used - overlap
    by_id = entries(merged)
    # the best member (dense, 0.8) stands for the union: its identity, label and score
    kept = by_id["b"]
    assert kept["disposition"] == "included"
    assert kept["verification"] == VERIFIED
    assert kept["vouched_by"] == ["dense", "lexical"]
    union = address_line_range(DATA, "L1-9")
    assert kept["merged"] == {
        "uri": URI,
        "range": "L1-9",
        "content_digest": sha256_digest(union),
        "members": [
            {
                "provider_id": "lexical",
                "frame_id": "a",
                "content_digest": sha256_digest(address_line_range(DATA, "L1-6")),
            }
        ],
    }
    absorbed = by_id["a"]
    assert absorbed["reason"] == "merged_into"
    assert absorbed["detail"]["kept"]["frame_id"] == "b"
    assert absorbed["label"] == "module.py L1-6"  # its own: which window was folded
    assert absorbed["detail"]["region"] == {"uri": URI, "range": "L1-9"}
    # the citation resolves to the union's region and every member's provenance
    (citation,) = merged.citations
    ranges = [p.range for p in citation.provenance]
    assert ranges == ["L1-9", "L4-9", "L1-6"]
    assert citation.provenance[0].digest == sha256_digest(union)


def labels(result) -> dict[str, str]:
    """Each citation's label by its frame id, checked against the fence it cites."""
    out = {c.frame.frame_id: c.label for c in result.citations}
    for label in out.values():
        assert f' kind="snippet" cite="{label}"' in result.prompt
    return out


def test_a_merged_label_names_the_merged_range_not_its_best_members() -> None:
    result = compose(SHIFTED)
    assert labels(result) == {"b": "module.py L1-9"}
    # the fence cites the merged range, which the citation resolves to the survivor
    assert "module.py L4-9" not in result.prompt


def _in(frame: ContextFrame, item: str) -> ContextFrame:
    """``frame`` titled as a code chunk starting inside ``item``."""
    return frame.model_copy(update={"title": f"{frame.title} · in {item}"})


@pytest.mark.parametrize(
    ("members", "merged"),
    [
        # overlapping windows: one span merge
        ((("lexical", "a", "L1-6", 0.4), ("dense", "b", "L4-9", 0.8)), "L1-9"),
        # adjacent windows, both admitted: one coalesced block
        ((("lexical", "a", "L1-4", 0.4), ("dense", "b", "L5-8", 0.8)), "L1-8"),
    ],
)
def test_a_merged_block_shows_its_best_members_item_under_the_merged_range(
    members: tuple[tuple[str, str, str, float], ...], merged: str
) -> None:
    pairs = [(p, _in(window(fid, rng, score), f"def f_{fid}")) for p, fid, rng, score in members]
    result = compose(pairs)
    assert labels(result) == {"b": f"module.py {merged}"}
    assert f'cite="module.py {merged}" in="def f_b">' in result.prompt
    # no member's own range, and one fence line of the block's
    assert result.prompt.count("<frame ") == 1
    assert all(f"module.py {rng}" not in result.prompt for _, _, rng, _ in members)


@pytest.mark.parametrize(
    ("label", "expected"),
    [
        ("module.py#L4-9", "module.py#L1-9"),  # its own range, another separator
        ("module.py L4-L9", "module.py L4-L9 (L1-9)"),  # not the L<a>-<b> form
        ("module.py L3-9", "module.py L3-9 (L1-9)"),  # a range, but not its own
        ("module.py XL4-9", "module.py XL4-9 (L1-9)"),  # not a range token
        ("parse_config", "parse_config (L1-9)"),
    ],
)
def test_a_label_without_its_own_range_gets_the_merged_region_appended(
    label: str, expected: str
) -> None:
    lexical, dense = SHIFTED
    pairs = [lexical, ("dense", dense[1].model_copy(update={"citation_label": label}))]
    assert labels(compose(pairs)) == {"b": expected}


def test_a_blank_label_falls_back_to_the_title_with_the_merged_region() -> None:
    lexical, dense = SHIFTED
    frame = dense[1].model_copy(update={"citation_label": " ", "title": "module.py § setup"})
    assert labels(compose([lexical, ("dense", frame)])) == {"b": "module.py § setup (L1-9)"}


def test_a_frame_left_whole_keeps_its_label() -> None:
    pairs = [("p", window("outer", "L1-6", 0.9)), ("q", window("inner", "L2-4", 0.3))]
    # the union is outer's own range: its label already tells the truth
    assert labels(compose(pairs)) == {"outer": "module.py L1-6"}
    assert labels(compose(SHIFTED, sources=None)) == {"a": "module.py L1-6", "b": "module.py L4-9"}


def test_blocks_the_cap_closed_are_labelled_with_their_own_lines() -> None:
    pairs = [
        ("p", window("a", "L1-6", 0.7)),
        ("q", window("b", "L4-9", 0.8)),
        ("r", window("c", "L7-12", 0.9)),
    ]
    # c's block starts after the first block's lines: L10-12, not its offered L7-12;
    # a budget that holds it but not the nine-line block shows it alone
    alone = compose(pairs, merge_max_ratio=1.5, budget=150)
    assert labels(alone) == {"c": "module.py L10-12"}
    # with room for both, the two blocks touch and are rendered as one
    assert labels(compose(pairs, merge_max_ratio=1.5)) == {"c": "module.py L1-12"}


def test_feedback_resolves_a_merged_label_to_the_survivor_and_credits_its_members() -> None:
    from hostd.quality import Composition, build_record, credited, resolve_used

    result = compose(SHIFTED)
    record = build_record(
        Composition("r-1", "goal", 4000, None, SHIFTED, result), store_content=False
    )
    kept = resolve_used(record.citations, ["module.py L1-9"])
    b, a = (FrameId.of(*SHIFTED[1]), FrameId.of(*SHIFTED[0]))
    assert kept == ((b.provider_id, "b", b.content_digest),)
    assert credited(record, kept) == (*kept, (a.provider_id, "a", a.content_digest))


def test_a_contained_range_is_absorbed_and_an_adjacent_one_is_not_merged_before_ranking() -> None:
    pairs = [
        ("p", window("outer", "L1-6", 0.3)),
        ("q", window("inner", "L2-4", 0.9)),
        ("q", window("next", "L7-8", 0.1)),
    ]
    by_id = entries(compose(pairs))
    # inner lies within outer: one candidate, at inner's (the best member's) rank
    assert by_id["inner"]["merged"]["range"] == "L1-6"
    assert by_id["outer"]["reason"] == "merged_into"
    assert by_id["outer"]["detail"]["region"] == {"uri": URI, "range": "L1-6"}
    # next only touches it: ranked on its own (rank 1), then, both admitted, coalesced
    assert by_id["next"]["rank"] == 1
    assert by_id["next"]["detail"]["coalesced"] is True
    pairs2 = [("p", window("outer", "L1-6", 0.9)), ("q", window("inner", "L2-4", 0.3))]
    by_id2 = entries(compose(pairs2))
    assert by_id2["inner"]["reason"] == "contained_in"
    assert by_id2["outer"]["merged"]["range"] == "L1-6"
    assert source_lines_in(compose(pairs2).prompt) == Counter(SOURCE.splitlines()[:6])


OTHER = "file:///srv/repo/other.py"


def elsewhere(fid: str, score: float) -> ContextFrame:
    """A frame of another file, as long as a four-line window of the module."""
    text = "".join(
        f"other {n:02d} of another file, its own words {n * 104729}\n" for n in (1, 2, 3, 4)
    )
    return ContextFrame(
        id=fid,
        kind="snippet",
        title="other.py",
        content=text,
        content_digest=sha256_digest(text.encode()),
        uri=OTHER,
        score=score,
        token_cost=canonical_token_cost(text),
        citation_label="other.py L1-4",
        provenance=[Provenance(type="file", uri=OTHER, range="L1-4")],
    )


def test_a_weak_adjacent_window_does_not_ride_in_beside_its_strong_neighbour() -> None:
    strong = ("p", window("strong", "L1-4", 0.9))
    weak = ("p", window("weak", "L5-8", 0.1))
    other = ("q", elsewhere("other", 0.5))
    pairs = [strong, weak, other]
    # a budget that holds two four-line blocks, not three
    two = compose([strong, other], budget=10_000).tokens_used
    result = compose(pairs, budget=two + 10)
    by_id = entries(result)
    # ranked on its own, the weak neighbour is the one left out, not the other file
    assert by_id["other"]["disposition"] == "included"
    assert by_id["strong"]["disposition"] == "included"
    assert by_id["weak"]["reason"] == "over_budget"
    assert "merged" not in by_id["strong"] and "coalesced" not in by_id["strong"]
    assert labels(result) == {"strong": "module.py L1-4", "other": "other.py L1-4"}


def test_adjacent_blocks_both_admitted_are_rendered_as_one() -> None:
    first = ("lexical", window("first", "L1-4", 0.4))
    second = ("dense", window("second", "L5-8", 0.8))
    result = compose([first, second])
    apart = compose([first, second], sources=None)
    # one fence over lines 1-8, each line once; the second fence is not paid
    assert result.prompt.count("<frame ") == 1 and apart.prompt.count("<frame ") == 2
    assert source_lines_in(result.prompt) == Counter(SOURCE.splitlines()[:8])
    assert result.tokens_used < apart.tokens_used
    assert result.prompt_usage()["canonical_tokens"] == result.tokens_used
    # the packer's count, less what coalescing saved, is the prompt's size
    assert result.prompt_usage()["bytes"] == len(result.prompt.encode())
    by_id = entries(result)
    # the block is the best-ranked member's (second, 0.8): its identity, the union's label
    lead, follower = by_id["second"], by_id["first"]
    assert labels(result) == {"second": "module.py L1-8"}
    union = address_line_range(DATA, "L1-8")
    assert lead["disposition"] == "included" and lead["rank"] == 0
    assert lead["vouched_by"] == ["dense", "lexical"]
    assert lead["coalesced"] == {
        "uri": URI,
        "range": "L1-8",
        "content_digest": sha256_digest(union),
        "tokens": lead["coalesced"]["tokens"],
        "members": [FrameId.of(*first).to_wire()],
    }
    # admitted on its own merit (its rank and the tokens the walk charged it), then
    # folded into the block that quotes it: feedback and the eval read it as a member
    assert follower["disposition"] == "excluded" and follower["reason"] == "merged_into"
    assert follower["rank"] == 1 and follower["tokens"] > 0
    assert follower["label"] == "module.py L1-4"  # its own, not the block's
    assert follower["detail"] == {
        "kept": FrameId.of(*second).to_wire(),
        "region": {"uri": URI, "range": "L1-8"},
        "coalesced": True,
    }
    # the citation resolves to the union and to both members' provenance
    (citation,) = result.citations
    assert [p.range for p in citation.provenance] == ["L1-8", "L5-8", "L1-4"]
    assert citation.provenance[0].digest == sha256_digest(union)
    (shown,) = result.evidence()
    assert shown["range"] == "L1-8" and shown["content"] == union.decode()


def test_a_coalesced_block_credits_every_member_and_their_copies() -> None:
    from hostd.quality import Composition, build_record, credited, resolve_used

    first = ("lexical", window("first", "L1-4", 0.4))
    copy = ("dense", window("first", "L1-4", 0.3))  # dedup folds it into lexical's
    second = ("dense", window("second", "L5-8", 0.8))
    pairs = [first, copy, second]
    result = compose(pairs)
    by_id = {(e["frame"]["provider_id"], e["frame"]["frame_id"]): e for e in entries_of(result)}
    # the copy names the block that quotes it, not the member that left the prompt
    assert by_id[("dense", "first")]["reason"] == "duplicate"
    assert by_id[("dense", "first")]["detail"]["kept"]["frame_id"] == "second"
    record = build_record(
        Composition("r-1", "goal", 4000, None, pairs, result), store_content=False
    )
    kept = resolve_used(record.citations, ["module.py L1-8"])
    assert kept == (("dense", "second", second[1].content_digest),)
    assert set(credited(record, kept)) == {
        (p, f.id, f.content_digest) for p, f in (first, copy, second)
    }


def entries_of(result) -> list[dict[str, Any]]:
    return result.audit.entry_dicts()


@pytest.mark.parametrize(
    ("state", "reason"),
    [
        ({"state": "content_checked"}, "not_source_verified"),
        ({"state": "unverifiable", "reason": "outside_trusted_roots"}, "not_source_verified"),
    ],
)
def test_unverified_bytes_are_never_merged(state: dict[str, Any], reason: str) -> None:
    pairs = list(SHIFTED)
    verification = verified(*pairs)
    verification[FrameId.of(*pairs[0])] = state
    result = compose(pairs, verification=verification)
    by_id = entries(result)
    assert by_id["a"]["disposition"] == by_id["b"]["disposition"] == "included"
    assert by_id["a"]["span"] == {"kept_apart": reason}
    assert "merged" not in by_id["b"]


def test_an_unverified_range_inside_a_verified_one_is_dropped() -> None:
    pairs = [("p", window("big", "L1-9", 0.2)), ("q", window("small", "L3-5", 0.9))]
    verification = verified(pairs[0])  # the small one is not source_verified
    by_id = entries(compose(pairs, verification=verification))
    assert by_id["small"]["reason"] == "contained_in"
    assert by_id["small"]["detail"] == {
        "kept": FrameId.of(*pairs[0]).to_wire(),
        "region": {"uri": URI, "range": "L1-9"},
    }
    assert by_id["big"]["merged"]["members"] == [FrameId.of(*pairs[1]).to_wire()]


def test_content_that_is_not_the_addressed_lines_is_kept_apart() -> None:
    pairs = [
        ("p", window("a", "L1-6", 0.5)),
        ("q", window("b", "L4-9", 0.5, content="a summary of lines four to nine\n")),
    ]
    by_id = entries(compose(pairs))
    assert by_id["b"]["span"] == {"kept_apart": "content_differs"}
    assert "merged" not in by_id["a"]


def test_a_source_not_re_read_leaves_the_frames_apart_saying_so() -> None:
    by_id = entries(compose(SHIFTED, sources={}))
    assert by_id["a"]["span"] == by_id["b"]["span"] == {"kept_apart": "source_unavailable"}


def test_the_cap_keeps_a_merged_block_within_a_multiple_of_its_largest_member() -> None:
    pairs = [
        ("p", window("a", "L1-6", 0.9)),
        ("q", window("b", "L4-9", 0.8)),
        ("r", window("c", "L7-12", 0.7)),
    ]
    result = compose(pairs, merge_max_ratio=1.5)
    by_id = entries(result)
    assert by_id["a"]["merged"]["range"] == "L1-9"
    # the next block starts after it: lines 7-9 are quoted once, by the first block
    assert by_id["c"]["merged"]["range"] == "L10-12"
    assert by_id["c"]["merged"]["trimmed"] is True
    assert by_id["c"]["span"] == {"kept_apart": "merge_cap"}
    # ranked apart, admitted apart, then rendered as one block: each line once
    assert by_id["c"]["detail"]["coalesced"] is True
    assert by_id["a"]["coalesced"]["range"] == "L1-12"
    assert source_lines_in(result.prompt) == Counter(SOURCE.splitlines())
    whole = entries(compose(pairs, merge_max_ratio=2.0))
    assert whole["a"]["merged"]["range"] == "L1-12"
    with pytest.raises(ValueError, match="merge_max_ratio must be at least 1"):
        compose(pairs, merge_max_ratio=0.5)


def test_the_merged_candidate_stands_in_each_providers_list_at_its_own_rank() -> None:
    pairs = [
        *SHIFTED,
        ("dense", window("d2", "L11-12", 0.7)),
        # no provenance: never part of a span
        ("lexical", window("l2", "L11", 0.1).model_copy(update={"provenance": []})),
    ]

    def ranked(result) -> list[str]:
        with_rank = [e for e in result.audit.entry_dicts() if "rank" in e]
        return [e["frame"]["frame_id"] for e in sorted(with_rank, key=lambda e: e["rank"])]

    # round_robin, providers in id order (dense, lexical): apart, a is lexical's rank 1
    assert ranked(compose(pairs, strategy="round_robin", sources=None)) == ["b", "a", "d2", "l2"]
    # merged, b is rank 1 of both lists (lexical's at its own best member's rank), so
    # round 1 is b alone and l2 is lexical's rank 2, never promoted to its rank 1
    assert ranked(compose(pairs, strategy="round_robin")) == ["b", "d2", "l2"]


def test_without_sources_nothing_is_merged_or_noted() -> None:
    result = compose(SHIFTED, sources=None)
    for entry in result.audit.entry_dicts():
        assert "merged" not in entry and "span" not in entry


RANGES = st.tuples(st.integers(1, 12), st.integers(0, 5)).map(
    lambda t: f"L{t[0]}-{min(12, t[0] + t[1])}" if t[1] else f"L{t[0]}"
)


@st.composite
def windows(draw: st.DrawFn) -> list[tuple[str, ContextFrame]]:
    n = draw(st.integers(1, 7))
    out = []
    for k in range(n):
        rng = draw(RANGES)
        score = draw(st.sampled_from([0.1, 0.5, 0.5, 0.9]))
        out.append((draw(st.sampled_from(["p", "q", "r"])), window(f"w{k}-{rng}", rng, score)))
    return out


@settings(max_examples=150, deadline=None)
@given(windows(), st.sampled_from([1.0, 1.5, 2.0, 100.0]), st.randoms(use_true_random=False))
def test_span_merging_is_a_pure_function_of_the_input_set(pairs, ratio, rnd) -> None:
    shuffled = list(pairs)
    rnd.shuffle(shuffled)
    first = compose(pairs, merge_max_ratio=ratio)
    second = compose(shuffled, merge_max_ratio=ratio)
    assert first.prompt == second.prompt
    assert first.audit.entry_dicts() == second.audit.entry_dicts()
    assert [c.to_wire() for c in first.citations] == [c.to_wire() for c in second.citations]
    citation_labels = [c.label for c in first.citations]
    assert len(set(citation_labels)) == len(citation_labels)
    # every offered frame is in the audit exactly once
    offered = Counter(FrameId.of(p, f) for p, f in pairs)
    audited = Counter(FrameId.from_wire(e["frame"]) for e in first.audit.entry_dicts())
    assert audited == offered


@settings(max_examples=300, deadline=None)
@given(windows(), st.sampled_from([1.0, 1.5, 2.0, 100.0]))
def test_every_quoted_line_appears_exactly_once(pairs, ratio) -> None:
    result = compose(pairs, merge_max_ratio=ratio, budget=100_000)
    wanted: set[str] = set()
    for _, f in pairs:
        wanted.update((f.content or "").splitlines())
    assert source_lines_in(result.prompt) == Counter(wanted)


@settings(max_examples=150, deadline=None)
@given(windows(), st.sampled_from([1.0, 1.5, 2.0]))
def test_a_merged_block_never_exceeds_the_cap(pairs, ratio) -> None:
    result = compose(pairs, merge_max_ratio=ratio, budget=100_000)
    sizes = {FrameId.of(p, f): len((f.content or "").encode()) for p, f in pairs}
    # a candidate as ranked: its pre-rank ``merged`` note (on its entry, included or
    # folded into a coalesced block after packing), with the members it absorbed
    for e in result.audit.entries:
        if e.merged is None:
            continue
        members = [e.frame, *(FrameId.from_wire(m) for m in e.merged["members"])]
        union = address_line_range(DATA, e.merged["range"])
        assert len(union) <= ratio * max(sizes[m] for m in members)


@st.composite
def chunkings(draw: st.DrawFn) -> list[tuple[str, ContextFrame]]:
    """Windows of one chunker: they touch or lie apart, never overlap."""
    cuts = sorted(draw(st.sets(st.integers(2, 12), max_size=6)))
    bounds = list(zip([1, *cuts], [c - 1 for c in cuts] + [12], strict=True))
    out = []
    for start, end in bounds:
        if draw(st.booleans()) or len(bounds) == 1:
            rng = f"L{start}-{end}" if end > start else f"L{start}"
            score = draw(st.sampled_from([0.1, 0.3, 0.5, 0.9]))
            out.append((draw(st.sampled_from(["p", "q"])), window(f"c{start}", rng, score)))
    return out


def admitted(result) -> set[FrameId]:
    """Every frame the packer's walk admitted: included, or coalesced into one that is."""
    return {
        e.frame
        for e in result.audit.entries
        if e.included or (e.reason == "merged_into" and e.detail.get("coalesced"))
    }


@settings(max_examples=200, deadline=None)
@given(
    chunkings(),
    st.integers(100, 1500),
    st.sampled_from(["score", "round_robin"]),
    st.sampled_from(["edges", "ranked", "grouped", "canonical"]),
)
def test_coalescing_never_changes_what_the_walk_admits(pairs, budget, strategy, placement) -> None:
    kw = {"budget": budget, "strategy": strategy, "placement": placement}
    result = compose(pairs, **kw)
    apart = compose(pairs, sources=None, **kw)
    # the same evidence as with nothing merged, at no more tokens, each line once
    assert admitted(result) == admitted(apart)
    assert result.tokens_used <= apart.tokens_used
    assert result.prompt_usage()["canonical_tokens"] == result.tokens_used
    assert source_lines_in(result.prompt) == source_lines_in(apart.prompt)
    assert max(source_lines_in(result.prompt).values(), default=1) == 1
    # one fence fewer for every member folded into a block
    folded = len(admitted(result)) - len(result.citations)
    assert result.prompt.count("<frame ") == apart.prompt.count("<frame ") - folded


@settings(max_examples=200, deadline=None)
@given(
    st.one_of(chunkings(), windows()),
    st.integers(0, 1500),
    st.sampled_from(["edges", "ranked", "grouped", "canonical"]),
    st.lists(st.sampled_from(["", "pinned", "x" * 41]), max_size=2),
    st.booleans(),
    st.booleans(),
)
def test_the_included_entries_and_tokens_other_add_up_to_tokens_used(
    pairs, budget, placement, floors, merged, tokenized
) -> None:
    # Coalesced blocks (their members' entries are merged_into), span merges, floors, the
    # preamble, a tokenizer's whole-prompt count: the audit says what the entries do not.
    kw: dict[str, Any] = {"budget": budget, "placement": placement}
    kw["floors"] = [{"label": f"floor {k}", "content": c} for k, c in enumerate(floors)]
    if not merged:
        kw["sources"] = None
    if tokenized:
        kw["tokenizer"] = lambda text: len(text.split()) + len(text) // 7
    try:
        result = compose(pairs, **kw)
    except FloorsExceedBudget:
        return
    audit = Audit.model_validate(result.audit.to_wire())  # as a client reads it
    included = sum(e.tokens or 0 for e in audit.included())
    assert audit.tokens_other is not None
    assert included + audit.tokens_other == audit.tokens_used == result.tokens_used


def test_tokens_other_holds_the_lines_a_coalesced_block_quotes_for_its_members() -> None:
    # The three touching windows are quoted as one block, charged to the lead alone.
    pairs = [
        ("p", window("a", "L1-3", 0.9)),
        ("q", window("b", "L4-6", 0.5)),
        ("p", window("c", "L7-9", 0.3)),
    ]
    coalesced = compose(pairs).audit.to_wire()
    apart = compose(pairs, sources=None).audit.to_wire()
    (lead,) = [e for e in coalesced["entries"] if e["disposition"] == "included"]
    assert lead["frame"]["frame_id"] == "a" and "coalesced" in lead
    # Apart, the entries hold every block and the rest is the preamble, less what
    # rounding each of the three blocks up on its own took (under a token each).
    preamble = canonical_token_cost(EVIDENCE_PREAMBLE)
    assert preamble - 3 <= apart["tokens_other"] <= preamble
    # Coalesced, what the one block costs beyond the lead's own is there too.
    beyond = lead["coalesced"]["tokens"] - lead["tokens"]
    assert beyond > 0
    assert preamble - 1 <= coalesced["tokens_other"] - beyond <= preamble


def test_a_tokenizer_budget_counts_the_coalesced_prompt() -> None:
    first = ("lexical", window("first", "L1-4", 0.4))
    second = ("dense", window("second", "L5-8", 0.8))

    def words(text: str) -> int:
        return len(text.split())

    result = compose([first, second], tokenizer=words)
    assert result.prompt.count("<frame ") == 1
    assert result.tokens_used == words(result.prompt)


OTHER_URI = "file:///srv/repo/other.py"


def _reference_region(index: int, frame: ContextFrame, key: Any, sources: Any) -> Any:
    """The region rule as first written: one ``_Region`` per frame, whatever it shares."""
    from hostd.compose._lines import lines_of
    from hostd.compose._spans import _Region

    provs = frame.provenance
    if not provs or frame.content is None:
        return None
    uri = provs[0].uri or frame.uri
    if uri is None:
        return None
    lines = sources.get(uri)
    span = None
    for p in provs:
        if p.type != "file" or (p.uri or frame.uri) != uri:
            return None
        here = lines_of(p.range, lines)
        if here is None or (span is not None and here != span):
            return None
        span = here
    assert span is not None
    return _Region(index, uri, span[0], span[1], key, lines)


def _reference_merge(cands: Any, sources: Any, verification: Any, ratio: float) -> Any:
    """``merge_spans`` as first written: every candidate made a region, every run looked at."""
    from hostd.compose import _spans as s

    out = s.SpanMerge(list(range(len(cands))))
    by_uri: dict[str, list[Any]] = {}
    for i, f in enumerate(cands.frames):
        r = _reference_region(i, f, cands.key(i), sources)
        if r is not None:
            by_uri.setdefault(r.uri, []).append(r)
    dropped: set[int] = set()
    for uri in sorted(by_uri):
        regions = by_uri[uri]
        if len(regions) < 2:
            continue
        regions.sort(key=lambda r: (r.start, r.end, r.key))
        for run in s._runs(regions):
            frame = cands.frames[run[0].index]
            if len(run) > 1:
                s._merge_run(run, cands, verification, ratio, out, dropped)
            elif s._distrust(verification, run[0], frame.content or "") is None:
                out.spans[run[0].index] = s._span(run[0], frame)
    if dropped:
        out.keep = [i for i in range(len(cands)) if i not in dropped]
    return out


@settings(max_examples=300, deadline=None)
@given(
    windows(),
    st.lists(st.integers(0, 3), min_size=7, max_size=7),
    st.sampled_from([{}, {URI}, {OTHER_URI}, {URI, OTHER_URI}]),
    st.sampled_from([1.0, 2.0, 100.0]),
)
def test_span_merging_equals_the_region_by_region_rule(pairs, how, re_read, ratio) -> None:
    from hostd.compose import CandidateSet
    from hostd.compose._lines import Lines
    from hostd.compose._spans import merge_spans

    # Each window in one of two files, verified or not, its bytes the lines or not.
    mixed = []
    for (pid, f), kind in zip(pairs, how, strict=False):
        if kind == 1:
            prov = [p.model_copy(update={"uri": OTHER_URI}) for p in f.provenance]
            f = f.model_copy(update={"uri": OTHER_URI, "provenance": prov})
        elif kind == 2:
            f = f.model_copy(update={"content": (f.content or "") + "x"})
        mixed.append((pid, f))
    state = {
        FrameId.of(p, f): dict(VERIFIED) for k, (p, f) in zip(how, mixed, strict=False) if k != 3
    }
    sources = {uri: Lines(DATA) for uri in re_read}
    cands = CandidateSet.of(mixed)
    fast = merge_spans(cands, sources, state, ratio)
    slow = _reference_merge(cands, sources, state, ratio)
    assert fast.keep == slow.keep
    assert fast.frames == slow.frames
    assert fast.support == slow.support
    assert fast.absorbed == slow.absorbed
    assert fast.notes == slow.notes
    assert fast.spans == slow.spans


@settings(max_examples=300)
@given(
    st.one_of(
        RANGES,
        st.text(st.sampled_from("L0123456789-x "), max_size=30),
        st.builds(lambda a: f"L{a}-{a}", st.integers(1, 10**30)),
    )
)
def test_a_remembered_range_reads_as_a_fresh_parse(rng: str) -> None:
    from hostd.compose._lines import Lines, _parse, lines_of

    again = lines_of(rng, None)  # the second read of a short range is the cache's
    assert lines_of(rng, None) == again
    parsed = _parse(rng)
    assert again == (parsed if parsed is None or parsed[0] <= parsed[1] else None)
    lines = Lines(DATA)
    clamped = None if parsed is None else (parsed[0], min(parsed[1], lines.count))
    assert lines_of(rng, lines) == (clamped if clamped and clamped[0] <= clamped[1] else None)


HUGE = "1" * 5000  # past Python's int conversion limit (4,300 digits)


def test_a_range_or_label_of_thousands_of_digits_is_no_range_not_a_crash() -> None:
    """A provider stating a line number of 5,000 digits (in its provenance range or in
    its label's trailing range) costs its own frame its span merging, never the
    composition: such a range is not a range (F17), as any other malformed one."""
    # an honest range under a hostile label: merged, and the label's range not read
    loud = window("h", "L4-9", 0.9).model_copy(update={"citation_label": f"module.py L{HUGE}"})
    result = compose([("lexical", window("a", "L1-6", 0.4)), ("dense", loud)])
    assert labels(result) == {"h": f"module.py L{HUGE} (L1-9)"}
    # a hostile range: left whole, beside the frame it would have overlapped
    body = address_line_range(DATA, "L4-9")
    far = window("f", "L4-9", 0.9).model_copy(
        update={
            "provenance": [
                Provenance(type="file", uri=URI, range=f"L{HUGE}-9", digest=sha256_digest(body))
            ]
        }
    )
    result = compose([("lexical", window("a", "L1-6", 0.4)), ("dense", far)])
    assert {e["frame"]["frame_id"] for e in result.audit.entry_dicts()} == {"a", "f"}
    assert labels(result) == {"a": "module.py L1-6", "f": "module.py L4-9"}
