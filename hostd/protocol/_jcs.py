"""RFC 8785 JSON canonicalization (JCS), for digests over JSON values; a JSON object
that carries its own compact text (``EncodedObject``).

The protocol's fixture profile hashes frames and queries in this form; hostd uses
it wherever a digest must not depend on key order or number spelling.
"""

from __future__ import annotations

import math
from decimal import Decimal
from typing import Any

import orjson

__all__ = ["EncodedObject", "canonical_json", "es_number"]


class EncodedObject(dict[str, Any]):
    """A JSON object (a ``dict``, for every reader) that also carries ``text``, its
    compact JSON as ``orjson.dumps`` wrote it, for a writer that would encode it again
    (the daemon's wire writes it as it is): ``EncodedObject(value)``, a copy of
    ``value`` made once its members are final (dict's own constructor, no Python call
    between), then ``text`` set. Never modify it: its text would no longer be its value."""

    __slots__ = ("text",)
    text: bytes


def es_number(value: float | int) -> str:
    """Format a number as ECMAScript's ``Number.prototype.toString`` does (RFC 8785 §3.2.2.3)."""
    if isinstance(value, bool):
        raise TypeError("booleans are not numbers here")
    x = float(value)
    if not math.isfinite(x):
        raise ValueError(f"{value!r} has no JSON form")
    if x == 0:
        return "0"  # -0 too
    sign = "-" if x < 0 else ""
    # repr() gives the shortest digit string that round-trips, as ECMAScript requires.
    _, digit_tuple, exp = Decimal(repr(abs(x))).as_tuple()
    digits = "".join(map(str, digit_tuple)).rstrip("0")
    assert isinstance(exp, int)
    exp += len(digit_tuple) - len(digits)
    k = len(digits)
    n = k + exp  # value = 0.digits × 10^n
    if k <= n <= 21:
        body = digits + "0" * (n - k)
    elif 0 < n <= 21:
        body = digits[:n] + "." + digits[n:]
    elif -6 < n <= 0:
        body = "0." + "0" * (-n) + digits
    else:
        e = n - 1
        mantissa = digits if k == 1 else digits[0] + "." + digits[1:]
        body = f"{mantissa}e{'+' if e >= 0 else '-'}{abs(e)}"
    return sign + body


def canonical_json(value: Any) -> str:
    """The JCS text of a JSON value: sorted keys (UTF-16 order), no spaces, ES numbers."""
    if value is None:
        return "null"
    if value is True:
        return "true"
    if value is False:
        return "false"
    if isinstance(value, str):
        return orjson.dumps(value).decode()  # escapes as JCS does (RFC 8785 §3.2.2.2)
    if isinstance(value, int | float):
        return es_number(value)
    if isinstance(value, list | tuple):
        return "[" + ",".join(canonical_json(v) for v in value) + "]"
    if isinstance(value, dict):
        keys = sorted(value, key=lambda k: k.encode("utf-16-be"))
        return (
            "{"
            + ",".join(orjson.dumps(k).decode() + ":" + canonical_json(value[k]) for k in keys)
            + "}"
        )
    raise TypeError(f"{type(value).__name__} is not a JSON value")
