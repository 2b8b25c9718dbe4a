"""The binding's CPU work runs in a worker thread and stops between sources when its
leg is let go; what it had cut by then is kept."""

from __future__ import annotations

import anyio
import pytest

from hostd.mcp._build import Builder, Source
from hostd.mcp._frames import Cut, Document
from hostd.protocol import ContextQuery

pytestmark = pytest.mark.anyio

QUERY = ContextQuery(goal="cache eviction", max_frames=5, max_tokens=500)


def _sources(n: int) -> list[Source]:
    text = "The cache evicts cold entries first.\n" * 200
    return [
        Source((Document("resources/read", text, f"memo://{i}", f"memo {i}"),), f"memo://{i}")
        for i in range(n)
    ]


async def test_the_work_is_done_off_the_loop_and_each_source_kept_once_cut() -> None:
    kept: list[str] = []
    loop_ran = anyio.Event()

    def keep(source: Source, pieces: list[Cut]) -> None:
        assert pieces and source.key is not None
        kept.append(source.key)

    async def beside() -> None:
        loop_ran.set()  # the event loop was free while the worker cut

    async with anyio.create_task_group() as tg:
        tg.start_soon(beside)
        result = await Builder("p").build([], _sources(6), QUERY, kind="doc", server="s", keep=keep)
    assert loop_ran.is_set()
    assert sorted(kept) == [f"memo://{i}" for i in range(6)]
    assert 0 < len(result.frames) <= 5


async def test_a_cancelled_build_stops_at_the_next_source() -> None:
    kept: list[str] = []
    with anyio.CancelScope() as scope:

        def keep(source: Source, pieces: list[Cut]) -> None:
            kept.append(str(source.key))
            scope.cancel()  # the leg is let go as soon as the first source is cut

        await Builder("p").build([], _sources(50), QUERY, kind="doc", server="s", keep=keep)
    assert scope.cancelled_caught
    # The build ended at the cancel, before the loop could take a second hand-off: the
    # worker (stopped at its next check) had handed over the first source only.
    assert kept == ["memo://0"]
