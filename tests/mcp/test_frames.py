"""The adapter's pure parts: BM25 relevance, honest packing, argument templates, the cache."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from hostd.mcp import Document, ReadCache, cut, frames_for, render_arguments
from hostd.protocol import ContextQuery, canonical_token_cost, parse_frame


def _query(**over: object) -> ContextQuery:
    fields: dict[str, object] = {"goal": "cache eviction", "max_frames": 10, "max_tokens": 1000}
    fields.update(over)
    return ContextQuery.model_validate(fields)


DOCS = [
    Document(method="resources/read", text="The cache evicts old entries.", uri="memo://a"),
    Document(method="resources/read", text="Eviction of the cache, cache, cache.", uri="memo://b"),
    Document(method="resources/read", text="Nothing relevant here.", uri="memo://c"),
]


def test_relevant_documents_rank_first_and_unmatched_resources_are_left_out() -> None:
    result = frames_for(DOCS, _query(), kind="doc", server="srv")
    uris = [f["uri"] for f in result.frames]
    assert set(uris) == {"memo://a", "memo://b"}
    scores = [f["score"] for f in result.frames]
    assert scores == sorted(scores, reverse=True) and all(0 < s < 1 for s in scores)


def test_the_same_documents_in_any_order_give_the_same_bytes() -> None:
    a = frames_for(DOCS, _query(), kind="doc", server="srv")
    b = frames_for(list(reversed(DOCS)), _query(), kind="doc", server="srv")
    assert a.model_dump_json() == b.model_dump_json()


def test_frames_pass_the_frame_rules() -> None:
    result = frames_for(DOCS, _query(), kind="doc", server="srv")
    for raw in result.frames:
        frame, violations = parse_frame(raw)
        assert frame is not None and violations == []


def test_tool_results_are_kept_without_a_matching_term() -> None:
    tool = Document(method="tools/call:search", text="zzz", always=True)
    result = frames_for([tool], _query(), kind="snippet", server="srv")
    assert [f["content"] for f in result.frames] == ["zzz"]
    assert result.frames[0]["score"] == 0.0


def test_a_kind_the_query_excludes_yields_nothing() -> None:
    assert frames_for(DOCS, _query(kinds=["symbol"]), kind="doc", server="s").frames == []


@given(
    texts=st.lists(st.text(alphabet="cache evict é\n", min_size=1, max_size=80), max_size=12),
    max_tokens=st.integers(0, 60),
    max_frames=st.integers(0, 5),
)
def test_packing_never_exceeds_the_budget_or_the_frame_count(
    texts: list[str], max_tokens: int, max_frames: int
) -> None:
    docs = [Document(method="tools/call:t", text=t, always=True) for t in texts]
    result = frames_for(
        docs, _query(max_tokens=max_tokens, max_frames=max_frames), kind="doc", server="s"
    )
    assert len(result.frames) <= max_frames
    assert sum(f["token_cost"] for f in result.frames) <= max_tokens
    assert all(f["token_cost"] == canonical_token_cost(f["content"]) for f in result.frames)
    kept = len({p.key for d in docs for p in cut(d)})
    assert result.truncated == (len(result.frames) < kept)


def test_argument_templates_fill_query_and_goal_in_strings_only() -> None:
    template = {"q": "{query}", "n": 5, "nested": ["about {goal}", {"x": "{query}!"}]}
    assert render_arguments(template, query="evict", goal="cache") == {
        "q": "evict",
        "n": 5,
        "nested": ["about cache", {"x": "evict!"}],
    }


def test_a_cached_read_lives_for_its_ttl_or_while_last_modified_is_unchanged() -> None:
    now = [0.0]
    cache = ReadCache(lambda: now[0], default_ttl_s=10)
    cache.put("a", "A", size=1, ttl_ms=None, last_modified="t1")
    cache.put("b", "B", size=1, ttl_ms=2000)
    now[0] = 5.0
    assert cache.get("a") == "A" and cache.get("b") is None  # b's own ttlMs was 2 s
    now[0] = 11.0
    assert cache.get("a", "t1") == "A"  # expired, but the server says it has not changed
    assert cache.get("a", "t2") is None  # changed: read again
    assert cache.get("a", "t1") is None  # and forgotten
