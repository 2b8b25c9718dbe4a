"""``admit_request``: a composition's parameters read in one call, the first wrong one
the request's error, in the documented order (strategy, names, placement, floors)."""

from __future__ import annotations

from typing import Any

import pytest

from hostd.compose import (
    AdmittedRequest,
    FloorsExceedBudget,
    ReciprocalRankFusion,
    admit_request,
    check_floors,
    strategy_from_wire,
)
from hostd.errors import InvalidParam, UnknownProvider
from hostd.protocol import ContextQuery

PROVIDERS = frozenset({"alpha", "beta"})
BIG = [("pinned", "word " * 5000, "top")]


def test_what_it_reads_is_what_the_parsers_read() -> None:
    floors = [("pinned", "some pinned text", "top"), ("sel", "the selection", "bottom")]
    got = admit_request(
        500, strategy="rrf:k=30,alpha=2", floors=floors, providers=PROVIDERS, caps={"*": 0.5}
    )
    assert isinstance(got, AdmittedRequest)
    assert got.strategy == strategy_from_wire("rrf:k=30,alpha=2")
    assert isinstance(got.strategy, ReciprocalRankFusion)
    assert got.placement == "edges"
    assert got.floors == check_floors(floors, 500)
    assert got.floors.contested < 500


def test_no_strategy_is_none_and_no_floors_leave_the_whole_budget() -> None:
    got = admit_request(700, placement="grouped", providers=PROVIDERS)
    assert (got.strategy, got.placement, got.floors.contested) == (None, "grouped", 700)


def test_the_providers_query_comes_built_for_what_the_floors_leave() -> None:
    floors = [("pinned", "some pinned text", "top")]
    fields: dict[str, Any] = {
        "goal": "g",
        "query_text": None,
        "kinds": ["doc"],
        "anchors": [],
        "max_frames": 9,
    }
    got = admit_request(500, floors=floors, providers=PROVIDERS, query=fields)
    assert got.query == ContextQuery(**fields, max_tokens=got.floors.contested)
    assert got.query.max_tokens < 500  # the floors' share is not offered to providers
    assert admit_request(500, providers=PROVIDERS).query is None  # no fields: no query


def test_the_strategy_is_read_first() -> None:
    with pytest.raises(InvalidParam) as caught:
        admit_request(
            10,
            strategy="nonsense",
            caps={"gamma": 0.5},
            placement="x",
            floors=BIG,
            providers=PROVIDERS,
        )
    assert caught.value.data == {"field": "strategy"}
    assert caught.value.message.startswith("invalid params: strategy: ")


@pytest.mark.parametrize(
    ("caps", "strategy", "field", "provider"),
    [
        ({"gamma": 0.5}, "rrf:delta=2", "caps", "gamma"),
        ({"*": 0.5, "alpha": 0.2}, "rrf:delta=2", "strategy", "delta"),
    ],
)
def test_named_providers_before_the_placement_and_the_floors(
    caps: dict[str, float], strategy: str, field: str, provider: str
) -> None:
    with pytest.raises(UnknownProvider) as caught:
        admit_request(
            10, strategy=strategy, caps=caps, placement="x", floors=BIG, providers=PROVIDERS
        )
    assert caught.value.data == {"field": field, "provider": provider}


def test_the_placement_before_the_floors() -> None:
    with pytest.raises(InvalidParam) as caught:
        admit_request(10, placement="middle", floors=BIG, providers=PROVIDERS)
    assert caught.value.data == {"field": "placement"}


def test_floors_over_the_budget_fail_last() -> None:
    with pytest.raises(FloorsExceedBudget):
        admit_request(10, placement="canonical", floors=BIG, providers=PROVIDERS)
