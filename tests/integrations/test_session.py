"""The retrievers' daemon session: an async call cancelled while it waits for a daemon."""

from __future__ import annotations

import asyncio
import importlib
import threading
from pathlib import Path
from typing import Any

import anyio
import pytest


@pytest.mark.parametrize("module", ["langchain", "llama_index"])
def test_cancelling_an_async_call_stops_its_wait_for_the_daemon(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, module: str
) -> None:
    adapter = importlib.import_module(f"hostd.integrations.{module}")
    attempts = 0
    waiting = threading.Event()
    connect_unix = anyio.connect_unix

    async def counted(path: Any) -> Any:  # each attempt to reach the daemon's socket
        nonlocal attempts
        attempts += 1
        if attempts == 2:  # it tried, and tries again: the wait is under way
            waiting.set()
        return await connect_unix(path)

    monkeypatch.setattr(anyio, "connect_unix", counted)
    # Nothing listens at the socket, and the call would wait past the guards below (and,
    # for a clear failure, not past the test's own timeout).
    retriever = adapter.HostdRetriever(connect=tmp_path / "none.sock", wait=90)

    async def cancelled_call() -> int:
        ask = retriever.ainvoke if module == "langchain" else retriever.aretrieve
        call = asyncio.ensure_future(ask("why does the retry loop give up"))
        try:
            assert await asyncio.to_thread(waiting.wait, 30)  # a hang guard
            call.cancel()
            await asyncio.wait([call], timeout=30)  # a hang guard: the cancel ends it
            assert call.cancelled()
            return attempts
        finally:
            if not call.done():  # its worker thread waits out the 90 s, then it ends
                await asyncio.wait([call])

    at_cancel = asyncio.run(cancelled_call())
    retriever.close()  # the session's loop thread ends: nothing can try again after it
    # The attempts stopped when the cancel was delivered, not at the next attempt or later.
    assert attempts == at_cancel, f"{attempts - at_cancel} attempts after the cancel"
    assert not [t for t in threading.enumerate() if t.name == "hostd-adapter"]
