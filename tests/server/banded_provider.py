"""A healthy provider whose scores sit in a chosen band, for contested-budget tests.

``python -m tests.server.banded_provider --name N --low L --high H [--frames K]
[--size BYTES]``: the healthy fixture's frames, with score ``L + (H - L) × s`` where
``s`` is the fixture's own descending score in (0, 1).
"""

from __future__ import annotations

import argparse

from hostd.protocol import ContextFrame, ContextQuery
from hostd.provider import run_stdio
from tests.fixtures.healthy_provider import HealthyProvider


class BandedProvider(HealthyProvider):
    def __init__(self, name: str, frames: int, size: int, low: float, high: float) -> None:
        super().__init__(name, frames, size=size)
        self.low = low
        self.high = high

    def _frame(self, i: int, query: ContextQuery) -> ContextFrame:
        frame = super()._frame(i, query)
        assert frame.score is not None
        score = round(self.low + (self.high - self.low) * frame.score, 4)
        return frame.model_copy(update={"score": score})


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--name", default="banded")
    parser.add_argument("--frames", type=int, default=40)
    parser.add_argument("--size", type=int, default=120)
    parser.add_argument("--low", type=float, default=0.0)
    parser.add_argument("--high", type=float, default=1.0)
    args = parser.parse_args()
    run_stdio(BandedProvider(args.name, args.frames, args.size, args.low, args.high))


if __name__ == "__main__":
    main()
