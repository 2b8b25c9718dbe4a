"""A tool's answer that is JSON over several lines is cut into whole records.

The SDK serves a Python tool's dict or list as JSON indented by 2; cut into runs of
lines, it parted objects (an order without its status). Each element of its list is
one record now, named by its ``id``-like member or its place, its range and digest
those of exactly its lines; what is no such JSON is cut as before.
"""

from __future__ import annotations

import json
import re
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

import hostd.chunking._json_records as json_module
from hostd.mcp import Document, cut
from hostd.mcp._frames import Piece
from hostd.protocol import address_line_range, sha256_digest
from tests.server.conftest import ROOT


def _order(n: int) -> dict[str, Any]:
    return {
        "id": f"o-{n}",
        "sku": f"SKU-{n % 4}",
        "qty": n % 3 + 1,
        "status": "reserved" if n % 2 else "short",
        "note": "ok" if n % 2 else "stock short; reservation failed",
    }


ORDERS = [_order(n) for n in range(1, 13)]


def _pieces(text: str, tool: str = "recent_orders") -> list[Piece]:
    pieces = list(cut(Document(method=f"tools/call:{tool}", text=text, always=True)))
    data = text.encode()
    for p in pieces:  # exactly the lines its range names (F17), or a part of its line
        addressed = address_line_range(data, p.range)
        assert addressed == p.text.encode() or (p.start == p.end and p.text.encode() in addressed)
        assert p.digest == sha256_digest(p.text.encode())
    return pieces


def _records_in(piece: Piece) -> list[str]:
    return re.findall(r'"id": "(o-\d+)"', piece.text)


def test_each_object_of_an_indented_list_is_one_piece_named_by_its_id() -> None:
    pieces = _pieces(json.dumps(ORDERS, indent=2))
    assert [p.label for p in pieces] == [f"recent_orders § o-{n}" for n in range(1, 13)]
    for n, piece in enumerate(pieces, start=1):
        assert _records_in(piece) == [f"o-{n}"]
        assert piece.text.count('"status": ') == 1  # the order is whole
    assert pieces[0].text.startswith("[\n") and pieces[-1].text.endswith("}\n]")


def test_an_objects_largest_list_gives_the_records_its_other_members_kept_at_the_ends() -> None:
    answer = {
        "count": 12,
        "warehouses": [{"name": "north"}, {"name": "south"}],
        "orders": ORDERS,
        "next_cursor": "c-2",
    }
    pieces = _pieces(json.dumps(answer, indent=2))
    assert [p.label for p in pieces] == [f"recent_orders § o-{n}" for n in range(1, 13)]
    assert all(len(_records_in(p)) == 1 for p in pieces)
    # The members before the list open the first record, those after close the last.
    assert '"count": 12' in pieces[0].text and '"south"' in pieces[0].text
    assert '"next_cursor": "c-2"' in pieces[-1].text
    assert pieces[0].start == 1 and pieces[-1].text.endswith("}")


def test_an_element_without_a_short_printable_name_is_named_by_its_place() -> None:
    rows = [
        {"id": "x" * 60, "v": 1},  # too long to name it
        {"name": "line\nbreak", "v": 2},  # not printable on one line
        {"title": "Cache rule", "v": 3},
        {"v": 4},
        {"ID": 7, "v": 5},  # a number names it too, whatever the key's case
    ]
    labels = [p.label for p in _pieces(json.dumps({"rows": rows}, indent=2), "t")]
    assert labels == ["t § rows[0]", "t § rows[1]", "t § Cache rule", "t § rows[3]", "t § 7"]
    listed = [p.label for p in _pieces(json.dumps([[1, 2], [3, 4]], indent=2), "t")]
    assert listed == ["t § [0]", "t § [1]"]


def test_a_record_over_the_bound_is_cut_within_itself_each_part_named_by_it() -> None:
    big = {"id": "o-big", "lines": [f"item {i} of a large order" for i in range(60)]}
    pieces = _pieces(json.dumps([_order(1), big, _order(2)], indent=2))
    parts = [p for p in pieces if p.label.startswith("recent_orders § o-big")]
    n = len(parts)
    assert n > 1
    assert [p.label for p in parts] == [f"recent_orders § o-big ({k}/{n})" for k in range(1, n + 1)]
    assert "".join(p.text for p in parts).count("large order") == 60
    assert [p.label for p in pieces if p not in parts] == [
        "recent_orders § o-1",
        "recent_orders § o-2",
    ]


def _named(pieces: list[Piece]) -> bool:
    return any("§" in p.label for p in pieces)


@pytest.mark.parametrize(
    "spoil",
    [
        # Nested past the decoder's recursion bound: no records, no RecursionError.
        lambda t: t.replace('"qty": 2', '"qty": ' + "[" * 50_000 + "]" * 50_000, 1),
        lambda t: t[: t.rindex("]")],  # cut off: not JSON
        lambda t: t + "\n" + t,  # two values
        lambda t: t.replace("},\n  {", "}, {"),  # elements sharing lines
        lambda t: json.dumps([o["id"] for o in ORDERS], indent=2),  # a list of names
    ],
    ids=["deep", "truncated", "two-values", "shared-lines", "scalars"],
)
def test_what_is_not_an_indented_list_of_objects_is_cut_as_any_text(spoil: Any) -> None:
    text = json.dumps(ORDERS, indent=2)
    assert _named(_pieces(text))
    assert not _named(_pieces(spoil(text)))


def test_a_text_over_the_parse_bound_is_cut_as_any_text(monkeypatch: pytest.MonkeyPatch) -> None:
    text = json.dumps(ORDERS, indent=2)
    monkeypatch.setattr(json_module, "MAX_JSON_BYTES", len(text))
    assert _named(_pieces(text))
    monkeypatch.setattr(json_module, "MAX_JSON_BYTES", len(text) - 1)
    assert not _named(_pieces(text))


_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=4), inner),
    max_leaves=6,
)


@given(
    st.lists(st.dictionaries(st.sampled_from(["id", "a", "b"]), _VALUES), min_size=2, max_size=8),
    st.sampled_from([1, 2, 4]),
)
def test_records_cover_every_line_once_each_holding_one_element(
    rows: list[dict[str, Any]], indent: int
) -> None:
    text = json.dumps({"rows": rows, "n": len(rows)}, indent=indent)
    lines = text.splitlines()
    records = json_module.json_records(text.encode(), len(lines))
    assert records is not None and len(records) == len(rows)
    assert [a for a, _, _ in records] == [1] + [b + 1 for _, b, _ in records[:-1]]
    assert records[-1][1] == len(lines)
    # An element opens with ``{`` at the list's depth; deeper objects are indented more.
    opener = re.compile(" " * (2 * indent) + r"\{")
    for a, b, _ in records:
        assert sum(bool(opener.match(line)) for line in lines[a - 1 : b]) == 1


def test_the_docs_state_the_json_bounds_as_the_code_has_them() -> None:
    from hostd.chunking._chunk import _MAX_PARENT

    doc = " ".join((ROOT / "docs" / "mcp.md").read_text(encoding="utf-8").split())
    assert f"a text over {json_module.MAX_JSON_BYTES >> 20} MiB is not parsed" in doc
    assert f"at most {json_module._MAX_NAME} printable characters" in doc
    assert f"the parent cut to {_MAX_PARENT} characters" in doc
