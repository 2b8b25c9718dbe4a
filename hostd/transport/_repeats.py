"""Warnings a peer can repeat at will: past a token bucket, one costs a count, not a line.

Owns ``RepeatedEvents``, for the warnings a peer can cause as often as it likes: a
client once per connection it opens (refused and evicted connections,
unauthenticated or over-long first lines, auth timeouts: the daemon's), a provider
once per query (an MCP server's stray stdout lines, its failing tools: the MCP
binding's). Each event name has its own bucket, the ``TokenBucket`` that already
bounds a provider's stderr; past it an event is only counted, and the count is
logged as ``<event>.suppressed`` (``suppressed``: the total, ``since_last``) at most
every ``summary_s`` seconds and when its owner stops, so what was left out is
always on record.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from .process import TokenBucket

__all__ = ["RepeatedEvents"]


@dataclass(slots=True)
class _Tally:
    """One event name's bucket and what it has suppressed (total, and at the last summary)."""

    bucket: TokenBucket
    summary_at: float
    suppressed: int = 0
    summarised: int = 0
    fields: dict[str, Any] = field(default_factory=dict)


class RepeatedEvents:
    """Warnings a peer can repeat at will, each event name under its own bucket of
    ``burst`` events refilled at ``rate`` a second (see the module text)."""

    def __init__(
        self,
        logger: Any,
        *,
        burst: int = 20,
        rate: float = 1.0,
        summary_s: float = 10.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._log = logger
        self.burst = burst
        self.rate = rate
        self.summary_s = summary_s
        self._clock = clock
        self._tallies: dict[str, _Tally] = {}

    def warning(self, event: str, **fields: Any) -> bool:
        """Log ``event`` at warning if its bucket has a token, else count it; True if logged."""
        now = self._clock()
        tally = self._tallies.get(event)
        if tally is None:
            tally = self._tallies[event] = _Tally(TokenBucket(self.burst, self.rate, now), now)
        logged = tally.bucket.available(now) > 0
        if logged:
            tally.bucket.take(1)
            self._log.warning(event, **fields)
        else:
            tally.suppressed += 1
            # The summary names the event's last fields that say no more than a kind
            # (a limit, a counter's name), never a connection's own.
            tally.fields = {k: v for k, v in fields.items() if k != "connection"}
        self._due(event, tally, now)
        return logged

    def summarise(self, *, final: bool = False) -> None:
        """Log the summaries that are due (every one with a count left, when ``final``)."""
        now = self._clock()
        for event, tally in self._tallies.items():
            self._due(event, tally, now, final=final)

    def suppressed(self, event: str) -> int:
        tally = self._tallies.get(event)
        return 0 if tally is None else tally.suppressed

    def _due(self, event: str, tally: _Tally, now: float, *, final: bool = False) -> None:
        if tally.suppressed > tally.summarised and (
            final or now - tally.summary_at >= self.summary_s
        ):
            self._log.warning(
                f"{event}.suppressed",
                suppressed=tally.suppressed,
                since_last=tally.suppressed - tally.summarised,
                **tally.fields,
            )
            tally.summarised = tally.suppressed
            tally.summary_at = now
