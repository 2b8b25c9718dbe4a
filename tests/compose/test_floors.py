"""``check_floors``: floors priced once, for the budget split and for the prompt."""

from __future__ import annotations

import copy
import pickle
from typing import Any

import pytest

from hostd.compose import (
    AdmittedFloors,
    Floor,
    FloorsExceedBudget,
    check_floors,
    compose_for_prompt,
)
from hostd.compose._meter import CANONICAL

from ._helpers import frame


def test_the_floors_leave_the_budget_less_their_fenced_blocks() -> None:
    admitted = check_floors([Floor("pinned", "p" * 400)], 500)
    (record,) = admitted.records
    assert record.tokens > 100  # the fenced block, not the content alone
    assert admitted.contested == 500 - record.tokens
    assert check_floors([], 500).contested == 500


def test_admitted_floors_compose_as_the_floors_they_came_from() -> None:
    floors = [Floor("a", "alpha"), Floor("b", "beta", "bottom")]
    frames = [("p", frame(f"f{i}", 1 - i / 10, f"body {i}")) for i in range(5)]
    admitted = check_floors(floors, 300)
    assert isinstance(admitted, AdmittedFloors)
    given = compose_for_prompt(frames, 300, floors=floors)
    priced = compose_for_prompt(frames, 300, floors=admitted)
    assert priced.prompt == given.prompt
    assert priced.to_wire() == given.to_wire()
    # Admitted against another budget, they are admitted again against this one.
    with pytest.raises(FloorsExceedBudget):
        compose_for_prompt(frames, 40, floors=admitted)


def test_floors_copied_to_another_process_are_not_priced_again(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    admitted = check_floors([Floor("a", "alpha")], 300)
    frames = [("p", frame(f"f{i}", 1 - i / 10, f"body {i}")) for i in range(3)]
    want = compose_for_prompt(frames, 300, floors=admitted).to_wire()
    priced: list[object] = []

    def counted(*args: Any, **kwargs: Any) -> AdmittedFloors:
        priced.append(args)
        return check_floors(*args, **kwargs)

    monkeypatch.setattr("hostd.compose._compose.check_floors", counted)
    for copied in (pickle.loads(pickle.dumps(admitted)), copy.deepcopy(admitted)):
        assert copied.meter is CANONICAL
        assert compose_for_prompt(frames, 300, floors=copied).to_wire() == want
    assert priced == []  # taken as admitted, not priced again


def test_floors_that_cannot_fit_fail_before_anything_is_composed() -> None:
    with pytest.raises(FloorsExceedBudget) as err:
        check_floors([Floor("big", "x" * 4000)], 100)
    assert err.value.reason == "floors_exceed_budget"
