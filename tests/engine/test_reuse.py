"""The session reuse cache: bounded per session and in total, LRU eviction, figures."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from hostd.engine.verify import HeldFrame, ReuseCache
from hostd.protocol import ContextFrame, FrameId, canonical_token_cost, sha256_digest


def _frame(i: int, text: str | None = None, *, digest: bool = True) -> ContextFrame:
    content = text if text is not None else f"frame {i}"
    return ContextFrame(
        id=f"f{i}",
        kind="snippet",
        title=f"t{i}",
        content=content,
        content_digest=sha256_digest(content.encode()) if digest else None,
        score=0.5,
        token_cost=canonical_token_cost(content),
        citation_label=f"c{i}",
    )


def _turn(n: int, pid: str = "p") -> list[tuple[str, ContextFrame]]:
    return [(pid, _frame(i)) for i in range(n)]


def test_remembered_frames_come_back_in_order() -> None:
    cache = ReuseCache()
    assert cache.remember("s", _turn(3)) == 3
    held = cache.held("s")
    assert [h.frame.id for h in held] == ["f0", "f1", "f2"]
    assert held[0] == HeldFrame.of("p", _frame(0))
    assert held[0].fid == FrameId("p", "f0", _frame(0).content_digest)


def test_unknown_session_holds_nothing() -> None:
    cache = ReuseCache()
    assert cache.held("nope") == []
    assert cache.figures()["lookups"] == 1
    assert cache.figures()["hits"] == 0


def test_remember_replaces_the_last_turn() -> None:
    cache = ReuseCache()
    cache.remember("s", _turn(3))
    cache.remember("s", [("p", _frame(7))])
    assert [h.frame.id for h in cache.held("s")] == ["f7"]
    assert cache.total_frames == 1


def test_duplicate_frame_ids_are_held_once() -> None:
    cache = ReuseCache()
    assert cache.remember("s", [("p", _frame(1)), ("p", _frame(1)), ("q", _frame(1))]) == 2


def test_per_session_bound_truncates() -> None:
    cache = ReuseCache(max_frames_per_session=2, max_frames_total=10)
    assert cache.remember("s", _turn(5)) == 2
    assert cache.figures()["truncated"] == 3


def test_total_bound_evicts_least_recently_used_session() -> None:
    cache = ReuseCache(max_frames_per_session=3, max_frames_total=6)
    cache.remember("a", _turn(3))
    cache.remember("b", _turn(3))
    cache.held("a")  # a is now the most recently used
    cache.remember("c", _turn(3))
    assert "b" not in cache and cache.held("b") == []
    assert len(cache) == 2 and "a" in cache and "c" in cache
    figures = cache.figures()
    assert figures["evicted_lru_sessions"] == 1
    assert figures["evicted_lru_frames"] == 3
    assert figures["frames"] == 6


def test_evict_drops_named_frames_and_counts_the_reason() -> None:
    cache = ReuseCache()
    cache.remember("s", _turn(3))
    fid = FrameId.of("p", _frame(1))
    assert cache.evict("s", [fid], "stale") == 1
    assert cache.evict("s", [fid], "stale") == 0
    assert cache.evict("other", [fid], "stale") == 0
    assert [h.frame.id for h in cache.held("s")] == ["f0", "f2"]
    assert cache.figures()["evicted"] == {"stale": 1}
    assert cache.total_frames == 2


def test_forget_drops_a_session() -> None:
    cache = ReuseCache()
    cache.remember("s", _turn(2))
    assert cache.forget("s") == 2
    assert cache.forget("s") == 0
    assert len(cache) == 0 and cache.total_frames == 0


def test_negative_bounds_are_refused() -> None:
    with pytest.raises(ValueError):
        ReuseCache(max_frames_per_session=-1)


def test_repr_names_sizes() -> None:
    cache = ReuseCache(max_frames_total=9)
    cache.remember("s", _turn(2))
    assert repr(cache) == "<ReuseCache sessions=1 frames=2/9>"


@settings(max_examples=200, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.sampled_from(["remember", "held", "evict", "forget"]),
            st.sampled_from(["a", "b", "c", "d"]),
            st.integers(0, 6),
        ),
        max_size=40,
    ),
    st.integers(0, 5),
    st.integers(0, 12),
)
def test_bounds_always_hold(ops: list[tuple[str, str, int]], per: int, total: int) -> None:
    cache = ReuseCache(max_frames_per_session=per, max_frames_total=total)
    for op, session, n in ops:
        if op == "remember":
            assert cache.remember(session, _turn(n)) <= per
        elif op == "held":
            cache.held(session)
        elif op == "evict":
            cache.evict(session, [FrameId.of("p", _frame(n))], "stale")
        else:
            cache.forget(session)
        assert cache.figures()["frames"] == cache.total_frames <= total
    # Read back through what the verify stage reads, once at the end: ``held`` marks a
    # session used, so reading it after every step would change the LRU order under test.
    held = [cache.held(s) for s in "abcd"]
    assert all(len(frames) <= per for frames in held)
    assert sum(len(frames) for frames in held) == cache.total_frames <= total
