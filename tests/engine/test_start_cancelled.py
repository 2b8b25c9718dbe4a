"""A provider's start that hostd itself cancels (the host closing under it: hostd
stopping, a one-shot command ending, an MCP client gone) is not the provider's failure:
logged ``provider.start.cancelled`` at info, never ``provider.start.failed`` as a crash,
and not counted in its health."""

from __future__ import annotations

from typing import Any

import anyio
import pytest
from anyio.abc import TaskGroup, TaskStatus

from hostd.engine import Host
from hostd.errors import ShuttingDown
from hostd.transport.process._connection import start_in_clean_context
from tests.engine._helpers import healthy
from tests.fixtures.log_events import events

pytestmark = pytest.mark.anyio


async def test_a_start_cancelled_by_the_host_closing_is_not_logged_as_a_crash() -> None:
    entered = anyio.Event()

    async def held_open(spec: Any, *, task_group: TaskGroup, **kw: Any) -> Any:
        # A connection whose session has not begun when the host closes: held, as an
        # MCP server's is while its SDK session starts.
        async def serve(*, task_status: TaskStatus[Any]) -> None:
            entered.set()
            await anyio.sleep_forever()

        return await start_in_clean_context(task_group, serve)

    with events() as seen:
        async with Host([healthy("alpha")], start="lazy") as host:
            pool = host.pool
            pool.launcher.open = held_open  # type: ignore[method-assign]  # the test's hook
            slot = pool.slots["alpha"]
            pool.begin_start(slot)
            with anyio.fail_after(60):  # a hang guard
                await entered.wait()
        # Leaving the block closed the pool under the start.
    assert seen.count("provider.start.failed") == 0, seen.seen
    (cancelled,) = [e for e in seen.seen if e["event"] == "provider.start.cancelled"]
    assert cancelled["log_level"] == "info" and cancelled["provider"] == "alpha"
    assert slot.health.consecutive_failures == 0


async def test_a_start_whose_task_group_is_cancelled_says_hostd_is_closing() -> None:
    async def never(*, task_status: TaskStatus[Any]) -> None:
        await anyio.sleep_forever()

    async with anyio.create_task_group() as tg:
        tg.cancel_scope.cancel()
        with pytest.raises(ShuttingDown, match="hostd is closing"):
            await start_in_clean_context(tg, never)
