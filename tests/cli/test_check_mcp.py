"""The mcp check's query row, decided in plain functions: the frames in the order a
composition considers them."""

from __future__ import annotations

from hostd.cli._check_mcp import _ranked
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
