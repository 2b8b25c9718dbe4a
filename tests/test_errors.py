"""A refused param in the client API's words (``hostd.errors.params_refused``): the
field, what was sent (bounded) and what the method's model takes, as ``hostd mcp``
words a tool's arguments (tests/mcp/test_tool_arguments.py)."""

from __future__ import annotations

import typing
from typing import Any

import pytest
from pydantic import BaseModel, ValidationError

from hostd.compose import PLACEMENTS
from hostd.errors import params_refused
from hostd.server import ComposeParams
from hostd.server._params import FeedbackParams


def _refusal(model: type[BaseModel], sent: dict[str, Any]) -> str:
    with pytest.raises(ValidationError) as raised:
        model.model_validate(sent)
    return params_refused(model, sent, raised.value).message


def test_a_union_is_named_as_one_field_with_each_shape_it_takes() -> None:
    # pydantic names a union's member (``strategy.str``); the field is the union.
    assert _refusal(ComposeParams, {"goal": "g", "strategy": 5}) == (
        "invalid params: strategy: got 5; expected a string or an object"
    )
    assert _refusal(FeedbackParams, {"request_id": "r", "used": [5]}) == (
        "invalid params: used[0]: got 5; expected a non-empty string of at most 4096 "
        "characters or an object"
    )


def test_a_nested_member_and_a_missing_one_are_named_by_their_path() -> None:
    floor = {"label": "a", "content": "b", "position": "middle"}
    assert _refusal(ComposeParams, {"goal": "g", "floors": [floor]}) == (
        "invalid params: floors[0].position: got a string 'middle'; expected one of top, bottom"
    )
    assert _refusal(ComposeParams, {}) == (
        "invalid params: goal: missing; expected a non-empty string of at most 65536 characters"
    )


def test_a_long_string_sent_is_counted_not_quoted() -> None:
    said = _refusal(ComposeParams, {"goal": "g", "budget": "9" * 100})
    assert "9" * 41 not in said
    assert said == (
        "invalid params: budget: got a string of 100 characters (not quoted); "
        "expected an integer from 1 to 10,000,000"
    )


def test_our_own_validators_keep_their_words() -> None:
    assert _refusal(ComposeParams, {"goal": "  "}) == (
        "invalid params: goal: must not be empty or only whitespace"
    )
    assert _refusal(ComposeParams, {"goal": "g", "budgett": 1}) == (
        "invalid params: budgett: unknown member"
    )


def test_a_member_inside_a_union_is_named_by_the_path_a_client_sends() -> None:
    # The value took a FrameId's shape: its own refusal, not the string member's, and
    # no name pydantic gives a union's member (``constrained-str``, ``FrameIdParam``).
    used: list[tuple[dict[str, Any], str]] = [
        (
            {"provider_id": "", "frame_id": "f"},
            "used[0].provider_id: got an empty string; expected a non-empty string",
        ),
        ({"provider_id": "p"}, "used[0].frame_id: missing; expected a non-empty string"),
        ({"provider_id": "p", "frame_id": "f", "frameid": "g"}, "used[0].frameid: unknown member"),
        (
            {"provider_id": " ", "frame_id": "f"},
            "used[0].provider_id: must not be empty or only whitespace",
        ),
    ]
    for frame_id, said in used:
        sent = {"request_id": "r", "used": [frame_id]}
        with pytest.raises(ValidationError) as raised:
            FeedbackParams.model_validate(sent)
        refused = params_refused(FeedbackParams, sent, raised.value)
        assert refused.message == f"invalid params: {said}"
        fields = [e["field"] for e in refused.data["errors"]]
        assert all("constrained" not in f and "FrameIdParam" not in f for f in fields), fields
        # Only what is wrong inside the object: not the string member's refusal of it.
        assert all(f.startswith("used[0].") for f in fields), refused.data["errors"]


def test_a_union_refused_whole_names_no_python_class() -> None:
    sent = {"request_id": "r", "used": [5, {"provider_id": "p"}]}
    with pytest.raises(ValidationError) as raised:
        FeedbackParams.model_validate(sent)
    errors = params_refused(FeedbackParams, sent, raised.value).data["errors"]
    assert {"field": "used[0]", "problem": "Input should be an object"} in errors
    assert {"field": "used[1].frame_id", "problem": "Field required"} in errors
    assert not any("FrameIdParam" in e["problem"] for e in errors), errors


def test_the_params_take_the_placements_composition_knows() -> None:
    """``placement`` is refused with the other params (``data.errors`` lists it too), from
    a choice written out in the params model: it must be composition's, no more, no less."""
    field = ComposeParams.model_fields["placement"].annotation
    assert set(typing.get_args(typing.get_args(field)[0])) == set(PLACEMENTS)
