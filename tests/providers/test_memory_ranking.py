"""providers.memory's ranking among equals: entries that say the same thing are one
frame, the newest's, and tied scores rank the newest entry first, in the scores too."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import orjson
import pytest
from hypothesis import given
from hypothesis import strategies as st

from hostd.protocol import ContextQuery
from providers.memory import MemoryStore, NewEntry
from providers.memory._store import Entry, ranked


def _q(text: str, **kw: object) -> ContextQuery:
    base: dict[str, object] = {"goal": text, "max_frames": 20, "max_tokens": 100_000}
    base.update(kw)
    return ContextQuery.model_validate(base)


def _host_order(frames: list[dict[str, object]]) -> list[object]:
    """The order a host ranks one provider's frames in: score, then frame id on ties."""
    return [f["id"] for f in sorted(frames, key=lambda f: (-float(str(f["score"])), f["id"]))]


@pytest.fixture
def store(tmp_path: Path) -> Iterator[MemoryStore]:
    with MemoryStore(tmp_path / "memory.db") as s:
        yield s


def test_tied_entries_rank_the_newest_first_for_a_host_too(store: MemoryStore) -> None:
    # As long as each other, with the query's word once each: one BM25 score for all.
    old, mid, new = store.add_many(
        [NewEntry("episode", "turn", f"ran the deploy check {n}") for n in (1, 2, 3)]
    )
    lower = store.add("episode", "turn", "ran the deploy check and then the linter twice")
    frames = store.answer(_q("deploy")).to_result().frames
    assert [f["id"] for f in frames] == [new.frame_id, mid.frame_id, old.frame_id, lower.frame_id]
    # Each tied frame after the first scores a hair less, so ranking by score (a host
    # does, frame id on ties) keeps the newest first, and all stay above a lower score.
    scores = [float(f["score"]) for f in frames]
    assert scores == sorted(scores, reverse=True) and len(set(scores)) == 4
    assert round(scores[2], 6) == scores[0]  # less only below the digits a score has
    assert _host_order(frames) == [f["id"] for f in frames]


def test_entries_saying_the_same_thing_take_one_frame_the_newest(store: MemoryStore) -> None:
    said = [
        NewEntry("episode", "Deploy check", "ran the deploy check: all green"),
        NewEntry("episode", "deploy  check", "Ran the deploy check:\nall green "),
        NewEntry("episode", "DEPLOY CHECK", "ran  the  DEPLOY check: all green"),
    ] * 4
    copies = store.add_many(said)
    other = store.add("episode", "deploy check", "ran the deploy check: two failures")
    as_fact = store.add("fact", "deploy check", "ran the deploy check: all green")
    out = store.answer(_q("deploy check"))
    ids = {f.id for f in out.frames}
    assert ids == {copies[-1].frame_id, other.frame_id, as_fact.frame_id}
    assert not out.truncated  # nothing is left out: the copies are the one frame
    # Forgetting the newest copy leaves the one before it to say it.
    store.forget(copies[-1].id)
    assert copies[-2].frame_id in {f.id for f in store.answer(_q("deploy check")).frames}


def test_the_same_store_answers_the_same_bytes(store: MemoryStore) -> None:
    store.add_many([NewEntry("memory", "pref", f"the user likes tabs {n % 3}") for n in range(30)])
    store.add_many([NewEntry("memory", "Pref", "the user likes  TABS 1") for _ in range(5)])
    first = orjson.dumps(store.answer(_q("tabs")).to_result().frames)
    assert orjson.dumps(store.answer(_q("tabs")).to_result().frames) == first


_ENTRY = st.builds(
    lambda n, kind, text: Entry(
        n, kind, "t", text, "", "2026-01-01T00:00:00Z", None, "", None, None
    ),
    st.integers(1, 10**6),
    st.sampled_from(["fact", "episode"]),
    st.sampled_from(["a", "A", " a ", "b"]),
)


@given(
    st.lists(
        st.tuples(_ENTRY, st.sampled_from([0.0, 1e-7, 0.5, 0.5000001, 3.0, 3.0, 40.0])),
        max_size=200,
    )
)
def test_ranked_scores_fall_as_the_order_goes(hits: list[tuple[Entry, float]]) -> None:
    hits = list({e.id: (e, raw) for e, raw in hits}.values())  # ids are unique in a store
    out = ranked(sorted(hits, key=lambda h: (-h[1], h[0].id)))
    said = {(e.kind, e.content.strip().lower()) for e, _ in hits}
    assert len(out) == len(said)  # one frame per thing said
    scores = [s for _, s in out]
    assert all(0.0 <= s < 1.0 for s in scores)
    # Strictly falling, but at 0 (nothing lower to step down to).
    assert all(a > b or a == b == 0.0 for a, b in zip(scores, scores[1:], strict=False))
    for entry, _ in out:  # the newest of the entries that say it
        assert entry.id == max(
            e.id
            for e, _ in hits
            if (e.kind, e.content.strip().lower()) == (entry.kind, entry.content.strip().lower())
        )
