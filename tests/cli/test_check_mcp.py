"""The mcp check's query row, decided in plain functions: the frames in the order a
composition considers them, and what counts as an answer that holds nothing."""

from __future__ import annotations

import pytest

from hostd.cli._check_mcp import _empty_answer, _ranked
from hostd.protocol import ContextFrame


def _frame(fid: str, score: float, cost: int) -> ContextFrame:
    return ContextFrame(id=fid, kind="doc", title=fid, score=score, token_cost=cost)


def test_frames_are_listed_by_score_then_id_each_with_its_size() -> None:
    frames = [_frame("b", 0.5, 7), _frame("c", 0.9, 30), _frame("a", 0.5, 12)]
    assert _ranked(frames) == (
        "c (30 tokens, score 0.90), a (12 tokens, score 0.50), b (7 tokens, score 0.50)"
    )


def test_frames_past_the_first_five_are_counted() -> None:
    frames = [_frame(f"f{i}", i / 10, 5) for i in range(8)]
    listed = _ranked(frames)
    assert listed.startswith("f7 (5 tokens, score 0.70), f6 ")
    assert listed.endswith("f3 (5 tokens, score 0.30), …and 3 more")


@pytest.mark.parametrize(
    ("content", "empty"),
    [
        ('{\n  "entities": [],\n  "relations": []\n}', True),
        ("[]", True),
        ("null", True),
        ('{"results": [{}], "next": null}', True),
        ('{"results": [], "total": 0}', False),  # a zero may be the answer
        ('{"name": ""}', False),
        ('{"entities": [{"name": "CacheService"}]}', False),
        ("No matches found", False),  # text is not judged: too easily a real answer
        ("", False),
        (None, False),
    ],
)
def test_only_json_holding_nothing_is_an_empty_answer(content: str | None, empty: bool) -> None:
    assert _empty_answer(content) is empty
