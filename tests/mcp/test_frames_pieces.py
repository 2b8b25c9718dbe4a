"""Which pieces of what a server served are offered: the ones that match the goal by
the files provider's terms, never an empty answer, the best one cut to fit the ask.

The texts are small recordings of what the walkthrough's servers answered: a design
document with one section about cache eviction, a knowledge graph's and a file
search's empty answers, a ticket lookup's one record."""

from __future__ import annotations

import itertools
import json
from collections import Counter

from hypothesis import given
from hypothesis import strategies as st
from mcp_types import TextContent

from hostd.chunking import split_lines, tokenize
from hostd.mcp import Document, cut, frames_for
from hostd.mcp._frames import _Bm25
from hostd.mcp._served import tool_documents
from hostd.protocol import ContextQuery, canonical_token_cost, sha256_digest
from tests.mcp._design import EVICTION, FILLER

GOAL = "how does cache eviction work?"

DESIGN = f"# Platform design notes\n\n## 1. Billing notes\n\n{FILLER}\n{EVICTION}"


def _query(goal: str = GOAL, **over: object) -> ContextQuery:
    return ContextQuery.model_validate({"goal": goal, "max_frames": 10, "max_tokens": 1000, **over})


def _tool(text: str, name: str = "search") -> Document:
    return Document(method=f"tools/call:{name}", text=text, always=True)


def test_a_piece_that_holds_only_the_goals_function_words_matches_nothing() -> None:
    docs = [
        Document(
            method="resources/read",
            text="How does the server start? It does what the config says it does.",
            uri="demo://how-it-starts",
        ),
        Document(method="resources/read", text="The cache evicts on pressure.", uri="memo://b"),
    ]
    result = frames_for(docs, _query(), kind="doc", server="s")
    assert [f["uri"] for f in result.frames] == ["memo://b"]


def test_the_goals_terms_are_the_files_providers_so_an_inflected_word_matches() -> None:
    doc = Document(method="resources/read", text="Entries are evicted hourly.", uri="memo://a")
    (frame,) = frames_for([doc], _query("evicting"), kind="doc", server="s").frames
    assert frame["score"] > 0


@given(
    st.lists(
        st.sampled_from(["evict", "evicted", "evicting", "evicts", "the", "x_evict", "2", "ok"]),
        max_size=12,
    )
)
def test_a_text_holds_a_term_as_often_as_the_files_tokenizer_finds_it(words: list[str]) -> None:
    text = " ".join(words)
    bm25 = _Bm25("evicts the 2")
    found = Counter(tokenize(text))
    assert bm25.counts(text) == [found[t] for t in bm25.terms]


@given(
    st.lists(
        st.sampled_from(
            [
                "getUserName",
                "userName",
                "user_nameId",
                "HTTPServer",
                "getUsers",
                "user2Name",
                "name",
                "server",
                "x",
            ]
        ),  # fmt: skip
        max_size=12,
    )
)
def test_a_camel_case_identifier_s_parts_count_as_the_files_tokenizer_counts_them(
    words: list[str],
) -> None:
    text = " ".join(words)
    bm25 = _Bm25("user name server")
    found = Counter(tokenize(text))
    assert bm25.counts(text) == [found[t] for t in bm25.terms]


def test_a_snake_case_goal_counts_whole_and_by_its_parts_as_the_files_tokenizer_does() -> None:
    bm25 = _Bm25("prefetch_related")
    assert bm25.terms == sorted(set(tokenize("prefetch_related")))  # whole, prefetch, related
    for text in (
        "qs.prefetch_related('books')",  # whole and both parts
        "get_prefetch_related_objects",  # the parts only: the whole word is another
        "prefetch related",  # the parts only
        "utf8 prefetch2_related",
    ):
        found = Counter(tokenize(text))
        assert bm25.counts(text) == [found[t] for t in bm25.terms], text


# Fragments that join into words, identifiers and numbers (a digit run is one term,
# "18" holds no "8"); with and without separators between them.
_FRAGMENTS = ["prefetch", "related", "Related", "user", "Name", "HTTP", "utf", "8", "18", "x"]


@given(
    st.lists(st.sampled_from(_FRAGMENTS), min_size=1, max_size=4),
    st.lists(st.tuples(st.sampled_from(_FRAGMENTS), st.sampled_from(["", "_", " ", "(", "."]))),
)
def test_any_goal_counts_in_any_text_as_the_files_tokenizer_counts_it(
    goal: list[str], text: list[tuple[str, str]]
) -> None:
    bm25 = _Bm25("_".join(goal))
    served = "".join(f + sep for f, sep in text)
    found = Counter(tokenize(served))
    assert bm25.counts(served) == [found[t] for t in bm25.terms]


