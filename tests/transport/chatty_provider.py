"""A healthy provider that writes one stderr line per query: ``stderr for <goal>``.

``python -m tests.transport.chatty_provider``.
"""

from __future__ import annotations

import sys

from hostd.protocol import ContextQuery, ContextQueryResult
from hostd.provider import run_stdio
from tests.fixtures.healthy_provider import HealthyProvider


class ChattyProvider(HealthyProvider):
    async def query(self, query: ContextQuery) -> ContextQueryResult:
        sys.stderr.write(f"stderr for {query.goal}\n")
        sys.stderr.flush()
        return await super().query(query)


if __name__ == "__main__":
    run_stdio(ChattyProvider("chatty", frames=1))
