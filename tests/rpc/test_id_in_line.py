"""``id_in_line``: the id an over-long line is answered under, read from its first and
last bytes by a bounded, strict scan. It is the request's own id, or None: never another."""

from __future__ import annotations

from typing import Any

import orjson
import pytest
from hypothesis import given
from hypothesis import strategies as st

from hostd.rpc import HEAD_BYTES, id_in_line

_SCALARS = st.none() | st.booleans() | st.integers(-(2**62), 2**62) | st.text(max_size=8)
_VALUES = st.recursive(
    _SCALARS | st.floats(allow_nan=False, allow_infinity=False),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=4), inner, max_size=3)
    ),
    max_leaves=8,
)
_IDS = st.none() | st.booleans() | st.integers(-(2**70), 2**70) | st.text(max_size=12) | st.floats()


def _answerable(id_: Any) -> bool:
    """An id a reply carries as sent: a string, an integer, a finite number under 2^63."""
    if isinstance(id_, float):
        return id_ == id_ and abs(id_) < 2.0**63
    return isinstance(id_, str | int) and not isinstance(id_, bool)


@given(
    st.dictionaries(st.text(max_size=6).filter(lambda k: k != "id"), _VALUES, max_size=4),
    _IDS,
    st.integers(min_value=0, max_value=4),
    st.integers(min_value=0, max_value=400),
    st.integers(min_value=0, max_value=400),
)
def test_the_id_read_is_the_requests_own_or_none(
    members: dict[str, Any], id_: Any, at: int, head: int, tail: int
) -> None:
    items = list(members.items())
    items.insert(min(at, len(items)), ("id", id_))
    try:
        line = orjson.dumps(dict(items))
    except TypeError:  # an integer past 64 bits: not JSON orjson writes
        return
    found = id_in_line(line[:head], line[len(line) - tail :])
    assert found is None or (found == id_ and type(found) is type(id_)), (line, found)
    # Either end holding the whole line reads it.
    for ends in ((line, b""), (b"", line)):
        if _answerable(id_) and (ends[0] or at >= len(members)):
            assert id_in_line(*ends) == id_, (line, ends)


@pytest.mark.parametrize(
    ("head", "want"),
    [
        (b'{"jsonrpc":"2.0","id":1,"method":"x","params":{"a":"xx', 1),
        (b' {"id" : "a\\"b" ,', 'a"b'),
        (b'{"\\u0069d":"z",', "z"),  # the member's name as JSON reads it
        (b'{"params":{"id":5},"id":7}', 7),
        (b'{"a":"}\\"{","id":9,', 9),
        (b'{"id":1.5,', 1.5),
        (b'{"id":12', None),  # 12, or 123…: not read whole
        (b'{"id":"ab', None),
        (b'[{"id":1,"method":"x"}', None),  # a batch
        (b'{"params":{"id":5,', None),  # not the request's member
        (b'{"id":null,', None),
        (b'{"id":true,', None),
        (b'{"id":1e400,', None),
        (b'{"id":18446744073709551616,', None),  # 2^64: read rounded, never echoed
        (b'{"x":nul,"id":1,', None),  # not JSON before it
        (b'{"x":1}', None),
        (b"", None),
        (b'{"a":"' + b"x" * HEAD_BYTES + b'","id":1,', None),  # past the bound
    ],
)
def test_an_id_is_read_from_the_head_only_when_certain(head: bytes, want: Any) -> None:
    assert id_in_line(head, b"") == want


@pytest.mark.parametrize(
    ("tail", "want"),
    [
        (b'x"}},"id":1}', 1),  # jsonrpcclient's order: params, then id
        (b'xx"], "id" : "a\\"b" } ', 'a"b'),
        (b',"\\u0069d":-2.5}', -2.5),
        (b'{"id":3}', 3),
        (b'xx"}},"id":12', None),  # not the line's end
        (b'xx"},"id":1},"x":2}', None),  # the last member is not id
        (b'xx","id":1}}', None),  # id inside params, closed there
        (b'xx\\\\","id":1}', 1),  # that quote ends a string: its backslash is escaped
        (b'xx\\",\\"id\\":1}', None),  # those quotes are inside a string
        (b'xx","id":"a\\"}', None),  # no closing quote: an escaped one
        (b'"id":1}', None),  # what is before the name is not read
        (b'\\\\"id":1}', None),
        (b',"id":null}', None),
        (b',"id":false}', None),
        (b',"id":1e400}', None),
        (b',"id":0x1}', None),
        (b"", None),
    ],
)
def test_an_id_is_read_from_the_tail_only_when_certain(tail: bytes, want: Any) -> None:
    assert id_in_line(b"", tail) == want


def test_ends_that_disagree_give_no_id() -> None:
    # ``id`` twice: which one a parse would keep is not for the ends to say.
    assert id_in_line(b'{"id":1,"params":{"a":"', b'"},"id":2}') is None
    assert id_in_line(b'{"id":1,"params":{"a":"', b'"},"id":1}') == 1
    assert id_in_line(b'{"id":1,"params":{"a":"', b'"},"id":1.0}') is None