def test_a_camel_case_name_matches_a_goal_in_words() -> None:
    doc = Document(method="resources/read", text="def getUserName(): ...", uri="memo://a")
    (frame,) = frames_for([doc], _query("user name"), kind="doc", server="s").frames
    assert frame["score"] > 0


def test_an_empty_answer_is_not_offered() -> None:
    docs = [
        _tool('{\n  "entities": [],\n  "relations": []\n}', "search_nodes"),
        _tool("No matches found for 'cache eviction'", "search_files"),
        _tool("[]", "list"),
        _tool('{"total": 0, "results": [], "more": false, "next": null}', "search_tickets"),
        _tool('{"matches": {"count": 0.0, "items": [{"score": 0}]}}', "lookup"),
    ]
    assert all(len(cut(d)) == 0 for d in docs)
    assert frames_for(docs, _query(), kind="doc", server="s").frames == []


def test_an_answer_with_a_value_in_it_is_offered() -> None:
    for text in ('{"hour": 5}', '{"total": 1, "results": []}', '{"open": true}', '["x"]'):
        (piece,) = cut(_tool(text, "now"))
        assert piece.text == text


def test_an_answer_that_matches_is_offered_without_its_filler() -> None:
    result = frames_for([_tool(DESIGN, "get_design_notes")], _query(), kind="doc", server="s")
    assert [f["title"] for f in result.frames] == ["get_design_notes § Storage: cache eviction"]
    assert not result.truncated  # the filler is no evidence left out


def test_an_answer_nothing_of_which_matches_is_offered_as_its_head_or_not_at_all() -> None:
    """One frame, score 0: every piece of it a frame would take a rank each where each
    provider's list is ranked apart (``rrf``), ahead of others' matched evidence."""
    tickets = [{"id": f"T-{i}", "title": f"Purge of hot keys on node {i}"} for i in range(6)]
    answer = _tool(json.dumps({"tickets": tickets}, indent=2), "ticket_lookup")
    pieces = list(cut(answer))
    total = sum(p.cost for p in pieces)
    assert len(pieces) > 1
    ample = frames_for([answer], _query(max_tokens=total), kind="doc", server="s")
    assert [(f["id"], f["score"]) for f in ample.frames] == [(pieces[0].key, 0.0)]
    # The rest was left out by that bound, not by the goal: said, and counted.
    assert ample.truncated and ample.dropped_estimate == len(pieces) - 1
    less = frames_for([answer], _query(max_tokens=pieces[0].cost - 1), kind="doc", server="s")
    assert less.frames == [] and less.truncated and less.dropped_estimate == len(pieces)


def test_the_head_of_an_unmatched_answer_of_several_items_is_its_first_item() -> None:
    items = [
        "Billing runs nightly from the usage ledger.",
        "Deploys happen on Tuesdays after the freeze.",
        "Licences are renewed every March.",
    ]
    for served in itertools.permutations(items):
        docs = tool_documents("notes", [TextContent(text=t) for t in served])
        result = frames_for(docs, _query(), kind="doc", server="s")
        assert [(f["citation_label"], f["content"]) for f in result.frames] == [
            ("notes (1/3)", served[0])
        ]


def test_the_best_piece_over_the_ask_is_offered_as_its_best_part_that_fits() -> None:
    section = next(p for p in cut(_tool(DESIGN, "get_design_notes")) if "eviction" in p.text)
    ask = section.cost * 2 // 3
    result = frames_for(
        [_tool(DESIGN, "get_design_notes")], _query(max_tokens=ask), kind="doc", server="s"
    )
    (frame,) = result.frames
    assert frame["title"] == "get_design_notes § Storage: cache eviction (part)"
    part = frame["content"]
    assert frame["token_cost"] == canonical_token_cost(part) <= ask
    assert frame["content_digest"] == sha256_digest(part.encode())
    # A run of the section's whole sentences, the one that names eviction most often.
    at = section.text.index(part)
    assert at == 0 or section.text[:at].endswith((". ", "\n"))
    assert part.endswith((". ", ".\n")) and part.count("eviction") >= 3
    assert result.truncated


def test_a_files_part_is_whole_lines_its_range_addresses() -> None:
    lines = [f"Line {i} says nothing much about anything at all here.\n" for i in range(30)]
    lines[12] = "The cache eviction watermark is 85 percent.\n"
    text = "".join(lines)
    doc = Document(method="resources/read", text=text, uri="file:///project/notes.txt")
    (piece,) = [p for p in cut(doc) if "eviction" in p.text]
    result = frames_for([doc], _query(max_tokens=piece.cost // 2), kind="doc", server="s")
    (frame,) = result.frames
    (mcp, file) = frame["provenance"]
    start, end = (int(n) for n in file["range"][1:].split("-"))
    served = b"".join(split_lines(text.encode())[start - 1 : end]).decode()
    assert frame["content"] == served and file["digest"] == sha256_digest(served.encode())
    assert "eviction" in served
