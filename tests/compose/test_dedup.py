"""dedup_cross_provider: one frame per piece of evidence, a pure function of the set (D2)."""

from __future__ import annotations

import random

from hypothesis import given, settings
from hypothesis import strategies as st

from hostd.compose import DedupDrop, dedup_cross_provider
from hostd.compose._candidates import CandidateSet
from hostd.protocol import FrameId

from ._helpers import digest_of, file_prov, frame, frame_pairs


def test_the_same_digest_from_two_providers_keeps_the_higher_score() -> None:
    d = digest_of("same bytes")
    lo = frame("x", 0.4, "same bytes", digest=d)
    hi = frame("y", 0.9, "same bytes", digest=d)
    out = dedup_cross_provider([("a", lo), ("b", hi)])
    assert [(p, f.id) for p, f in out.kept] == [("b", "y")]
    assert out.dropped == [DedupDrop(FrameId("a", "x", d), FrameId("b", "y", d))]
    assert out.kept.vouched_by(0) == ("a", "b")


def test_an_equal_score_tie_keeps_the_canonically_smaller_frame_id() -> None:
    d = digest_of("tie")
    out = dedup_cross_provider(
        [("b", frame("x", 0.5, "tie", digest=d)), ("a", frame("z", 0.5, "tie", digest=d))]
    )
    assert [(p, f.id) for p, f in out.kept] == [("a", "z")]


def test_a_shared_file_region_collapses_frames_with_different_digests() -> None:
    region = file_prov("file:///repo/net.rs", "L120-160")
    a = frame("a1", 0.7, "fn retry()", with_digest=True, provenance=[region])
    b = frame("b1", 0.3, "fn retry() {}", with_digest=True, provenance=[region])
    out = dedup_cross_provider([("a", a), ("b", b)])
    assert [f.id for _, f in out.kept] == ["a1"]
    assert out.dropped[0].dropped == FrameId.of("b", b)


def test_the_same_uri_with_another_range_is_different_evidence() -> None:
    a = frame("a1", 0.7, "one", provenance=[file_prov("file:///x", "L1-5")])
    b = frame("b1", 0.3, "two", provenance=[file_prov("file:///x", "L6-9")])
    c = frame("c1", 0.3, "three", provenance=[file_prov("file:///x")])
    assert len(dedup_cross_provider([("a", a), ("b", b), ("c", c)]).kept) == 3


def test_non_file_provenance_never_merges() -> None:
    from hostd.protocol import Provenance

    link = Provenance(type="derivation", uri="memo://1")
    a = frame("a1", 0.7, "one", provenance=[link])
    b = frame("b1", 0.3, "two", provenance=[link])
    assert len(dedup_cross_provider([("a", a), ("b", b)]).kept) == 2


def test_the_survivor_carries_the_union_of_the_group_provenance() -> None:
    d = digest_of("body")
    p1, p2, p3 = file_prov("file:///1"), file_prov("file:///2"), file_prov("file:///3")
    a = frame("a", 0.9, "body", digest=d, provenance=[p1, p2])
    b = frame("b", 0.5, "body", digest=d, provenance=[p2, p3])
    out = dedup_cross_provider([("pb", b), ("pa", a)])
    ((_, kept),) = list(out.kept)
    assert [p.uri for p in kept.provenance] == ["file:///1", "file:///2", "file:///3"]
    # the input frame is not mutated
    assert [p.uri for p in a.provenance] == ["file:///1", "file:///2"]


def test_grouping_is_transitive_through_digest_and_region() -> None:
    # a~b by digest, b~c by file region: one piece of evidence, whoever arrived first
    d = digest_of("ab")
    region = file_prov("file:///r", "L1")
    a = frame("a", 0.2, "ab", digest=d)
    b = frame("b", 0.3, "ab", digest=d, provenance=[region])
    c = frame("c", 0.9, "c!", with_digest=True, provenance=[region])
    for order in ([a, b, c], [c, b, a], [b, a, c]):
        out = dedup_cross_provider([(f.id.upper(), f) for f in order])
        assert [f.id for _, f in out.kept] == ["c"]
        assert sorted(x.dropped.frame_id for x in out.dropped) == ["a", "b"]
        assert {x.kept.frame_id for x in out.dropped} == {"c"}
        assert out.kept.vouched_by(0) == ("A", "B", "C")


def test_the_same_identity_offered_twice_is_one_frame() -> None:
    f = frame("dup", 0.5, "body")
    out = dedup_cross_provider([("a", f), ("a", f)])
    assert len(out.kept) == 1
    assert out.dropped == [DedupDrop(FrameId("a", "dup"), FrameId("a", "dup"))]


def test_distinct_frames_are_all_kept_in_canonical_order() -> None:
    frames = [("b", frame("2", 0.1, "u")), ("a", frame("9", 0.9, "v")), ("a", frame("1", 0.5, "w"))]
    out = dedup_cross_provider(frames)
    assert [(p, f.id) for p, f in out.kept] == [("a", "1"), ("a", "9"), ("b", "2")]
    assert out.dropped == []


