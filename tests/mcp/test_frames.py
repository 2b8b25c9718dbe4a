"""The binding's pure parts: cutting and labels, BM25 relevance, honest packing, argument
templates, the bounded cache."""

from __future__ import annotations

import json
import re

import pytest
from hypothesis import example, given
from hypothesis import strategies as st
from mcp_types import ContentBlock, TextContent

from hostd.chunking import MODEL_TRAINED_LENGTH, MODEL_WINDOW, estimate_pieces, tokenize
from hostd.mcp import Document, ReadCache, cut, frames_for, rank, render_arguments
from hostd.mcp._frames import Abandoned
from hostd.mcp._served import tool_calls, tool_documents
from hostd.protocol import (
    ContextQuery,
    address_line_range,
    canonical_token_cost,
    parse_frame,
    sha256_digest,
)

from .mcpserver_app import RUNBOOK  # the text the server serves, cut here in-process


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


def test_a_tool_asked_the_same_whatever_the_goal_gives_nothing_when_nothing_matches() -> None:
    fixed = Document(method="tools/call:git_show", text="commit d42b21d\n\n    notebooks")
    assert frames_for([fixed], _query(goal="zzqxj flurbo"), kind="episode", server="s").frames == []
    (frame,) = frames_for([fixed], _query(goal="notebooks"), kind="episode", server="s").frames
    assert frame["score"] > 0


def test_a_tool_answer_is_kept_unmatched_when_its_arguments_carry_the_goal_or_it_says_always() -> (
    None
):
    calls = tool_calls(
        {
            "tool": "search",
            "arguments": {"filter": {"text": ["{query}"]}},
            "tools": [
                {"name": "git_show", "arguments": {"revision": "HEAD"}},
                {"name": "now", "arguments": {"timezone": "UTC"}, "always": True},
                {"name": "ask", "arguments": {"q": "about {goal}"}},
            ],
        }
    )
    assert [(c.name, c.always) for c in calls] == [
        ("search", True),
        ("git_show", False),
        ("now", True),
        ("ask", True),
    ]
    blocks: list[ContentBlock] = [TextContent(type="text", text="12:00 UTC")]
    for call in calls:
        docs = tool_documents(call.name, blocks, always=call.always)
        result = frames_for(docs, _query(goal="zzqxj"), kind="snippet", server="s")
        assert len(result.frames) == int(call.always), call.name


def test_a_kind_the_query_excludes_yields_nothing() -> None:
    assert frames_for(DOCS, _query(kinds=["symbol"]), kind="doc", server="s").frames == []


@given(
    texts=st.lists(st.text(alphabet="cache evict é\n", min_size=1, max_size=80), max_size=12),
    max_tokens=st.integers(0, 60),
    max_frames=st.integers(0, 5),
)
@example(texts=["a", "cach"], max_tokens=1, max_frames=1)  # a stem, not the word, matches
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
    # One tool's answer: its pieces that name the cache when any does (as the files
    # provider's tokenizer finds terms), else one piece of it (its head).
    pieces = {p.key for d in docs for p in cut(d)}
    (cache,) = tokenize("cache")  # the term as the tokenizer stems it
    matched = {p.key for d in docs for p in cut(d) if cache in tokenize(p.text)}
    offered = {f["id"] for f in result.frames}
    if matched:
        whole = offered & matched  # a part has an id of its own
        assert result.truncated == (whole != matched)
    else:  # nothing to choose a part by: one piece whole (its head), or nothing
        assert offered <= pieces and len(offered) <= 1
        assert result.truncated == (offered != pieces)


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


GIT_LOG = "Commit history:\n" + "\n".join(
    f"Commit: {i:02x}{'ab' * 19}\nAuthor: Dev\nDate: 2025-01-0{i + 1}\n"
    f"Message: cache eviction step {i}, least recently used entries first\n"
    for i in range(6)
)
DIFF = (
    "diff --git a/src/cache.py b/src/cache.py\n--- a/src/cache.py\n+++ b/src/cache.py\n"
    "@@ -1 +1 @@\n-    cache.pop()\n+    cache.popitem(last=False)\n"
)


def test_tool_output_is_cut_into_pieces_labelled_by_what_they_name() -> None:
    log = cut(Document(method="tools/call:git_log", text=GIT_LOG, always=True))
    assert [p.label for p in log] == [f"commit {i:02x}ababa" for i in range(6)]
    assert all(p.text.count("Commit: ") == 1 for p in log)
    diff = cut(Document(method="tools/call:git_show", text=DIFF, always=True))
    assert [p.label for p in diff] == ["src/cache.py"]
    plain = cut(Document(method="tools/call:search", text="one\n\n" * 3 + "x " * 400))
    assert {p.label.split()[0] for p in plain} == {"search"}  # the tool: the last resort


