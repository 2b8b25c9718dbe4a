"""RFC 8785 canonical JSON against the protocol's normalization vectors and fixtures."""

from __future__ import annotations

import hashlib
import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from hostd.protocol import ContextFrame, ContextQuery, canonical_json, es_number

from ._vectors import VECTORS, load_json

NORMALIZATION = load_json("fixtures/normalization-vectors.json")["vectors"]


def _sha(text: str) -> str:
    return "sha256:" + hashlib.sha256(text.encode("utf-8")).hexdigest()


@pytest.mark.parametrize("vector", NORMALIZATION, ids=[v["name"] for v in NORMALIZATION])
def test_normalization_vectors(vector: dict) -> None:
    out = canonical_json(json.loads(vector["input_json"]))
    assert out == vector["expected_jcs_utf8"]
    assert _sha(out) == vector["sha256"]


@pytest.mark.parametrize(
    ("value", "text"),
    [
        (-0.0, "0"),
        (1e21, "1e+21"),
        (1e20, "100000000000000000000"),
        (1e-7, "1e-7"),
        (1e-6, "0.000001"),
        (5e-324, "5e-324"),
        (-2.5, "-2.5"),
        (13, "13"),
    ],
)
def test_numbers_use_ecmascript_spelling(value: float, text: str) -> None:
    assert es_number(value) == text


def test_non_finite_numbers_have_no_json_form() -> None:
    with pytest.raises(ValueError):
        canonical_json(float("nan"))


@given(st.floats(allow_nan=False, allow_infinity=False))
def test_es_number_round_trips(x: float) -> None:
    assert float(es_number(x)) == x


@pytest.mark.parametrize(
    ("rel", "model"),
    [
        ("fixtures/context-frame.valid.json", ContextFrame),
        ("fixtures/context-query.valid.json", ContextQuery),
    ],
)
def test_fixture_normalisation_and_digest(
    rel: str, model: type[ContextFrame] | type[ContextQuery]
) -> None:
    for case in load_json(rel)["cases"]:
        parsed = model.model_validate(case["source"])
        wire = parsed.to_wire()
        assert wire == case["expected_normalized"], case["name"]
        assert canonical_json(wire) == case["expected_jcs_utf8"]
        assert _sha(canonical_json(wire)) == case["sha256"]


def test_fixture_manifest_digests_match_the_files() -> None:
    manifest = load_json("fixtures/manifest.json")
    assert manifest["protocol_version"] == "contextgraph/1.0-draft"
    for name, digest in manifest["files"].items():
        data = (VECTORS / "fixtures" / name).read_bytes()
        assert "sha256:" + hashlib.sha256(data).hexdigest() == digest, name


@given(st.text(alphabet=st.characters(codec="utf-8")))
def test_string_escaping_is_rfc8785(text: str) -> None:
    """RFC 8785 §3.2.2.2: short escapes, ``\\u00xx`` for other controls, all else as is;
    stdlib json with ensure_ascii=False is the independent reference."""
    quoted = json.dumps(text, ensure_ascii=False)
    assert canonical_json(text) == quoted
    assert canonical_json({text: text}) == "{" + quoted + ":" + quoted + "}"
