"""Token cost, digests and line ranges: the byte-level rules (B3, P4, F5, D1, F17)."""

from __future__ import annotations

import hashlib
import re
from enum import StrEnum

__all__ = [
    "DIGEST_RE",
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


def address_line_range(data: bytes, range: str | None) -> bytes:  # noqa: A002 - wire name
    """The exact bytes a ``file`` provenance ``range`` addresses (F17).

    Lines split on LF only, each line keeps its LF, CR is content, a final
    unterminated line runs to EOF and a final LF opens no extra line. Lines are
    1-indexed and the end is inclusive; an end past the last line clamps. An
    absent range (``None``) is the whole resource; an empty string is not.
    """
    if range is None:
        return data
    m = _RANGE_RE.fullmatch(range)
    if m is None:
        raise UnverifiableRange(
            RangeProblem.UNRECOGNISED, range, "not L<n> or L<n>-<m> (1-indexed, no zeros or signs)"
        )
    start = int(m.group(1))
    end = int(m.group(2)) if m.group(2) is not None else start
    if end < start:
        raise UnverifiableRange(RangeProblem.INVERTED, range, f"end {end} precedes start {start}")
    # Offsets of every line start. Python ints are unbounded, so an end beyond any
    # machine integer clamps like any other (the vectors include one).
    starts = [0]
    pos = data.find(b"\n")
    while pos != -1:
        starts.append(pos + 1)
        pos = data.find(b"\n", pos + 1)
    line_count = len(starts) if starts[-1] < len(data) else len(starts) - 1
    if start > line_count:
        raise UnverifiableRange(
            RangeProblem.START_PAST_END,
            range,
            f"starts at line {start} but the resource has {line_count} line(s)",
        )
    end = min(end, line_count)
    lo = starts[start - 1]
    hi = starts[end] if end < len(starts) else len(data)
    return data[lo:hi]