def test_the_text_items_of_one_tool_result_are_numbered_in_its_order() -> None:
    items = ["Note A: the cache TTL is 120 s.", "Note B: billing.", "Note C: cache eviction."]
    content: list[ContentBlock] = [TextContent(text=t) for t in items]
    content.insert(1, TextContent(text="  "))  # blank: no item
    docs = tool_documents("notes", content)
    assert [p.label for d in docs for p in cut(d)] == ["notes (1/3)", "notes (2/3)", "notes (3/3)"]
    # Ranked, each keeps the label of its place, whatever its score (no "#2" by rank);
    # Note B matches nothing of the goal and is left out, as filler beside a match.
    result = rank(
        [cut(d) for d in docs], _query(query_text="cache eviction"), kind="doc", server="s"
    )
    by_label = {f["citation_label"]: f["content"] for f in result.frames}
    assert by_label == {"notes (1/3)": items[0], "notes (3/3)": items[2]}
    (one,) = tool_documents("notes", [TextContent(text=items[0])])
    assert [p.label for p in cut(one)] == ["notes"]  # one item: nothing to tell apart


def test_a_resource_piece_is_labelled_by_its_title_and_heading_or_range() -> None:
    text = "".join(f"## Part {i}\n\n" + f"The cache evicts entry {i}.\n" * 12 for i in range(4))
    md = cut(Document(method="resources/read", text=text, uri="memo://g.md", title="Guide"))
    assert [p.label for p in md] == [f"Guide § Part {i}" for i in range(4)]
    prose = "\n\n".join("The cache evicts cold entries. " * 12 for _ in range(3))
    plain = cut(Document(method="resources/read", text=prose, uri="memo://n", title="Notes"))
    assert [p.label for p in plain] == [f"Notes {p.range}" for p in plain] and len(plain) == 3
    one = cut(Document(method="resources/read", text="short note\n", uri="memo://s", title="S"))
    assert [p.label for p in one] == ["S"]


def test_pieces_pass_the_frame_rules_with_ranges_and_digests_of_their_bytes() -> None:
    doc = Document(method="tools/call:git_log", text=GIT_LOG, always=True)
    result = frames_for([doc], _query(max_tokens=10_000), kind="episode", server="srv")
    assert len(result.frames) == 6
    data = GIT_LOG.encode()
    for raw in result.frames:
        frame, violations = parse_frame(raw)
        assert frame is not None and violations == []
        (prov,) = raw["provenance"]
        addressed = address_line_range(data, prov["range"])
        assert raw["content_digest"] == sha256_digest(addressed)
        assert raw["token_cost"] == canonical_token_cost(addressed.decode())


@given(st.permutations(range(4)), st.integers(0, 400))
def test_the_same_pieces_in_any_order_give_the_same_bytes(order: list[int], budget: int) -> None:
    docs = [
        Document(method="tools/call:git_log", text=GIT_LOG, always=True),
        Document(method="tools/call:git_show", text=DIFF, always=True),
        *DOCS[:2],
    ]
    query = _query(max_tokens=budget)
    groups = [cut(d) for d in docs]
    a = rank(groups, query, kind="doc", server="s")
    b = rank([groups[i] for i in order], query, kind="doc", server="s")
    assert a.model_dump_json() == b.model_dump_json()


def test_a_cancelled_ranking_stops_between_sources() -> None:
    checked: list[int] = []

    def check() -> None:
        checked.append(1)
        if len(checked) > 1:
            raise Abandoned

    groups = [cut(d) for d in DOCS]
    with pytest.raises(Abandoned):
        rank(groups, _query(), kind="doc", server="s", check=check)
    assert len(checked) == 2  # the first source, then stopped at the second


def test_the_cache_evicts_the_least_recently_used_within_its_bounds() -> None:
    cache = ReadCache(lambda: 0.0, default_ttl_s=60, max_entries=3, max_bytes=100)
    for key in "abc":
        cache.put(key, key.upper(), size=20, ttl_ms=None)
    assert cache.get("a") == "A"  # a is now the most recently used
    cache.put("d", "D", size=20, ttl_ms=None)  # over 3 entries: b goes
    assert cache.get("b") is None and len(cache) == 3
    cache.put("e", "E", size=70, ttl_ms=None)  # over 100 bytes: c, then a, go
    assert [cache.get(k) for k in "acde"] == [None, None, "D", "E"]
    assert cache.bytes == 90 and cache.evicted == 3
    cache.put("huge", "H", size=101, ttl_ms=None)  # larger than the bound alone: not kept
    assert cache.get("huge") is None and cache.bytes == 90


@given(st.lists(st.tuples(st.sampled_from("abcdefgh"), st.integers(0, 60)), max_size=60))
def test_the_cache_never_exceeds_its_bounds(puts: list[tuple[str, int]]) -> None:
    cache = ReadCache(lambda: 0.0, default_ttl_s=60, max_entries=4, max_bytes=100)
    for key, size in puts:
        cache.put(key, size, size=size, ttl_ms=None)
        assert len(cache) <= 4 and cache.bytes <= 100
        assert cache.get(key) == size  # the newest always stays (it fits alone)


