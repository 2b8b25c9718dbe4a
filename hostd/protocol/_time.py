"""F4 timestamps checked by shape and calendar, with no ``datetime`` or ``Decimal``.

Every timestamp of every frame is checked (``check_timestamp`` in ``_rules``); only
``as_of`` windows compare two, and those parse with ``parse_timestamp``.
"""

from __future__ import annotations

from functools import lru_cache

__all__ = ["is_timestamp"]

_DAYS_IN_MONTH = (31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31)


# Pure, and a provider's frames repeat their stamps (one file's mtime on every chunk of
# it, one index time on every frame): a hit costs a lookup, not the walk below.
@lru_cache(maxsize=4096)
def is_timestamp(value: str) -> bool:
    """Whether ``value`` is an F4 timestamp, exactly as ``parse_timestamp`` decides,
    without building a ``datetime`` or a ``Decimal`` (every frame's stamps are checked;
    only ``as_of`` windows compare them).

    Fixed positions and ``str.isdecimal`` (Unicode category Nd: the digits of any
    script, as the profile's regex matched them); then the calendar ``datetime``
    enforced: year 1–9999, the month's days (Gregorian leap years), hours 0–23,
    minutes and seconds 0–59. The fraction is any run of digits, never parsed.
    """
    n = len(value)
    if (
        n < 20
        or value[-1] != "Z"
        or value[4] != "-"
        or value[7] != "-"
        or value[10] != "T"
        or value[13] != ":"
        or value[16] != ":"
    ):
        return False
    # A fraction is "." and one digit or more before the "Z"; without one, "Z" is at 19.
    if n > 20 and (value[19] != "." or not value[20:-1].isdecimal()):
        return False
    year, month, day = value[0:4], value[5:7], value[8:10]
    hour, minute, second = value[11:13], value[14:16], value[17:19]
    if not (
        year.isdecimal()
        and month.isdecimal()
        and day.isdecimal()
        and hour.isdecimal()
        and minute.isdecimal()
        and second.isdecimal()
    ):
        return False
    y, mo, d = int(year), int(month), int(day)
    if not (1 <= y and 1 <= mo <= 12 and 1 <= d):
        return False
    if d > _DAYS_IN_MONTH[mo - 1] and not (
        mo == 2 and d == 29 and y % 4 == 0 and (y % 100 != 0 or y % 400 == 0)
    ):
        return False
    return int(hour) <= 23 and int(minute) <= 59 and int(second) <= 59
