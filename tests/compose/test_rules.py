"""Each stage's rule stated plainly: candidate order, dedup groups, the ranking
policies' definitions, and that a composition leaves the garbage collector alone."""

from __future__ import annotations

import gc
from collections.abc import Iterable, Iterator
from contextlib import contextmanager

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from hostd.compose import (
    CandidateSet,
    Floor,
    FloorsExceedBudget,
    ScoreDescending,
    compose_for_prompt,
)
from hostd.compose._candidates import rank_desc
from hostd.compose._dedup import _prov_key, dedup_pool
from hostd.compose.ranking import Frames
from hostd.protocol import ContextFrame

from ._helpers import frame, frame_pairs


@contextmanager
def _collector(enabled: bool) -> Iterator[None]:
    was = gc.isenabled()
    (gc.enable if enabled else gc.disable)()
    try:
        yield
    finally:
        (gc.enable if was else gc.disable)()


class _Recording:
    """A third-party policy that notes whether the collector ran during ranking."""

    name = "recording"

    def __init__(self, fail: bool = False) -> None:
        self.seen: list[bool] = []
        self.fail = fail

    def order(self, frames: Frames) -> list[int]:
        self.seen.append(gc.isenabled())
        if self.fail:
            raise RuntimeError("policy failed")
        return ScoreDescending().order(frames)


def _pairs() -> list[tuple[str, ContextFrame]]:
    return [("p", frame("a", 0.9, "alpha")), ("q", frame("b", 0.4, "beta"))]


@pytest.mark.parametrize("enabled", [True, False])
def test_compose_leaves_the_collector_as_the_application_set_it(enabled: bool) -> None:
    # Library code must not change process-wide collector state (issue 15), not even
    # for the length of a call: a policy sees the collector as the caller left it.
    policy = _Recording()
    with _collector(enabled):
        compose_for_prompt(_pairs(), 10_000, strategy=policy)
        assert gc.isenabled() is enabled
        with pytest.raises(RuntimeError, match="policy failed"):
            compose_for_prompt(_pairs(), 10_000, strategy=_Recording(fail=True))
        assert gc.isenabled() is enabled
        with pytest.raises(FloorsExceedBudget):
            compose_for_prompt(_pairs(), 1, floors=[Floor("pinned", "x" * 40)])
        assert gc.isenabled() is enabled
    assert policy.seen == [enabled]


# Few distinct values, so runs of ties are long.
_VALUES = st.lists(st.sampled_from([0.0, -0.0, 0.25, 0.5, 1.0, float("-inf")]), max_size=300)


@settings(max_examples=60, deadline=None)
@given(values=_VALUES, data=st.data())
def test_rank_desc_is_value_descending_then_key(values: list[float], data: st.DataObject) -> None:
    n = len(values)
    keys = [(f"p{i % 3}", f"f{(i * 7919) % 1009:04d}", i) for i in range(n)]
    canonical = sorted(range(n), key=keys.__getitem__)
    indices = data.draw(st.sampled_from(["all", "subset", "generator"]), label="indices")
    if indices == "all":
        chosen: Iterable[int] = canonical
        expected_from = canonical
    else:
        drawn = data.draw(st.sets(st.integers(0, max(n - 1, 0)))) if n else set()
        expected_from = [i for i in canonical if i in drawn]
        chosen = expected_from if indices == "subset" else iter(expected_from)
    expected = sorted(expected_from, key=lambda i: (-values[i], keys[i]))
    assert rank_desc(chosen, values) == expected


@settings(max_examples=100, deadline=None)
@given(pairs=frame_pairs(max_size=14))
def test_canonical_and_by_score_follow_the_frame_ids(
    pairs: list[tuple[str, ContextFrame]],
) -> None:
    pool = CandidateSet.of(pairs)
    assert pool.canonical() == sorted(range(len(pool)), key=pool.key)
    assert pool.canonical() is pool.canonical()  # sorted once
    assert pool.by_score() == sorted(range(len(pool)), key=lambda i: (-pool.scores[i], pool.key(i)))


@settings(max_examples=100, deadline=None)
@given(pairs=frame_pairs(max_size=14))
def test_dedup_survivor_and_support_follow_the_group_rule(
    pairs: list[tuple[str, ContextFrame]],
) -> None:
    pool = CandidateSet.of(pairs)
    res = dedup_pool(pool)
    groups: dict[int, list[int]] = {}
    for dropped, kept in res.drops:
        groups.setdefault(kept, [kept]).append(dropped)
    position = {origin: j for j, origin in enumerate(res.origin)}
    for best, members in groups.items():
        top = min(members, key=lambda i: (-pool.scores[i], pool.key(i)))
        assert (pool.scores[best], pool.key(best)) == (pool.scores[top], pool.key(top))
        by_provider: dict[str, float] = {}
        for i in members:
            p = pool.provider_ids[i]
            by_provider[p] = max(by_provider.get(p, -float("inf")), pool.scores[i])
        j = position[best]
        # Support is recorded only when several providers vouch; a lone survivor's
        # own (provider, score) is what the fusion policies read instead.
        assert res.kept.support.get(j) == (
            tuple(sorted(by_provider.items())) if len(by_provider) > 1 else None
        )
        union = {_prov_key(pv) for i in members for pv in pool.frames[i].provenance}
        assert {_prov_key(pv) for pv in res.kept.frames[j].provenance} == union


