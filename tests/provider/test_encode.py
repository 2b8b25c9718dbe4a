"""The provider runtime's reply encoder: orjson first, pydantic-core for what it refuses."""

from __future__ import annotations

import json
import math
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from pydantic_core import PydanticSerializationError, to_json

from hostd.protocol import ProviderInfo
from hostd.provider import _encode

# JSON values as a provider's reply holds them: finite floats, 64-bit integers.
_scalars = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**63), max_value=2**64 - 1)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text()
)
_values = st.recursive(
    _scalars,
    lambda inner: st.lists(inner, max_size=5) | st.dictionaries(st.text(), inner, max_size=5),
    max_leaves=30,
)


@given(_values)
def test_json_values_encode_to_the_same_bytes_as_pydantic_core(value: Any) -> None:
    out = _encode(value)
    assert json.loads(out) == value
    # Same value; the bytes differ at most in a float's spelling (both are shortest
    # round-trip forms), so compare re-parsed text where floats are involved.
    expected = to_json(value)
    assert out == expected or json.loads(out) == json.loads(expected)


def test_a_reply_with_unicode_is_compact_utf8() -> None:
    out = _encode({"a": "é ✓ \u2028", "b": [1, 2.5, None]})
    assert out == '{"a":"é ✓ \u2028","b":[1,2.5,null]}'.encode()


@pytest.mark.parametrize(
    "value",
    [
        {"big": 2**70},  # orjson stops at 64 bits
        {"info": ProviderInfo(name="p", version="1")},  # a pydantic model
        {1: "integer key"},  # orjson wants string keys
    ],
)
def test_what_orjson_refuses_pydantic_core_encodes(value: Any) -> None:
    assert json.loads(_encode(value)) == json.loads(to_json(value))


def test_non_finite_floats_become_null_valid_json() -> None:
    assert json.loads(_encode({"score": math.nan, "x": math.inf})) == {"score": None, "x": None}


def test_what_neither_encoder_knows_raises() -> None:
    with pytest.raises((TypeError, PydanticSerializationError)):
        _encode({"x": object()})
