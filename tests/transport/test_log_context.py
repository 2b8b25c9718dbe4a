"""Long-lived connection tasks never carry the request id of the request that started them.

The daemon's request id is ``hostd.logs.REQUEST_ID``, a ContextVar a request's task sets
and the processor ``configure_logging`` installs first puts on every event
(``_add_request_id``): the events here go through that processor.
"""

from __future__ import annotations

from collections.abc import Iterator, MutableMapping
from contextlib import contextmanager
from typing import Any

import anyio
import pytest
import structlog

from hostd.logs import REQUEST_ID, _add_request_id
from hostd.protocol import ContextQuery
from hostd.transport import ProviderConnection
from hostd.transport.process._connection import start_in_clean_context
from tests.fixtures.procs import ROOT, marked_env, python

pytestmark = pytest.mark.anyio


class _Capture:
    """A structlog processor keeping every event (with its request id); ``seen(line)``
    is set once a ``provider.stderr`` event with that line arrived."""

    def __init__(self) -> None:
        self.entries: list[MutableMapping[str, Any]] = []
        self.waiting: dict[str, anyio.Event] = {}

    def __call__(self, _logger: Any, method: str, event: MutableMapping[str, Any]) -> Any:
        self.entries.append(dict(event))
        if event.get("event") == "provider.stderr" and event.get("line") in self.waiting:
            self.waiting[event["line"]].set()
        raise structlog.DropEvent

    def seen(self, line: str) -> anyio.Event:
        return self.waiting.setdefault(line, anyio.Event())


@contextmanager
def _capture() -> Iterator[_Capture]:
    cap = _Capture()
    old = structlog.get_config()
    structlog.configure(processors=[_add_request_id, cap])
    try:
        yield cap
    finally:
        structlog.configure(**old)


def _q(goal: str) -> ContextQuery:
    return ContextQuery(goal=goal, max_frames=1, max_tokens=1000)


async def test_a_lazily_started_providers_stderr_never_carries_the_first_request_id() -> None:
    with _capture() as cap:
        async with anyio.create_task_group() as tg:
            token = REQUEST_ID.set("first")
            try:
                conn = await ProviderConnection.open(
                    "chatty",
                    python("tests.transport.chatty_provider"),
                    task_group=tg,
                    env=marked_env(),
                    cwd=str(ROOT),
                    handshake_timeout=30,
                )
                first = cap.seen("stderr for one")
                await conn.query(_q("one"))
            finally:
                REQUEST_ID.reset(token)
            token = REQUEST_ID.set("second")
            try:
                second = cap.seen("stderr for two")
                await conn.query(_q("two"))
            finally:
                REQUEST_ID.reset(token)
            with anyio.fail_after(30):
                await first.wait()
                await second.wait()
            await conn.aclose()
    stderr = [e for e in cap.entries if e["event"] == "provider.stderr"]
    assert [e["line"] for e in stderr] == ["stderr for one", "stderr for two"]
    assert all("request_id" not in e for e in stderr), stderr
    # The request's own events still carry it: only the long-lived tasks are detached.
    started = [e for e in cap.entries if e["event"] == "provider.process.started"]
    assert started and started[0].get("request_id") == "first"


async def test_start_in_clean_context_hands_back_the_value_and_the_error() -> None:
    seen: list[str | None] = []

    async def ok(*, task_status: Any) -> None:
        seen.append(REQUEST_ID.get())
        task_status.started("value")

    async def boom(*, task_status: Any) -> None:
        raise LookupError("before started")

    async with anyio.create_task_group() as tg:
        token = REQUEST_ID.set("r")
        try:
            assert await start_in_clean_context(tg, ok) == "value"
            with pytest.raises(LookupError, match="before started"):
                await start_in_clean_context(tg, boom)
        finally:
            REQUEST_ID.reset(token)
    assert seen == [None]
