"""The reranker process's log: a failure told once as it begins or changes, its
repeats at debug, as a ``[reranker] url`` server's are (real child processes)."""

from __future__ import annotations

from collections.abc import MutableMapping
from typing import Any

import pytest
from structlog.testing import capture_logs

from hostd.engine import PoolSettings, ProviderSpec, Reranker, RestartPolicy
from tests.fixtures.procs import ROOT, marked_env

pytestmark = pytest.mark.anyio

CANDIDATES = [{"key": str(i), "kind": "snippet", "title": "t", "content": "c"} for i in range(3)]

#: A reranker that exits at every start, saying why.
_DIES = ["python", "-c", "import sys; print('no model here', file=sys.stderr); sys.exit(3)"]


def _rerank_events(logs: list[MutableMapping[str, Any]]) -> list[tuple[str, str]]:
    return [(e["log_level"], e["event"]) for e in logs if e["event"].startswith("rerank.")]


async def test_a_parked_reranker_warns_once_and_logs_each_repeat_at_debug() -> None:
    clock = [1000.0]
    # Parked at its first failed start; its retry an hour away, and its detail counting
    # down to it as the clock moves on: each composition after is the same failure.
    policy = RestartPolicy(max_attempts=1, retry_failed_after_s=3600.0)
    settings = PoolSettings(restart_policy=policy, clock=lambda: clock[0])
    spec = ProviderSpec("reranker", _DIES, env=marked_env(), cwd=str(ROOT))
    async with Reranker(spec, settings) as reranker:
        with capture_logs() as logs:
            outcomes = []
            for _ in range(3):
                outcomes.append(await reranker.rerank("why", CANDIDATES, 60.0))
                clock[0] += 10.0
    assert [o.reason for o in outcomes] == ["unavailable"] * 3
    assert "next retry in 3590 s" in (outcomes[1].detail or "")  # not the same words
    assert _rerank_events(logs) == [
        ("warning", "rerank.failed"),  # parked: told
        ("debug", "rerank.failed"),
        ("debug", "rerank.failed"),
    ]
    assert reranker.tally.fallbacks == 3  # each composition still counts its fallback


async def test_a_reranker_parked_by_a_failure_it_had_before_is_told_so() -> None:
    # Its first start fails (crashed, restarted at once), its second parks it: the same
    # words, yet a turn (it is no longer restarted on its own), so both are warnings.
    policy = RestartPolicy(base_delay_s=0.0, max_attempts=2, retry_failed_after_s=3600.0)
    spec = ProviderSpec("reranker", _DIES, env=marked_env(), cwd=str(ROOT))
    async with Reranker(spec, PoolSettings(restart_policy=policy)) as reranker:
        with capture_logs() as logs:
            for _ in range(3):
                await reranker.rerank("why", CANDIDATES, 60.0)
    assert _rerank_events(logs) == [
        ("warning", "rerank.failed"),  # its start failed
        ("warning", "rerank.failed"),  # parked
        ("debug", "rerank.failed"),
    ]