@settings(max_examples=200, deadline=None)
@given(
    pairs=frame_pairs(max_size=10),
    data=st.data(),
)
def test_unranked_entries_follow_canonical_order_with_every_field_a_tie_break(
    pairs: list[tuple[str, ContextFrame]], data: st.DataObject
) -> None:
    import orjson

    from hostd.compose._audit import unranked_entries
    from hostd.protocol import FrameId

    # Scores a caller did not validate (NaN, infinities) are null on the wire, on
    # either path.
    odd = st.sampled_from([None, float("nan"), float("inf"), -float("inf")])
    pairs = [
        (pid, f if (s := data.draw(odd)) is None else f.model_copy(update={"score": s}))
        for pid, f in pairs
    ]
    pool = CandidateSet.of(pairs)
    n = len(pool)
    index = st.integers(0, max(0, n - 1))
    # The same frame dropped twice, into one survivor or two: rows that tie but for
    # the last field.
    dups = data.draw(st.lists(st.tuples(index, index), max_size=6)) if n else []
    absorbed = (
        data.draw(
            st.lists(
                st.tuples(
                    index,
                    index,
                    st.sampled_from(["merged_into", "contained_in"]),
                    st.just({"uri": "file:///a.py", "range": "L1-5"}),
                ),
                max_size=3,
            )
        )
        if n
        else []
    )
    excluded = data.draw(
        st.lists(
            st.tuples(
                st.builds(FrameId, st.sampled_from(["p", "q"]), st.sampled_from(["f1", "f2"])),
                st.sampled_from(["duplicate", "stale", "quarantined"]),
                st.sampled_from([{}, {"why": "a"}, {"why": "b"}]),
            ),
            max_size=4,
        )
    )

    # The rule as first written: one sort on the whole key, every part built up front.
    def score(x: float) -> float | None:
        return x if -float("inf") < x < float("inf") else None

    def label(i: int) -> str:  # a frame's citation label, else its title (F3)
        f = pool.frames[i]
        return f.citation_label if f.citation_label and f.citation_label.strip() else f.title

    def reference(dups: list, excluded: list, absorbed: list) -> list[dict[str, object]]:
        keyed: list[tuple[tuple[object, ...], dict[str, object]]] = []
        for m, k, reason, region in absorbed:
            entry = {
                "frame": pool.frame_id(m).to_wire(),
                "provider": pool.provider_ids[m],
                "disposition": "excluded",
                "reason": reason,
                "detail": {"kept": pool.frame_id(k).to_wire(), "region": dict(region)},
                "label": label(m),
                "score": score(pool.scores[m]),
            }
            keyed.append(((False, pool.key(m), reason, pool.scores[m], repr(pool.key(k))), entry))
        for d, k in dups:
            entry = {
                "frame": pool.frame_id(d).to_wire(),
                "provider": pool.provider_ids[d],
                "disposition": "excluded",
                "reason": "duplicate",
                "detail": {"kept": pool.frame_id(k).to_wire()},
                "label": label(d),
                "score": score(pool.scores[d]),
            }
            keyed.append(
                ((False, pool.key(d), "duplicate", pool.scores[d], repr(pool.key(k))), entry)
            )
        for fid, reason, detail in excluded:
            last = orjson.dumps(detail, option=orjson.OPT_SORT_KEYS).decode()
            entry = {
                "frame": fid.to_wire(),
                "provider": fid.provider_id,
                "disposition": "excluded",
                "reason": reason,
                "detail": dict(detail),
            }
            keyed.append(((reason != "duplicate", tuple(fid), reason, -float("inf"), last), entry))
        keyed.sort(key=lambda row: row[0])
        return [entry for _, entry in keyed]

    assert unranked_entries(pool, dups, excluded, absorbed) == reference(dups, excluded, absorbed)
    # Dedup's folds alone (the common case) take their own path.
    assert unranked_entries(pool, dups, [], []) == reference(dups, [], [])


@settings(max_examples=200)
@given(st.text(max_size=5), st.text(max_size=5), st.one_of(st.none(), st.text(max_size=5)))
def test_a_frame_id_made_from_its_key_is_the_frame_id(
    pid: str, fid: str, digest: str | None
) -> None:
    from hostd.compose._candidates import frame_id_of_key
    from hostd.protocol import FrameId

    made = FrameId(pid, fid, digest)
    again = frame_id_of_key((pid, fid, digest is not None, digest or ""))
    assert type(again) is FrameId
    assert again == made and hash(again) == hash(made)
    assert (again.provider_id, again.frame_id, again.content_digest) == (pid, fid, digest)
    assert again.to_wire() == made.to_wire() and repr(again) == repr(made)