def test_a_lone_surrogate_is_served_as_valid_utf8_not_an_exception() -> None:
    doc = Document(method="tools/call:t", text="cache \ud800 eviction\n", always=True)
    (raw,) = frames_for([doc], _query(), kind="doc", server="s").frames
    assert raw["content"] == "cache ? eviction\n"
    assert raw["content_digest"] == sha256_digest(b"cache ? eviction\n")


PROSE = " ".join(
    f"Step {i}: the deploy rotates the signing key, waits for the cache to drain, and"
    " checks the error budget before it moves on."
    for i in range(40)
)


@pytest.mark.parametrize(
    ("text", "bound"),
    [
        (PROSE + "\n", MODEL_TRAINED_LENGTH),  # no records: a paragraph's bound
        (json.dumps({"items": [{"id": i, "owner": "team-cache"} for i in range(150)]}), None),
        (
            json.dumps([{"id": i, "tags": ["deploy"]} for i in range(150)], separators=(",", ":")),
            None,
        ),
        ("Result: " + PROSE + "\n\nResult: done\n", MODEL_WINDOW),  # a record's bound
    ],
    ids=["prose", "json", "compact-json", "record"],
)
def test_a_line_over_the_bound_is_quoted_in_parts_within_it(text: str, bound: int | None) -> None:
    pieces = cut(Document(method="tools/call:search", text=text, always=True))
    line = text.split("\n")[0] + ("\n" if "\n" in text else "")
    parts = [p for p in pieces if p.start == 1]
    assert len(parts) > 1 and {p.range for p in parts} == {"L1-1"}
    assert "".join(p.text for p in parts) == line  # every byte, in order
    for p in pieces:
        assert estimate_pieces([p.text])[0] <= (bound or MODEL_TRAINED_LENGTH)
        assert p.digest == sha256_digest(p.text.encode()) and p.cost == canonical_token_cost(p.text)
    labels = [p.label for p in parts]
    base = labels[0].rsplit(" (", 1)[0]
    assert labels == [f"{base} ({k}/{len(parts)})" for k in range(1, len(parts) + 1)]
    # The walkthrough's symptom: at a small share the answer gave nothing at all. (Every
    # text holds "cache" or "deploy": an answer nothing of which matches is offered
    # whole or not at all, and these are over 700 tokens.)
    small = frames_for(
        [Document(method="tools/call:search", text=text, always=True)],
        _query(goal="cache deploy", max_tokens=700),
        kind="doc",
        server="s",
    )
    assert small.frames and sum(f["token_cost"] for f in small.frames) <= 700


def test_a_files_long_line_stays_whole_as_its_range_addresses_it() -> None:
    doc = Document(method="resources/read", text=PROSE + "\n", uri="file:///r/notes.txt")
    assert [p.text for p in cut(doc)] == [PROSE + "\n"]  # F5: its digest is checked


@pytest.mark.parametrize("resource", ["memo://runbook.md", "memo://runbook"])
def test_the_same_text_from_a_tool_and_a_resource_is_the_same_pieces(resource: str) -> None:
    tool = cut(Document(method="tools/call:docs", text=RUNBOOK, always=True))
    read = cut(Document(method="resources/read", text=RUNBOOK, uri=resource, title="Runbook"))
    assert [(p.range, p.text) for p in tool] == [(p.range, p.text) for p in read]
    assert list(tool.digests) == list(read.digests)  # one digest each: dedup (D2) merges them
    assert all(not p.text.endswith("\n\n") for p in tool)  # no piece ends in blank lines
    assert [p.label for p in read][1:3] == [
        "Runbook § Deploy",
        "Runbook § Database migrations (1/2)",
    ]


_PART = re.compile(r"(.*) \((\d+)/(\d+)\)")


@given(st.permutations(range(3)), st.integers(60, 2000))
def test_pieces_sharing_a_label_are_numbered_in_text_order(order: list[int], budget: int) -> None:
    cuts = [
        cut(Document(method="resources/read", text=RUNBOOK, uri="file:///r/a.md", title="A")),
        cut(Document(method="resources/read", text=RUNBOOK, uri="memo://b.md", title="B")),
        cut(Document(method="tools/call:docs", text=PROSE, always=True)),
    ]
    for c in cuts:  # in a text, every label is its own
        assert len(set(c.labels)) == len(c.labels)
        parts: dict[str, list[tuple[int, int]]] = {}
        for label in c.labels:
            m = _PART.fullmatch(label)
            if m:
                parts.setdefault(m[1], []).append((int(m[2]), int(m[3])))
        for found in parts.values():  # (1/n) to (n/n), in text order
            assert found == [(k, len(found)) for k in range(1, len(found) + 1)]
    assert any(_PART.fullmatch(label) for label in cuts[0].labels)  # the file's long section
    query = _query(query_text="deploy migration rule key", max_tokens=budget, max_frames=50)
    result = rank([cuts[i] for i in order], query, kind="doc", server="s")
    assert result.model_dump_json() == rank(cuts, query, kind="doc", server="s").model_dump_json()
