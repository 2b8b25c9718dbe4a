"""``check_floors``: floors priced once, for the budget split and for the prompt."""

from __future__ import annotations

import pytest

from hostd.compose import (
    AdmittedFloors,
    Floor,
    FloorsExceedBudget,
    check_floors,
    compose_for_prompt,
)

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


def test_floors_that_cannot_fit_fail_before_anything_is_composed() -> None:
    with pytest.raises(FloorsExceedBudget) as err:
        check_floors([Floor("big", "x" * 4000)], 100)
    assert err.value.reason == "floors_exceed_budget"
