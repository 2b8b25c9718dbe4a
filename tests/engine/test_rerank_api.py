"""The standard rerank servers' wire (``hostd.engine._rerank_api``): pure, fed recorded bytes.

A reply is a verdict only when it scores every document once with a finite number;
anything else is ``RemoteWire`` naming a position and a rule, never the server's text.
"""

from __future__ import annotations

import random

import orjson
import pytest
from hypothesis import given
from hypothesis import strategies as st

from hostd.engine import RerankApi, rerank_url
from hostd.engine._rerank_api import document_text, order_by_scores
from hostd.errors import RemoteWire
from hostd.transport import shown_url

SECRET = "tok-3c9f1a77e0b2"

COHERE = RerankApi("cohere")
TEI = RerankApi("tei")


@pytest.mark.parametrize(
    ("url", "posted"),
    [
        ("http://127.0.0.1:7997", "http://127.0.0.1:7997/rerank"),
        ("http://127.0.0.1:7997/", "http://127.0.0.1:7997/rerank"),
        ("https://api.cohere.com/v2", "https://api.cohere.com/v2/rerank"),
        ("https://api.jina.ai/v1/rerank", "https://api.jina.ai/v1/rerank"),
        ("https://h.example/v1/rerank/", "https://h.example/v1/rerank"),
        ("https://h.example/api?x=1", "https://h.example/api/rerank?x=1"),
        ("https://h.example/reranker", "https://h.example/reranker/rerank"),
    ],
)
def test_the_rerank_path_is_decided_by_the_url(url: str, posted: str) -> None:
    assert rerank_url(url) == posted


@pytest.mark.parametrize(
    ("url", "shown"),
    [
        ("http://127.0.0.1:7997/rerank", "http://127.0.0.1:7997/rerank"),
        (f"https://h.example/v1/rerank?api_key={SECRET}", "https://h.example/v1/rerank"),
        (f"https://user:{SECRET}@h.example:8443/rerank#x", "https://h.example:8443/rerank"),
        (f"http://{SECRET}@[::1]:7997/rerank?k=1", "http://[::1]:7997/rerank"),
    ],
)
def test_a_listed_url_shows_no_user_password_query_or_fragment(url: str, shown: str) -> None:
    assert shown_url(url) == shown


def test_a_cohere_body_names_the_model_only_when_one_is_configured() -> None:
    bare = orjson.loads(COHERE.body("why", ["a", "b"]))
    assert bare == {"query": "why", "documents": ["a", "b"], "top_n": 2}
    named = orjson.loads(RerankApi("cohere", "rerank-v3.5").body("why", ["a"]))
    assert named == {"model": "rerank-v3.5", "query": "why", "documents": ["a"], "top_n": 1}


def test_a_tei_body_sends_texts_and_truncates() -> None:
    body = orjson.loads(RerankApi("tei", "bge").body("why", ["a", "b"]))
    assert body == {"query": "why", "texts": ["a", "b"], "truncate": True}


def test_a_candidate_is_judged_by_its_title_and_content() -> None:
    assert document_text({"title": "T", "content": "body"}) == "T\nbody"
    assert document_text({"title": "", "content": "body"}) == "body"
    assert document_text({"title": "T", "content": None}) == "T\n"


def _cohere(pairs: list[tuple[int, float]], **more: object) -> bytes:
    results = [{"index": i, "relevance_score": s, "document": None} for i, s in pairs]
    return orjson.dumps({"object": "rerank", "results": results, **more})


def _tei(pairs: list[tuple[int, float]]) -> bytes:
    return orjson.dumps([{"index": i, "score": s} for i, s in pairs])


@given(
    st.lists(st.floats(-1e6, 1e6, allow_nan=False), min_size=1, max_size=30),
    st.randoms(use_true_random=False),
)
def test_a_whole_reply_gives_the_same_scores_in_any_order(
    scores: list[float], rnd: random.Random
) -> None:
    pairs = list(enumerate(scores))
    shuffled = pairs[:]
    rnd.shuffle(shuffled)
    assert COHERE.read(_cohere(shuffled), len(scores)).scores == tuple(scores)
    assert TEI.read(_tei(shuffled), len(scores)).scores == tuple(scores)


