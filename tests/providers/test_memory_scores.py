"""providers.memory's scores: BM25 with Lucene's IDF over FTS5's matching, checked
against a plain reference on words FTS5 keeps whole (one token each, no two stemmed alike).
"""

from __future__ import annotations

import math
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from hostd.protocol import ContextQuery
from providers import saturate
from providers.memory import FTS_HALF_SCORE, MemoryStore, NewEntry

T0 = "2026-01-01T00:00:00Z"
T1 = "2026-02-01T00:00:00Z"
T2 = "2026-03-01T00:00:00Z"
WORDS = ("kiwi", "mango", "plum", "fig", "lime", "pear", "grape", "melon")
K1, B = 1.2, 0.75


def reference_bm25(docs: dict[int, list[str]], query: list[str]) -> dict[int, float]:
    """Okapi BM25, k1 1.2, b 0.75, IDF ``ln(1 + (N - n + 0.5) / (n + 0.5))``, each
    distinct query word once: the textbook sum over already-tokenized documents."""
    total = len(docs)
    avgdl = sum(map(len, docs.values())) / total
    scores: dict[int, float] = {}
    for word in dict.fromkeys(query):
        n = sum(word in doc for doc in docs.values())
        idf = math.log(1 + (total - n + 0.5) / (n + 0.5))
        for doc_id, doc in docs.items():
            if f := doc.count(word):
                norm = K1 * (1 - B + B * len(doc) / avgdl)
                scores[doc_id] = scores.get(doc_id, 0.0) + idf * f * (K1 + 1) / (f + norm)
    return scores


@pytest.fixture
def store(tmp_path: Path) -> Iterator[MemoryStore]:
    with MemoryStore(tmp_path / "memory.db") as s:
        yield s


def test_a_first_memory_scores_as_a_match_not_as_nothing(store: MemoryStore) -> None:
    # FTS5's own IDF is <= 0 for a word in half the entries or more, floored at 1e-6:
    # a store of one entry answered its every match with score 0.000001.
    e = store.add("fact", "deploy", "deploy ship make")
    (frame,) = store.answer(
        ContextQuery(goal="how do we deploy", max_frames=4, max_tokens=1000)
    ).frames
    expected = reference_bm25({e.id: ["deploy", "deploy", "ship", "make"]}, ["deploy"])[e.id]
    assert frame.id == e.frame_id
    assert frame.score == round(saturate(expected, FTS_HALF_SCORE), 6) > 0.01


def test_entries_matching_more_rare_words_rank_first(store: MemoryStore) -> None:
    both, one, *common = store.add_many(
        [
            NewEntry("fact", "burrow", "cache wombat"),
            NewEntry("fact", "den", "cache wombat"),
            *(NewEntry("fact", "note", "cache") for _ in range(4)),
        ]
    )
    hits = store.search("wombat burrow cache")
    assert [e.id for e, _ in hits] == [both.id, one.id, *(e.id for e in common)]
    # Every match scores: "cache", in every entry, still counts for something.
    assert all(raw > 0 for _, raw in hits)


@settings(max_examples=60)
@given(
    entries=st.lists(
        st.tuples(
            st.lists(st.sampled_from(WORDS), min_size=1, max_size=3),
            st.lists(st.sampled_from(WORDS), min_size=1, max_size=8),  # content is never empty
            st.booleans(),
        ),
        min_size=1,
        max_size=8,
    ),
    query=st.lists(st.sampled_from(WORDS), min_size=1, max_size=4),
)
def test_scores_are_the_reference_bm25_over_the_whole_store(
    entries: list[tuple[list[str], list[str], bool]], query: list[str]
) -> None:
    with tempfile.TemporaryDirectory() as tmp, MemoryStore(Path(tmp) / "m.db") as store:
        added = store.add_many(
            NewEntry("fact", " ".join(title), " ".join(content), T0, T1 if closed else None)
            for title, content, closed in entries
        )
        hits = store.search(" ".join(query), as_of=T2)
    # N, n and the average length count every entry, as FTS5's index does; only the
    # entries still valid at as_of are answered (Q2).
    docs = {e.id: title + content for e, (title, content, _) in zip(added, entries, strict=True)}
    still_valid = {e.id for e in added if e.valid_to is None}
    expected = {i: s for i, s in reference_bm25(docs, query).items() if i in still_valid}
    assert {e.id for e, _ in hits} == set(expected)
    for e, raw in hits:
        assert raw == pytest.approx(expected[e.id], rel=1e-9)
    assert hits == sorted(hits, key=lambda hit: (-hit[1], hit[0].id))


def test_a_query_of_more_words_than_one_statement_sums_holds_scores_alike(
    store: MemoryStore,
) -> None:
    # SQLite sums at most a few hundred phrases in one statement; a longer goal (a
    # pasted paragraph) is summed over several, with the same scores and order.
    filler = [f"w{i}x" for i in range(450)]
    docs = {
        store.add("fact", "t", " ".join(words)).id: ["t", *words]
        for words in (["kiwi", "plum"], ["kiwi", "w449x"], ["w3x", "w3x", "fig"], ["fig"])
    }
    expected = reference_bm25(docs, [*filler, "kiwi", "fig"])
    hits = store.search(" ".join([*filler, "kiwi", "fig"]))
    assert [e.id for e, _ in hits] == sorted(expected, key=lambda i: (-expected[i], i))
    assert {e.id: raw for e, raw in hits} == pytest.approx(expected)
