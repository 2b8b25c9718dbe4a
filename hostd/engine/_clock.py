"""The engine's one clock: the event loop's, read through anyio.

Every deadline the engine sets (a leg's, a start's, a reranker call's), the times its
fan-out's replies land at and the latencies it reports are read here, on the clock the
transport's timers keep, so they compare without conversion.
"""

from __future__ import annotations

import anyio

__all__ = ["now"]


def now() -> float:
    """The event loop's time, in seconds (``anyio.current_time``)."""
    return anyio.current_time()
