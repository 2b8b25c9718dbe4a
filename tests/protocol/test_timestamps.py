"""F4 timestamps: the cheap shape check decides exactly as the datetime parse did."""

from __future__ import annotations

import re
from datetime import datetime
from decimal import Decimal

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from hostd.protocol import check_timestamp, parse_timestamp
from hostd.protocol._time import is_timestamp

# The check as first written: the regex, then ``datetime`` and ``Decimal``.
_REFERENCE_RE = re.compile(r"(\d{4})-(\d{2})-(\d{2})T(\d{2}):(\d{2}):(\d{2})(\.\d+)?Z")


def _reference(value: str) -> bool:
    m = _REFERENCE_RE.fullmatch(value)
    if m is None:
        return False
    try:
        year, month, day, hour, minute, second = (int(m.group(i)) for i in range(1, 7))
        datetime(year, month, day, hour, minute, second)
    except ValueError:
        return False
    Decimal("0" + m.group(7)) if m.group(7) else Decimal(0)
    return True


# Digits of several scripts (all Nd, what \\d matches), and near-misses: superscripts
# and other No digits, letters, separators, the wrong case.
NATIVE = ["\u0660", "\u06f0", "\u0966", "\uff10", "\U0001d7ce"]  # each script's zero
NEAR = st.sampled_from(["\u00b2", "\u2460", "a", " ", "-", ":", ".", "t", "z", "T", "Z", "\n"])


def _in_script(text: str, zero: str | None) -> str:
    if zero is None:
        return text
    return "".join(chr(ord(zero) + int(c)) if c.isdigit() else c for c in text)


@st.composite
def stamps(draw: st.DrawFn) -> str:
    """Mostly-valid stamps: every field at and around its bounds (Feb 29 of leap and
    common years, day 31 of short months, year 0000, hour 24, second 60), any digit
    script, a fraction of any length, then up to two single-character edits."""
    y = draw(st.sampled_from([0, 1, 4, 100, 1900, 2000, 2023, 2024, 2100, 2400, 9999]))
    mo = draw(st.integers(0, 13))
    d = draw(st.sampled_from([0, 1, 28, 29, 30, 31, 32]))
    h, mi, sec = draw(st.integers(0, 24)), draw(st.integers(0, 60)), draw(st.integers(0, 61))
    frac = draw(st.sampled_from(["", ".", ".0", ".5", ".123456789", ".000000000001"]))
    text = f"{y:04d}-{mo:02d}-{d:02d}T{h:02d}:{mi:02d}:{sec:02d}{frac}Z"
    chars = list(_in_script(text, draw(st.none() | st.sampled_from(NATIVE))))
    for _ in range(draw(st.sampled_from([0, 0, 0, 1, 2]))):
        at = draw(st.integers(0, len(chars) - 1))
        op = draw(st.sampled_from(["replace", "delete", "insert"]))
        if op == "delete":
            del chars[at]
        else:
            piece = draw(st.one_of(NEAR, st.sampled_from(["0", "9", *NATIVE])))
            if op == "replace":
                chars[at] = piece
            else:
                chars.insert(at, piece)
        if not chars:
            break
    return "".join(chars)


# Hypothesis draws the edits, scripts and random text; each example's cost is mostly
# its own generation, so the bounds themselves are swept exhaustively below.
@pytest.mark.slow
@settings(max_examples=1000)
@given(st.one_of(stamps(), st.text(max_size=30)))
@example("2024-02-29T23:59:59Z")
@example("2023-02-29T00:00:00Z")
@example("1900-02-29T00:00:00Z")
@example("2000-02-29T00:00:00.000000001Z")
@example("0000-01-01T00:00:00Z")
@example("2024-01-01T00:00:00.Z")
@example("\u0662\u0660\u0662\u0664-01-01T00:00:00Z")
@example("2024-01-01T00:00:00\u00b2Z")
def test_the_cheap_check_accepts_and_rejects_exactly_as_the_parse(value: str) -> None:
    expected = _reference(value)
    assert is_timestamp(value) is expected
    assert (parse_timestamp(value) is not None) is expected
    assert (check_timestamp(value, "at") == []) is expected


_YEARS = [0, 1, 4, 100, 1900, 2000, 2023, 2024, 2100, 2400, 9999]
_FRACTIONS = ["", ".", ".0", ".5", ".123456789", ".000000000001"]


def test_every_field_at_and_around_its_bounds_decides_as_the_parse() -> None:
    """Every date the stamps above draw (year, month 0-13, day at and past month ends)
    in each digit script, each fraction in each script, and every time at and past its
    bounds (hour 0-24, minute 0-60, second 0-61) in each fraction, each checked as the
    parse decides it."""
    scripts = (None, *NATIVE)
    values = [
        _in_script(f"{y:04d}-{mo:02d}-{d:02d}T12:30:30Z", zero)
        for y in _YEARS
        for mo in range(14)
        for d in (0, 1, 28, 29, 30, 31, 32)
        for zero in scripts
    ]
    values += [
        _in_script(f"2023-02-28T12:30:30{frac}Z", zero) for frac in _FRACTIONS for zero in scripts
    ]
    values += [
        f"2024-02-29T{h:02d}:{mi:02d}:{sec:02d}{frac}Z"
        for h in range(25)
        for mi in (0, 1, 59, 60)
        for sec in (0, 1, 59, 60, 61)
        for frac in _FRACTIONS
    ]
    for value in values:
        expected = _reference(value)
        assert is_timestamp(value) is expected, value
        assert (parse_timestamp(value) is not None) is expected, value
        assert (check_timestamp(value, "at") == []) is expected, value


@settings(max_examples=300)
@given(
    st.datetimes(min_value=datetime(1, 1, 1), max_value=datetime(9999, 12, 31)), st.integers(0, 9)
)
def test_every_real_time_in_every_precision_is_accepted(at: datetime, digits: int) -> None:
    stamp = (
        f"{at.year:04d}-{at.month:02d}-{at.day:02d}T{at.hour:02d}:{at.minute:02d}:{at.second:02d}"
    )
    if digits:
        stamp += "." + f"{at.microsecond:06d}{at.microsecond:03d}"[:digits]
    stamp += "Z"
    assert is_timestamp(stamp) and _reference(stamp)
