"""providers.files under a burst: its queries run one at a time, in the order they came.

A ranking is CPU work under the GIL: run together, a burst of queries would share the
CPU and all finish late, together. When each query runs is told by events here: the
first query is held in the index (a ``threading.Event`` the test sets) until the
others have either been answered beside it or wait their turn behind it.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import anyio
import anyio.lowlevel
import anyio.to_thread
import orjson
import pytest

from hostd.protocol import ContextQuery
from hostd.provider import ProviderServer
from providers import CorpusOptions
from providers.files import FileIndex, FilesProvider
from providers.files import _index as files_index

pytestmark = pytest.mark.anyio

GOALS = ["first retry", "second retry", "third retry"]


def _line(i: int, goal: str) -> bytes:
    query = {"goal": goal, "max_frames": 3, "max_tokens": 2000}
    msg = {"jsonrpc": "2.0", "id": i, "method": "context/query", "params": {"query": query}}
    return orjson.dumps(msg) + b"\n"


class _HeldFirst:
    """``index.answer`` with the first query held until ``release`` is set."""

    def __init__(self, answer: Any) -> None:
        self._answer = answer
        self.release = threading.Event()
        self.entered: list[str] = []

    def __call__(self, query: ContextQuery) -> Any:
        self.entered.append(query.goal)
        if query.goal == GOALS[0]:
            self.release.wait(timeout=60)  # a hang guard: the test sets it
        return self._answer(query)


async def test_a_burst_of_queries_is_answered_in_the_order_it_came(tmp_path: Path) -> None:
    (tmp_path / "net.py").write_text("def retry_loop(attempts):\n    return attempts\n")
    index = FileIndex(CorpusOptions(root=tmp_path), refresh_interval_s=60.0)
    index.refresh(force=True)
    held = _HeldFirst(index.answer)
    index.answer = held  # type: ignore[method-assign] # the test holds the first query
    server = ProviderServer(FilesProvider(index))
    replied: list[int] = []
    changed = anyio.Event()

    async def ask(i: int) -> None:
        nonlocal changed
        reply = orjson.loads(await server.handle_line(_line(i, GOALS[i])) or b"{}")
        assert reply["result"]["frames"], reply
        replied.append(reply["id"])
        changed.set()
        changed = anyio.Event()

    def behind_or_answered() -> int:
        turns = getattr(server, "query_turns", None)
        waiting = turns.statistics().tasks_waiting if turns is not None else 0
        return waiting + len(replied)

    with anyio.fail_after(60):  # a hang guard
        async with anyio.create_task_group() as tg:
            for i in range(len(GOALS)):
                tg.start_soon(ask, i)
                await anyio.lowlevel.checkpoint()  # each request in before the next
            try:
                # The others either wait their turn behind the held first query, or (run
                # beside it) are answered while it is held.
                while True:
                    await anyio.wait_all_tasks_blocked()
                    if behind_or_answered() >= len(GOALS) - 1:
                        break
                    await changed.wait()
                assert held.entered == GOALS[:1]  # nothing else ran while it was held
            finally:
                held.release.set()
    assert replied == [0, 1, 2]
    assert held.entered == GOALS


class _HeldRefresh(FileIndex):
    """A ``FileIndex`` whose rebuilds after the first wait for ``release``; ``holding``
    is set once one waits (its refresh has read what changed)."""

    def __init__(self, root: Path) -> None:
        super().__init__(CorpusOptions(root=root), refresh_interval_s=0.0)
        self.holding = threading.Event()
        self.release = threading.Event()

    def _rebuild(self, progress: Callable[..., None] | None = None, phase: str = "index") -> None:
        if self.generation:
            self.holding.set()
            assert self.release.wait(60)  # a hang guard: the test sets it
        super()._rebuild(progress, phase)


async def test_queries_queued_behind_one_waiting_for_a_large_trees_refresh_are_not_held(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A large tree's query waits for a refresh under way (here with no time bound, so
    # only the queue can end its wait), but not once another query waits its turn.
    monkeypatch.setattr(files_index, "WAIT_WHOLE_BELOW_CHUNKS", 1)  # one chunk is large
    monkeypatch.setattr(files_index, "REFRESH_WAIT_S", float("inf"))
    net = tmp_path / "net.py"
    net.write_text("def retry_loop(attempts):\n    # gives up after three\n")
    index = _HeldRefresh(tmp_path)
    index.build()
    net.write_text("def retry_loop(attempts):\n    # gives up after five\n")
    server = ProviderServer(FilesProvider(index))
    replies: dict[int, Any] = {}
    answered = anyio.Event()

    async def ask(i: int) -> None:
        nonlocal answered
        replies[i] = orjson.loads(await server.handle_line(_line(i, GOALS[i])) or b"{}")
        answered.set()
        answered = anyio.Event()

    with anyio.fail_after(60):  # a hang guard
        async with anyio.create_task_group() as tg:
            try:
                tg.start_soon(ask, 0)  # finds the tree changed: starts the refresh, waits
                await anyio.to_thread.run_sync(index.holding.wait, 60)
                for i in (1, 2):
                    tg.start_soon(ask, i)
                    await anyio.lowlevel.checkpoint()  # each request in before the next
                while len(replies) < 2:  # answered while the refresh is still held
                    await answered.wait()
                assert sorted(replies) == [0, 1]
                assert not index.release.is_set()
            finally:
                index.release.set()
    for i in (0, 1):  # from the index before the edit, saying so
        assert "three" in replies[i]["result"]["frames"][0]["content"]
        assert replies[i]["result"]["unindexed_changes"] == 1
    # The last, with none behind it, waited for the refresh: the rebuilt index's answer.
    assert "five" in replies[2]["result"]["frames"][0]["content"]
    assert "unindexed_changes" not in replies[2]["result"]
