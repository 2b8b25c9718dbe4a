"""``check_floors``: floors priced once, for the budget split and for the prompt."""

from __future__ import annotations

import copy
import pickle
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

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


@settings(max_examples=200, deadline=None)
@given(
    budget=st.one_of(
        st.integers(min_value=-5, max_value=2**40),
        st.floats(allow_nan=True, allow_infinity=True),
        st.booleans(),
        st.none(),
        st.text(max_size=3),
    ),
    empty=st.sampled_from([[], ()]),
)
def test_no_floors_admit_as_the_full_pricing_of_no_floors(budget: object, empty: Any) -> None:
    """A list or tuple of no floors is admitted without pricing anything: the same value,
    or the same error, as pricing an (empty) iterable of floors one by one."""

    def admitted(floors: Any) -> AdmittedFloors | str:
        try:
            return check_floors(floors, budget)  # type: ignore[arg-type]  # any budget, bad ones too
        except ValueError as exc:
            return f"ValueError: {exc}"

    fast, full = admitted(empty), admitted(iter(empty))
    assert fast == full
    if isinstance(fast, AdmittedFloors):
        assert isinstance(full, AdmittedFloors)
        assert (fast.contested, fast.remainder, fast.labels_taken().taken) == (
            full.contested,
            full.remainder,
            full.labels_taken().taken,
        )
