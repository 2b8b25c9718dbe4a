"""Token cost (B3), digests (F5, D1) and F17 line ranges against the published vectors."""

from __future__ import annotations

import hashlib

import pytest
from hypothesis import given
from hypothesis import strategies as st

from hostd.protocol import (
    LineIndex,
    RangeProblem,
    UnverifiableRange,
    address_line_range,
    canonical_token_cost,
    is_sha256_digest,
    line_number,
    sha256_digest,
)

from ._vectors import load_json

RANGE = load_json("range/range-vectors.json")


@pytest.mark.parametrize(
    ("content", "cost"),
    [
        (None, 0),
        ("", 0),
        ("a", 1),
        ("abcd", 1),
        ("abcde", 2),
        ("café", 2),  # 5 UTF-8 bytes, 4 code points
        ("日本語", 3),  # 9 bytes
        ("😀", 1),  # 4 bytes, 2 UTF-16 units
    ],
)
def test_token_cost_is_ceil_of_utf8_bytes_over_four(content: str | None, cost: int) -> None:
    assert canonical_token_cost(content) == cost


@given(st.text())
def test_token_cost_matches_the_byte_formula_for_any_text(text: str) -> None:
    n = len(text.encode("utf-8"))
    assert canonical_token_cost(text) == -(-n // 4)


def test_sha256_digest_has_the_protocol_form() -> None:
    d = sha256_digest(b"")
    assert d == "sha256:e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
    assert is_sha256_digest(d)


@pytest.mark.parametrize(
    "bad",
    [
        "sha256:" + "A" * 64,  # uppercase
        "sha256:" + "a" * 63,
        "sha256:" + "a" * 65,
        "sha256:9f2c3e7a1b",  # the upstream example's short digest (D1)
        "md5:" + "a" * 64,
        "",
        None,
    ],
)
def test_malformed_digests_are_rejected(bad: object) -> None:
    assert not is_sha256_digest(bad)


_CASES = RANGE["cases"]


@pytest.mark.parametrize("case", _CASES, ids=[f"{c['resource']}:{c.get('range')}" for c in _CASES])
def test_range_vectors(case: dict) -> None:
    data = RANGE["resources"][case["resource"]].encode("utf-8")
    rng = case.get("range")  # absent means the whole resource; "" is not absent
    if "unverifiable" in case:
        with pytest.raises(UnverifiableRange) as info:
            address_line_range(data, rng)
        assert info.value.reason is RangeProblem(case["unverifiable"])
        assert info.value.reason.value in str(info.value)
    else:
        got = address_line_range(data, rng)
        assert got == case["bytes"].encode("utf-8")
        assert sha256_digest(got) == case["digest"]


@pytest.mark.parametrize("case", _CASES, ids=[f"{c['resource']}:{c.get('range')}" for c in _CASES])
def test_a_line_index_addresses_every_vector_alike(case: dict) -> None:
    data = RANGE["resources"][case["resource"]].encode("utf-8")
    index = LineIndex(data)
    rng = case.get("range")
    if "unverifiable" in case:
        with pytest.raises(UnverifiableRange) as info:
            index.address(rng)
        assert info.value.reason is RangeProblem(case["unverifiable"])
    else:
        assert index.address(rng) == case["bytes"].encode("utf-8")


@given(st.binary(max_size=40).map(lambda b: b.replace(b"x", b"\n")), st.integers(1, 12))
def test_a_line_index_agrees_with_the_scan_for_every_range(data: bytes, start: int) -> None:
    """The lines found once address what the scan addresses, start past end included."""
    index = LineIndex(data)
    assert index.count == data.count(b"\n") + (0 if data.endswith(b"\n") or not data else 1)
    for rng in (f"L{start}", f"L{start}-{start + 2}", f"L{start}-{10**30}", None):
        try:
            want: bytes | RangeProblem = address_line_range(data, rng)
        except UnverifiableRange as exc:
            want = exc.reason
        try:
            got: bytes | RangeProblem = index.address(rng)
        except UnverifiableRange as exc:
            got = exc.reason
        assert got == want


def test_range_vectors_cover_every_unverifiable_reason() -> None:
    seen = {c["unverifiable"] for c in _CASES if "unverifiable" in c}
    assert seen == {p.value for p in RangeProblem}


def test_unverifiable_range_is_a_value_error_with_a_reason() -> None:
    with pytest.raises(ValueError, match="inverted"):
        address_line_range(b"a\nb\n", "L2-1")


@given(st.lists(st.text(alphabet="ab\r", max_size=5), max_size=6), st.integers(1, 8))
def test_single_lines_concatenate_to_the_whole_resource(lines: list[str], _: int) -> None:
    data = "\n".join(lines).encode()
    parts = []
    i = 1
    while True:
        try:
            parts.append(address_line_range(data, f"L{i}"))
        except UnverifiableRange as exc:
            assert exc.reason is RangeProblem.START_PAST_END
            break
        i += 1
    assert b"".join(parts) == data
    if data:
        assert address_line_range(data, f"L1-{i + 5}") == data
    assert hashlib.sha256(b"".join(parts)).hexdigest() == hashlib.sha256(data).hexdigest()


def test_a_line_number_of_thousands_of_digits_is_past_the_end_not_a_crash() -> None:
    """Past 4,300 digits Python's ``int`` refuses the string: such a line number is read
    as past any file's end, so an end clamps to the source and a start is past it (F17),
    as the published vectors' shorter huge numbers are."""
    data = b"one\ntwo\n"
    huge = "9" * 5000
    assert address_line_range(data, f"L2-{huge}") == b"two\n"
    with pytest.raises(UnverifiableRange) as info:
        address_line_range(data, f"L{huge}")
    assert info.value.reason is RangeProblem.START_PAST_END
    assert line_number("12") == 12 and line_number(huge) == line_number("9" * 19) > 10**17
