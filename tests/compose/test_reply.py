"""``compose_reply``: the composition and its reply in one call, the same as composing
and then writing the wire form with the caller's members after the audit."""

from __future__ import annotations

from typing import Any

import orjson
from hypothesis import given, settings
from hypothesis import strategies as st

from hostd.compose import compose_for_prompt, compose_reply
from hostd.protocol import ContextFrame

from ._helpers import frame_pairs


@given(frame_pairs(), st.integers(0, 400), st.booleans(), st.sampled_from(["score", "rrf"]))
@settings(max_examples=60, deadline=None)
def test_the_reply_is_the_composition_written_with_the_callers_members(
    pairs: list[tuple[str, ContextFrame]], budget: int, include_content: bool, strategy: str
) -> None:
    then: dict[str, Any] = {"recorded": False, "providers": [], "usage": {"frames": 1}}
    composed, reply, kept = compose_reply(
        pairs, budget, include_content=include_content, then=then, strategy=strategy
    )
    alone = compose_for_prompt(pairs, budget, strategy=strategy)
    assert composed.prompt == alone.prompt and composed.to_wire() == alone.to_wire()
    expected = alone.to_wire(
        include_content=include_content,
        then={"recorded": False, "providers": [], "usage": {"frames": 1}},
    )
    assert reply == expected and list(reply) == list(expected)
    assert list(reply)[-3:] == ["recorded", "providers", "usage"]
    assert reply["usage"] is then["usage"]  # taken as it is, the prompt's size added
    assert then["usage"]["prompt"] == composed.prompt_usage()
    assert kept is not None and orjson.loads(kept) == reply["usage"]  # kept for usage/report
    _, _, none = compose_reply(pairs, budget, then={"providers": []}, strategy=strategy)
    assert none is None  # no usage among the caller's members: nothing to keep
