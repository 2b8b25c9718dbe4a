"""The engine's clock is the event loop's: deadlines it sets fire on the loop's timers."""

from __future__ import annotations

import asyncio

import anyio
import pytest

from hostd.engine._clock import now

pytestmark = pytest.mark.anyio


async def test_the_engine_clock_reads_what_the_loop_and_anyio_read() -> None:
    loop = asyncio.get_running_loop()
    before = loop.time()
    ours = now()
    after = anyio.current_time()
    assert before <= ours <= after


async def test_a_deadline_read_on_the_engine_clock_is_one_the_loops_timer_keeps() -> None:
    # A timer set at now() + 0.05 on the loop fires no earlier than that instant as the
    # engine reads it: the two clocks are one (a second clock would drift apart).
    loop = asyncio.get_running_loop()
    fired = asyncio.Event()
    at: list[float] = []
    deadline = now() + 0.05

    def fire() -> None:
        at.append(now())
        fired.set()

    loop.call_at(deadline, fire)
    await fired.wait()
    assert at[0] >= deadline


def test_the_engine_clock_is_readable_outside_any_task() -> None:
    # A pipe's read callback runs outside any task: the clock must be readable there.
    seen: list[float] = []

    async def main() -> None:
        loop = asyncio.get_running_loop()
        done: asyncio.Future[None] = loop.create_future()

        def read() -> None:
            seen.append(now())
            done.set_result(None)

        loop.call_soon(read)
        await done

    asyncio.run(main())
    assert seen and seen[0] > 0
