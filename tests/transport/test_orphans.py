"""A provider's descendants: a provider that exits while a grandchild holds its output is
a crash, and no descendant outlives its provider's teardown or the host itself."""

from __future__ import annotations

from pathlib import Path

import anyio
import pytest

from hostd.errors import ProviderCrashed
from hostd.protocol import ContextQuery
from hostd.transport import ProviderConnection
from tests.fixtures.procs import ROOT, marked_env, python

pytestmark = pytest.mark.anyio

QUERY = ContextQuery(goal="g", max_frames=1, max_tokens=10)


def _orphaning(mode: str, pidfile: Path) -> list[str]:
    return python("tests.transport.orphaning_provider", mode, str(pidfile))


async def test_a_provider_that_exits_while_a_grandchild_holds_its_output_is_a_crash(
    tmp_path: Path,
) -> None:
    pidfile = tmp_path / "pids"
    async with anyio.create_task_group() as tg:
        conn = await ProviderConnection.open(
            "exits",
            _orphaning("exit_mid_query", pidfile),
            task_group=tg,
            env=marked_env(),
            cwd=ROOT,
            handshake_timeout=30,
            grace=0.5,
        )
        with anyio.fail_after(20), pytest.raises(ProviderCrashed) as crashed:
            await conn.query(QUERY)
        assert "exited" in crashed.value.message
        assert not conn.alive
        await conn.aclose()
    assert pidfile.read_text().split()  # the grandchild was there (and is gone: fixture)


async def test_the_fan_out_reports_such_a_leg_crashed_not_timed_out(tmp_path: Path) -> None:
    from hostd.engine import Host, ProviderSpec

    spec = ProviderSpec(
        "exits",
        _orphaning("exit_mid_query", tmp_path / "pids"),
        env=marked_env(),
        cwd=str(ROOT),
        timeout_ms=30_000,  # far beyond the crash: a timeout would mean it was missed
    )
    async with Host([spec]) as host:
        with anyio.fail_after(25):
            fan = await host.query_all(QUERY, 100)
    assert fan.reports["exits"].status == "crashed"
