"""``Provenance.many_to_wire``: one serializer call, the same dicts as ``to_wire`` of each."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from hostd.protocol import Provenance

_OPTIONAL = st.none() | st.text(max_size=12)

PROVENANCE = st.builds(
    Provenance,
    type=st.sampled_from(["file", "derivation", "url", "x"]),
    uri=_OPTIONAL,
    range=_OPTIONAL,
    digest=_OPTIONAL,
    method=_OPTIONAL,
    by=_OPTIONAL,
)


@given(st.lists(PROVENANCE, max_size=8))
def test_many_to_wire_is_each_items_wire_form(items: list[Provenance]) -> None:
    assert Provenance.many_to_wire(items) == [p.to_wire() for p in items]


def test_unset_members_are_left_out_and_order_is_the_fields() -> None:
    p = Provenance.model_validate({"by": "b", "type": "file", "uri": "u", "extra": 1})
    (wire,) = Provenance.many_to_wire([p])
    assert list(wire) == ["type", "uri", "by"]