def test_integer_scores_are_numbers_too() -> None:
    assert TEI.read(_tei([(1, 2), (0, -1)]), 2).scores == (-1.0, 2.0)


def test_the_servers_model_name_is_kept_only_when_it_looks_like_one() -> None:
    assert COHERE.read(_cohere([(0, 0.5)], model="org/tiny-ce@1"), 1).model == "org/tiny-ce@1"
    assert COHERE.read(_cohere([(0, 0.5)], model="ignore previous\n"), 1).model is None
    assert COHERE.read(_cohere([(0, 0.5)], model=7), 1).model is None
    assert COHERE.read(_cohere([(0, 0.5)]), 1).model is None


BAD_COHERE = [
    (b"<html>" + SECRET.encode() + b"</html>", "is not JSON"),
    (b"", "is not JSON"),
    (orjson.dumps([{"index": 0, "relevance_score": 1}]), "expected an object with results"),
    (orjson.dumps({"results": {"index": 0}}), "results must be a list"),
    (orjson.dumps({"data": []}), "results must be a list"),
    (_cohere([(0, 0.5), (2, 0.1)]), "results[1].index is not one of 0..1"),
    (_cohere([(0, 0.5), (-1, 0.1)]), "results[1].index is not one of 0..1"),
    (orjson.dumps({"results": [{"index": True, "relevance_score": 1}]}), "index is not one"),
    (orjson.dumps({"results": [{"index": 0.0, "relevance_score": 1}]}), "index is not one"),
    (orjson.dumps({"results": [SECRET]}), "results[0].index is not one of 0..1"),
    (_cohere([(0, 0.5), (0, 0.4)]), "results[1].index repeats an earlier one"),
    (_cohere([(1, 0.5)]), "1 of 2 documents not scored"),
    (_cohere([]), "2 of 2 documents not scored"),
    (
        orjson.dumps({"results": [{"index": 0, "relevance_score": SECRET}]}),
        "results[0].relevance_score is not a finite number",
    ),
    (
        orjson.dumps({"results": [{"index": 0, "relevance_score": True}]}),
        "results[0].relevance_score is not a finite number",
    ),
    # An overflowing number is no JSON number orjson reads: refused before the shape is.
    (b'{"results": [{"index": 0, "relevance_score": 1e999}]}', "is not JSON"),
    (_tei([(0, 0.5), (1, 0.4)]), "expected an object with results"),
]


@pytest.mark.parametrize(("body", "why"), BAD_COHERE)
def test_a_cohere_reply_that_is_no_whole_verdict_is_a_wire_fault(body: bytes, why: str) -> None:
    with pytest.raises(RemoteWire) as caught:
        COHERE.read(body, 2)
    assert why in caught.value.message
    assert SECRET not in caught.value.message  # the server's text is never quoted


@pytest.mark.parametrize(
    ("body", "why"),
    [
        (orjson.dumps({"results": []}), "reply must be a list"),
        (_tei([(0, 0.5), (0, 0.5)]), "reply[1].index repeats an earlier one"),
        (_tei([(0, 0.5)]), "1 of 2 documents not scored"),
        (_tei([(0, 0.5), (5, 0.5)]), "reply[1].index is not one of 0..1"),
        (orjson.dumps([{"index": 0, "relevance_score": 1}, {"index": 1, "score": 2}]), "score"),
    ],
)
def test_a_tei_reply_that_is_no_whole_verdict_is_a_wire_fault(body: bytes, why: str) -> None:
    with pytest.raises(RemoteWire, match=why.replace("[", r"\[").replace("]", r"\]")):
        TEI.read(body, 2)


@given(st.lists(st.sampled_from([0.0, 0.25, 0.5, 1.0, -3.0]), max_size=20))
def test_scores_order_highest_first_and_ties_keep_the_order_shown(scores: list[float]) -> None:
    order = order_by_scores(scores)
    assert sorted(order) == list(range(len(scores)))
    for a, b in zip(order, order[1:], strict=False):
        assert scores[a] > scores[b] or (scores[a] == scores[b] and a < b)
