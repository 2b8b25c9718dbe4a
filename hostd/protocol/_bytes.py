"""Token cost, digests and line ranges: the byte-level rules (B3, P4, F5, D1, F17)."""

from __future__ import annotations

import hashlib
import re
from array import array
from enum import StrEnum
from itertools import accumulate

__all__ = [
    "DIGEST_RE",
    "LineIndex",
    "RangeProblem",
    "UnverifiableRange",
    "address_line_range",
    "canonical_token_cost",
    "is_sha256_digest",
    "sha256_digest",
]

#: ``sha256:<64 lowercase hex>`` (F5, D1).
DIGEST_RE = re.compile(r"sha256:[0-9a-f]{64}")

# F17 grammar: ``L<n>`` or ``L<n>-<m>``; uppercase L, no zero, no leading zeros,
# no sign, no whitespace. ``re.fullmatch`` so nothing may surround it.
_RANGE_RE = re.compile(r"L([1-9][0-9]*)(?:-([1-9][0-9]*))?")


def canonical_token_cost(content: str | None) -> int:
    """``ceil(utf8_bytes / 4)``, 0 for absent content (B3, P4)."""
    if content is None:
        return 0
    # ASCII fast path: len() equals the UTF-8 byte count only for ASCII text.
    n = len(content) if content.isascii() else len(content.encode("utf-8"))
    return (n + 3) // 4


def sha256_digest(data: bytes) -> str:
    """The ``sha256:<64 lowercase hex>`` digest of exactly these bytes."""
    return "sha256:" + hashlib.sha256(data).hexdigest()


def is_sha256_digest(value: object) -> bool:
    """Whether ``value`` is a ``sha256:`` digest of 64 lowercase hex digits."""
    return isinstance(value, str) and DIGEST_RE.fullmatch(value) is not None


class RangeProblem(StrEnum):
    """Why a range addresses nothing a verifier can digest (F17)."""

    UNRECOGNISED = "unrecognised"
    INVERTED = "inverted"
    START_PAST_END = "start_past_end"


class UnverifiableRange(ValueError):  # noqa: N818 - the protocol's own word for the outcome
    """A range that addresses nothing verifiable. Never a mismatch, never a whole-file fallback."""

    def __init__(self, reason: RangeProblem, range_: str | None, detail: str) -> None:
        super().__init__(f"unverifiable range {range_!r}: {reason.value}: {detail}")
        self.reason = reason
        self.range = range_
        self.detail = detail


class LineIndex:
    """A resource's bytes with the start of every line found once (F17): LF ends a
    line and stays in it, CR is content, a final unterminated line runs to EOF and a
    final LF opens no extra line. Addressing a range is then two lookups, not a scan
    of the whole resource; the starts are 8 bytes a line (an ``array``)."""

    __slots__ = ("count", "data", "starts")

    def __init__(self, data: bytes) -> None:
        self.data = data
        # 0, then one past every LF (summed in C, no Python loop per line).
        lengths = map(len, data.split(b"\n"))
        self.starts = array("q", accumulate(lengths, lambda at, n: at + n + 1, initial=0))
        self.starts.pop()  # the split's last piece starts no line after it
        #: Lines in the resource (F17's count).
        self.count = len(self.starts) if self.starts[-1] < len(data) else len(self.starts) - 1

    def slice(self, start: int, end: int) -> bytes:
        """Lines ``start``-``end`` (1-based, inclusive; ``end`` at most ``count``)."""
        starts = self.starts
        hi = starts[end] if end < len(starts) else len(self.data)
        return self.data[starts[start - 1] : hi]

    def address(self, range: str | None) -> bytes:  # noqa: A002 - wire name
        """The exact bytes ``range`` addresses: ``address_line_range`` without the scan."""
        if range is None:
            return self.data
        start, end = _range_lines(range)
        if start > self.count:
            raise UnverifiableRange(
                RangeProblem.START_PAST_END,
                range,
                f"starts at line {start} but the resource has {self.count} line(s)",
            )
        return self.slice(start, min(end, self.count))


#: Digits past which a line number is past the end of any file. Such a number is read as
#: ``PAST_ANY_FILE`` (an end clamps to the source, F17; a start is past its end), never
#: converted whole: past 4,300 digits Python's ``int`` refuses the string.
_MAX_LINE_DIGITS = 18
PAST_ANY_FILE = 10**_MAX_LINE_DIGITS


def line_number(digits: str) -> int:
    """An F17 range's line number (its decimal digits) as an int, ``PAST_ANY_FILE`` when
    it has more than 18 digits."""
    return int(digits) if len(digits) <= _MAX_LINE_DIGITS else PAST_ANY_FILE


def _range_lines(range: str) -> tuple[int, int]:  # noqa: A002 - wire name
    """``L<n>[-<m>]`` as its 1-based inclusive lines; a malformed or inverted range raises."""
    m = _RANGE_RE.fullmatch(range)
    if m is None:
        raise UnverifiableRange(
            RangeProblem.UNRECOGNISED, range, "not L<n> or L<n>-<m> (1-indexed, no zeros or signs)"
        )
    start = line_number(m.group(1))
    end = line_number(m.group(2)) if m.group(2) is not None else start
    if end < start:
        raise UnverifiableRange(RangeProblem.INVERTED, range, f"end {end} precedes start {start}")
    return start, end


def address_line_range(data: bytes, range: str | None) -> bytes:  # noqa: A002 - wire name
    """The exact bytes a ``file`` provenance ``range`` addresses (F17).

    Lines split on LF only, each line keeps its LF, CR is content, a final
    unterminated line runs to EOF and a final LF opens no extra line. Lines are
    1-indexed and the end is inclusive; an end past the last line clamps. An
    absent range (``None``) is the whole resource; an empty string is not.
    The resource is read only up to the range's end; addressing many ranges of one
    resource, ``LineIndex`` finds its lines once.
    """
    if range is None:
        return data
    start, end = _range_lines(range)
    # Python ints are unbounded, so an end beyond any machine integer clamps like any
    # other (the vectors include one): the walk stops at the end of the data.
    size = len(data)
    lo: int | None = None
    line, pos = 1, 0
    while pos < size:  # ``pos`` is where line ``line`` starts
        if line == start:
            lo = pos
        nl = data.find(b"\n", pos)
        pos = size if nl == -1 else nl + 1  # where it ends
        if line == end:
            break
        line += 1
    if lo is None:
        raise UnverifiableRange(
            RangeProblem.START_PAST_END,
            range,
            f"starts at line {start} but the resource has {_line_count(data)} line(s)",
        )
    return data[lo:pos]


def _line_count(data: bytes) -> int:
    """F17's count: LF ends a line, a final unterminated line counts, a final LF opens none."""
    return data.count(b"\n") + (1 if data and not data.endswith(b"\n") else 0)
