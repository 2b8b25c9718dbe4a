"""The engine's one clock: the event loop's, read as the loop reads it.

Every deadline the engine sets (a leg's, a start's, a reranker call's), the times its
fan-out's replies land at and the latencies it reports are read here, on the clock the
transport's timers keep, so they compare without conversion. asyncio's event loop
keeps ``time.monotonic`` (``BaseEventLoop.time``, and ``anyio.current_time`` on it), so
that is read directly: one call, which also works in a pipe's read callback, outside
any task, where anyio cannot tell which loop it runs in.
"""

from __future__ import annotations

from time import monotonic

__all__ = ["now"]


def now() -> float:
    """The event loop's time, in seconds (``time.monotonic``, asyncio's loop clock)."""
    return monotonic()
