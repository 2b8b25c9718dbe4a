"""The envelope vocabulary, and what ``parse_envelope`` does with a type outside it.

SPEC §2.1: a receiver must not reject an envelope solely because its ``type`` is one it
does not implement (the vocabulary grows within ``contextgraph/1``, §13). So an object
whose ``type`` is a string outside the vocabulary parses to ``None`` (the caller
ignores it); a value that is not an envelope at all, and a known type of the wrong
shape, still raise.
"""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import ValidationError

from hostd.protocol import parse_envelope
from hostd.protocol._envelopes import ENVELOPE_TYPES

from ._vectors import load_json

SCHEMA = load_json("schema/contextgraph-envelope.schema.json")


def test_the_vocabulary_is_the_published_schema_s() -> None:
    defs = SCHEMA["$defs"]
    published = {
        defs[ref["$ref"].rsplit("/", 1)[1]]["properties"]["type"]["const"]
        for ref in SCHEMA["oneOf"]
    }
    assert ENVELOPE_TYPES == published


@pytest.mark.parametrize(
    "data",
    [
        {"type": "invalidated", "frames": []},
        {"type": "progress", "id": "q1", "done": 1},
        {"type": "frames_v2", "result": "anything"},
        {"type": ""},
        {"type": "Frames"},  # types are compared as written
    ],
)
def test_an_envelope_of_a_type_outside_the_vocabulary_parses_to_none(data: dict[str, Any]) -> None:
    assert parse_envelope(data) is None


@pytest.mark.parametrize(
    "data",
    [
        {"frames": []},  # no type
        {"type": 3},
        {"type": None},
        {"type": ["frames"]},
        ["invalidated"],
        "invalidated",
        {"type": "frames", "result": "nope"},  # a known type, misshapen
        {"type": "error"},
    ],
)
def test_what_is_no_envelope_or_a_misshapen_known_one_still_raises(data: Any) -> None:
    with pytest.raises(ValidationError):
        parse_envelope(data)
