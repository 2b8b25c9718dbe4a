"""``encode``: the non-strict encoder writes what ``OPT_NON_STR_KEYS`` writes, byte for byte."""

from __future__ import annotations

import enum
from typing import Any

import orjson
import pytest
from hypothesis import given
from hypothesis import strategies as st

from hostd.protocol import EncodedObject
from hostd.rpc import encode, encode_line, encode_reply, make_request, request_line


class _Key(enum.StrEnum):
    A = "a"


_KEYS = st.text(max_size=4) | st.integers(-5, 5) | st.booleans() | st.sampled_from([_Key.A])
_LEAVES = st.none() | st.booleans() | st.integers(-(2**63), 2**63 - 1) | st.text(max_size=8)
_VALUES = st.recursive(
    _LEAVES,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(_KEYS, inner, max_size=3),
    max_leaves=12,
)


@given(_VALUES)
def test_non_strict_encode_is_the_non_str_keys_encoding(value: Any) -> None:
    assert encode(value) == orjson.dumps(value, option=orjson.OPT_NON_STR_KEYS)


def test_strict_encode_refuses_a_key_that_is_not_text() -> None:
    with pytest.raises(TypeError):
        encode({1: "x"}, strict=True)
    assert encode({1: "x"}) == b'{"1":"x"}'


def test_what_has_no_json_form_still_raises() -> None:
    with pytest.raises(TypeError):
        encode({1: object()})
    with pytest.raises(TypeError):
        encode({"a": 2**64})


_BIG = st.integers(2**64, 2**70) | st.sampled_from([object(), "\ud800"])


@given(_VALUES | st.dictionaries(_KEYS, _BIG | _VALUES, max_size=3))
def test_a_line_is_the_value_and_one_newline(value: Any) -> None:
    # The newline comes from orjson (no copy of the encoded value to add it): the same
    # bytes as the value's encoding and b"\n", and the same refusals, strict or not.
    for strict in (True, False):
        try:
            expected = encode(value, strict=strict) + b"\n"
        except TypeError:
            with pytest.raises(TypeError):
                encode_line(value, strict=strict)
            continue
        assert encode_line(value, strict=strict) == expected
    if isinstance(value, dict):
        reply = {"jsonrpc": "2.0", "result": value, "id": 1}
        try:
            expected = encode(reply) + b"\n"
        except TypeError:
            assert b'"reason":"internal"' in encode_reply(reply)
        else:
            assert encode_reply(reply) == expected


@given(st.text(max_size=8), _VALUES, st.integers(1, 2**63 - 1) | st.text(max_size=4))
def test_a_request_line_is_its_message_encoded_as_a_line(
    method: str, params: Any, id_: int | str
) -> None:
    try:
        expected = encode_line(make_request(method, params, id_))
    except TypeError:  # a non-string key: strict, as every requester's line
        with pytest.raises(TypeError):
            request_line(method, params, id_)
        return
    assert request_line(method, params, id_) == expected
    assert list(orjson.loads(expected)) == ["jsonrpc", "method", "params", "id"]


@given(_VALUES, st.dictionaries(st.text(max_size=4), _VALUES, max_size=3))
def test_a_replys_encoded_object_is_written_as_the_same_bytes(value: Any, usage: Any) -> None:
    """A result member carried as an ``EncodedObject`` is written as its text: the line
    the reply would be without it, byte for byte; the reply itself is left as it was."""
    result: dict[str, Any] = {"prompt": value, "usage": usage, "id": 1}
    plain = encode_reply({"jsonrpc": "2.0", "result": result, "id": 7})
    kept = EncodedObject(usage)
    kept.text = encode(usage)
    carried_result = {**result, "usage": kept}
    assert encode_reply({"jsonrpc": "2.0", "result": carried_result, "id": 7}) == plain
    assert carried_result["usage"] is kept and kept == usage  # a dict to every reader