def test_repeated_identities_below_the_survivor_merge_provenance_in_one_order() -> None:
    # One identity offered four times: the best copy survives, and the three equal
    # lower-scored copies (different provenance) must merge in an order that does
    # not depend on arrival (a hypothesis counterexample).
    whole, ranged = file_prov("file:///a.py"), file_prov("file:///a.py", "L1-5")
    copies = [
        ("alpha", frame("f1", 0.0, "retry loop backs off")),
        ("alpha", frame("f1", 0.1, "retry loop backs off")),
        ("alpha", frame("f1", 0.0, "retry loop backs off", provenance=[whole])),
        ("alpha", frame("f1", 0.0, "retry loop backs off", provenance=[ranged])),
    ]
    outs = {
        tuple(f.model_dump_json() for _, f in dedup_cross_provider(order).kept)
        for order in (copies, copies[::-1], copies[1:] + copies[:1], copies[2:] + copies[:2])
    }
    assert len(outs) == 1


@given(frame_pairs())
def test_dedup_is_a_pure_function_of_the_input_set(pairs: list) -> None:
    first = dedup_cross_provider(pairs)
    shuffled = list(pairs)
    random.Random(len(pairs)).shuffle(shuffled)
    second = dedup_cross_provider(reversed(shuffled))
    assert list(first.kept) == list(second.kept)
    assert first.dropped == second.dropped
    assert [first.kept.vouched_by(i) for i in range(len(first.kept))] == [
        second.kept.vouched_by(i) for i in range(len(second.kept))
    ]
    # every input frame is kept or dropped, exactly once
    assert len(first.kept) + len(first.dropped) == len(pairs)
    kept_ids = {FrameId.of(p, f) for p, f in first.kept}
    assert all(d.kept in kept_ids for d in first.dropped)


def test_a_large_all_distinct_set_dedups_without_a_pairwise_scan() -> None:
    # 20k frames that all share one provenance uri but not its range: a pairwise
    # scan would make 2e8 comparisons; the hash-map grouping is one pass.
    frames = [
        ("p", frame(f"f{i}", 0.5, f"c{i}", provenance=[file_prov("file:///big", f"L{i + 1}")]))
        for i in range(20_000)
    ]
    out = dedup_cross_provider(frames)
    assert len(out.kept) == 20_000


def test_merging_drops_repeats_and_keeps_what_only_the_loser_had() -> None:
    d = digest_of("body")
    p1, p2 = file_prov("file:///1"), file_prov("file:///2")
    best = frame("a", 0.9, "body", digest=d, provenance=[p1, p1])
    other = frame("b", 0.5, "body", digest=d, provenance=[p2])
    ((_, kept),) = list(dedup_cross_provider([("pa", best), ("pb", other)]).kept)
    assert [p.uri for p in kept.provenance] == ["file:///1", "file:///2"]


def _fake_provenance(uri: object) -> dict[str, object]:
    """A provenance entry's fields (its model's ``__dict__``) whose hashes collide:
    hash(-1) == hash(-2) in CPython."""
    return {"type": "file", "uri": uri, "range": None}


def test_a_region_hash_collision_falls_back_to_exact_comparison() -> None:
    from hostd.compose._dedup import _region_links

    assert hash(("file", -1, None)) == hash(("file", -2, None))
    provs = [_fake_provenance(-1), _fake_provenance(-2), _fake_provenance(-1)]
    assert _region_links(provs, range(3)) == [(2, 0)]


@settings(max_examples=300)
@given(
    st.lists(st.integers(0, 4), max_size=12),
    st.lists(st.tuples(st.integers(0, 11), st.integers(0, 11)), max_size=6),
)
def test_groups_by_first_position_equal_the_union_find(
    keys: list[int], pairs: list[tuple[int, int]]
) -> None:
    from hostd.compose._dedup import _group_members, _groups, _repeats

    n = len(keys)
    same = _repeats(keys)
    regions = [(a, b) for a, b in pairs if a < n and b < n and a != b]
    fast = _groups(same, regions, n)
    slow = _group_members(same + regions)
    assert {root: sorted(m) for root, m in fast.items()} == {
        root: sorted(m) for root, m in slow.items()
    }
    assert all(root == min(members) for root, members in fast.items())


@settings(max_examples=300)
@given(
    st.lists(
        st.tuples(st.sampled_from(["file:///a", "file:///b", None]), st.sampled_from(["L1", None])),
        min_size=1,
        max_size=8,
    ),
    st.randoms(use_true_random=False),
)
def test_a_group_of_single_entries_merges_as_the_general_rule_does(
    entries: list[tuple[str | None, str | None]], rnd: random.Random
) -> None:
    from hostd.compose._dedup import _merged_provenance, _merged_single, _prov_key
    from hostd.protocol import Provenance

    provs = [[Provenance(type="file", uri=uri, range=rng)] for uri, rng in entries]
    pkeys = {i: [_prov_key(p) for p in entry] for i, entry in enumerate(provs)}
    ranked = list(range(len(provs)))
    rnd.shuffle(ranked)
    general = _merged_provenance(ranked, ranked[0], provs, pkeys)
    fast = _merged_single(ranked, provs, pkeys)
    assert fast == general
    if fast is not None:
        assert general is not None
        assert all(a is b for a, b in zip(fast, general, strict=True))


def test_the_key_column_is_each_candidates_key_built_once() -> None:
    pool = CandidateSet.of(
        [("b", frame("x", 0.5, "one", with_digest=True)), ("a", frame("y", 0.4, None))]
    )
    keys = pool.key_column()
    assert keys == [pool.key(0), pool.key(1)]
    assert keys[0][2] and keys[1] == ("a", "y", False, "")  # a missing digest orders first
    # dedup ranks its groups by it and the audit orders the duplicates by it: one column
    assert pool.key_column() is keys
