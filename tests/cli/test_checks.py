"""check-provider's goal probe, decided in a plain function (``same_answer``): the same
frames for an unrelated goal are a warning, unless neither answer was cut."""

from __future__ import annotations

from hostd.chunking import STOPWORDS, tokenize
from hostd.cli._checks import COMMON_GOAL, OTHER_GOAL, common_words_matched, same_answer
from hostd.engine import LegAudit
from hostd.protocol import ContextFrame, ContextQuery

WHERE = "the goal is params.query.goal"
QUERY = ContextQuery(goal="cache eviction", max_frames=8, max_tokens=400)


def _frame(fid: str, score: float = 0.5, cost: int = 10) -> ContextFrame:
    return ContextFrame(
        id=fid, kind="doc", title=fid, content=f"text of {fid}", score=score, token_cost=cost
    )


def _audit(*frames: ContextFrame) -> LegAudit:
    cost = sum(f.token_cost for f in frames)
    return LegAudit(len(frames), frames, (), (), (), accepted_cost=cost)


def test_different_answers_add_nothing() -> None:
    first, again = _audit(_frame("a"), _frame("b")), _audit(_frame("a"))
    assert same_answer(QUERY, first, again, truncated=False, where=WHERE) is None


def test_the_same_answer_at_another_score_is_another_answer() -> None:
    first, again = _audit(_frame("a", 0.5)), _audit(_frame("a", 0.0))
    assert same_answer(QUERY, first, again, truncated=False, where=WHERE) is None


def test_the_same_answer_neither_cut_is_served_whole_not_warned() -> None:
    answer = _audit(_frame("a"), _frame("b"))
    said = same_answer(QUERY, answer, answer, truncated=False, where=WHERE)
    assert said == (
        f"served whole: the goal {OTHER_GOAL!r} got the same 2 frame(s), neither answer cut "
        "(fewer than max_frames 8, under max_tokens 400, not truncated): a corpus that small "
        "is served whatever the goal",
        False,
    )


def test_the_same_answer_said_truncated_is_warned_naming_where_the_goal_is() -> None:
    answer = _audit(_frame("a"))
    said = same_answer(QUERY, answer, answer, truncated=True, where=WHERE)
    assert said == (
        f"the goal {OTHER_GOAL!r} got the same 1 frame(s): its answer does not depend on the "
        f"goal (fine if it serves the same frames whatever is asked); {WHERE}",
        True,
    )


def test_the_same_answer_filling_max_frames_is_warned() -> None:
    answer = _audit(*(_frame(f"f{i}") for i in range(QUERY.max_frames)))
    said = same_answer(QUERY, answer, answer, truncated=False, where=WHERE)
    assert said is not None and said[1], said


def test_the_same_answer_filling_max_tokens_is_warned() -> None:
    answer = _audit(_frame("a", cost=QUERY.max_tokens))
    said = same_answer(QUERY, answer, answer, truncated=False, where=WHERE)
    assert said is not None and said[1], said


def test_a_query_text_asked_is_named_beside_the_goal() -> None:
    query = QUERY.model_copy(update={"query_text": "evict"})
    answer = _audit(_frame("a"))
    said = same_answer(query, answer, answer, truncated=True, where=WHERE)
    assert said is not None and said[0].startswith(f"the goal and query_text {OTHER_GOAL!r} ")


def test_frames_for_common_words_alone_are_warned() -> None:
    said = common_words_matched(_audit(), _audit(_frame("a"), _frame("b")))
    assert said is not None and said.startswith(f"the goal {COMMON_GOAL!r} got 2 frame(s) ")


def test_a_provider_answering_either_goal_or_neither_is_not_judged_by_common_words() -> None:
    # One that answers any goal (a semantic one), or none: no sign of common words.
    assert common_words_matched(_audit(_frame("a")), _audit(_frame("b"))) is None
    assert common_words_matched(_audit(), _audit()) is None


def test_the_common_goal_adds_only_words_the_bundled_providers_leave_out() -> None:
    # What an honest provider searches for in it is what it searches for in OTHER_GOAL.
    assert tokenize(COMMON_GOAL) == tokenize(OTHER_GOAL)
    added = set(COMMON_GOAL.replace(",", "").split()) - set(OTHER_GOAL.split())
    assert added and added <= STOPWORDS
