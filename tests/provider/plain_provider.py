"""A provider written the way a first-timer might: ``async def warm`` and a plain
``def query`` (blocking, as a database driver's call is). ``python -m
tests.provider.plain_provider``."""

from __future__ import annotations

import asyncio
import time

from hostd.protocol import ContextFrame, ContextQuery
from hostd.provider import Progress, make_frame, run_stdio
from tests.fixtures.healthy_provider import HealthyProvider


class PlainProvider(HealthyProvider):
    async def warm(self, progress: Progress) -> str:  # type: ignore[override]
        await asyncio.sleep(0)
        self.rows = ["Deploys happen on Tuesdays."]
        return "1 row loaded"

    def query(self, query: ContextQuery) -> list[ContextFrame]:  # type: ignore[override]
        time.sleep(0.01)  # a blocking call: run in a worker thread, not on the loop
        return [
            make_frame(
                id="r1",
                kind="snippet",
                title="t",
                citation_label="row 1",
                content=self.rows[0],
                score=0.5,
            )
        ]


if __name__ == "__main__":
    run_stdio(PlainProvider(name="plain"))
