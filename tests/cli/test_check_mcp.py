"""The mcp check's query row, decided in plain functions: the frames in the order a
composition considers them, by their titles, and where the goal reaches the server."""

from __future__ import annotations

from typing import Any

from hostd.cli._check_mcp import _ranked, goal_where
from hostd.config import McpSettings
from hostd.protocol import ContextFrame


def _frame(fid: str, score: float, cost: int) -> ContextFrame:
    return ContextFrame(id=fid, kind="doc", title=fid, score=score, token_cost=cost)


def test_frames_are_listed_by_score_then_id_each_with_its_size() -> None:
    frames = [_frame("b", 0.5, 7), _frame("c", 0.9, 30), _frame("a", 0.5, 12)]
    assert _ranked(frames) == (
        "'c' (30 tokens, score 0.90), 'a' (12 tokens, score 0.50), 'b' (7 tokens, score 0.50)"
    )


def test_frames_past_the_first_five_are_counted() -> None:
    frames = [_frame(f"f{i}", i / 10, 5) for i in range(8)]
    listed = _ranked(frames)
    assert listed.startswith("'f7' (5 tokens, score 0.70), 'f6' ")
    assert listed.endswith("'f3' (5 tokens, score 0.30), …and 3 more")


def test_titles_are_cut_at_40_characters_and_quoted_as_the_other_bindings_show_them() -> None:
    title = "\x1b[2Jdesign § " + "a" * 60  # a peer's text: its escapes shown, not obeyed
    frame = ContextFrame(id="x", kind="doc", title=title, score=0.5, token_cost=7)
    assert _ranked([frame]) == "'\\x1b[2Jdesign § " + "a" * 26 + "…' (7 tokens, score 0.50)"


def _where(**options: Any) -> str:
    return goal_where(McpSettings.model_validate(options).model_dump())


def test_the_goal_is_said_to_reach_a_tool_in_the_arguments_that_hold_it() -> None:
    tools = [
        {"name": "search", "arguments": {"q": "{query}", "limit": 5}},
        {"name": "fetch", "arguments": {"urls": ["http://localhost/{goal}"]}},
        {"name": "now"},
    ]
    assert _where(tools=tools).endswith(
        'in a string value of a tool\'s arguments (docs/mcp.md, "Keys: [provider.mcp]"): '
        "here search.q, fetch.urls[0], yet the answer was the same whatever they held"
    )


def test_tools_whose_arguments_hold_no_goal_are_said_to_be_asked_the_same() -> None:
    said = _where(tools=[{"name": "log", "arguments": {"max_count": 20}}])
    assert said.endswith(
        ", and none of its tools' arguments holds one: each tool is asked the same whatever "
        "the goal (put {query} in the argument a tool searches by)"
    )
