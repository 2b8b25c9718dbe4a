"""A provider whose query raises (an author's bug), for the runtime's stderr tests.

``python -m tests.provider.raising_provider``: every query fails in ``lookup``."""

from __future__ import annotations

from hostd.protocol import ContextQuery, ContextQueryResult
from hostd.provider import run_stdio
from tests.fixtures.healthy_provider import HealthyProvider


def lookup(rows: tuple[str, ...]) -> str:
    return rows[3]  # the bug: there are fewer rows


class RaisingProvider(HealthyProvider):
    async def query(self, query: ContextQuery) -> ContextQueryResult:
        lookup(("a",))
        return await super().query(query)


if __name__ == "__main__":
    run_stdio(RaisingProvider(name="raising"))
