"""A request's log scope: its id on every event its task logs, gone with the task, and
the clock of its ``request.done`` read only when that event is written."""

from __future__ import annotations

import io
import json
from collections import Counter
from collections.abc import Iterator
from typing import Any

import anyio
import pytest

import hostd.logs as logs
from hostd.errors import RpcError
from hostd.pipeline import Pipeline
from hostd.server._api import _begin, answer_one, call_local
from tests.fixtures.logging_state import restored_logging

pytestmark = pytest.mark.anyio


@pytest.fixture(autouse=True)
def _restore_logging(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    with restored_logging(monkeypatch):
        yield


class _Daemon:
    """What the methods read of a daemon; ``host/status`` logs one warning."""

    def __init__(self) -> None:
        self.counters: Counter[str] = Counter()
        self.stopping = False
        self._n = 0

    @property
    def pipeline(self) -> Pipeline:
        raise AssertionError("no method here reaches the pipeline")

    def new_request_id(self) -> str:
        self._n += 1
        return f"t-{self._n}"

    def status(self) -> dict[str, Any]:
        # A fresh logger: warning, so the test's level writes it (and no request.done).
        logs.get_logger("test.status").warning("status.read")
        return {"ok": True}

    def request_stop(self, reason: str) -> None:
        raise AssertionError(reason)

    async def reload(self, trigger: str) -> dict[str, Any]:
        raise AssertionError(trigger)


class _Peer:
    name: str = "t"
    peer: str | None = None

    async def send(self, obj: Any) -> None:
        raise AssertionError(obj)

    def cancel(self, id_: Any) -> None:
        raise AssertionError(id_)


def _status(id_: int) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": id_, "method": "host/status"}


async def test_every_event_of_a_request_carries_its_id_and_no_other_task_sees_it() -> None:
    out = io.StringIO()
    logs.configure_logging("warning", stream=out)
    daemon = _Daemon()
    replies: list[Any] = []

    async def one(id_: int) -> None:
        line = await answer_one(daemon, _Peer(), _status(id_))
        assert line is not None
        replies.append(json.loads(line))

    async with anyio.create_task_group() as tg:  # each request in its own task
        tg.start_soon(one, 1)
        tg.start_soon(one, 2)
    assert logs.REQUEST_ID.get() is None  # the requests' ids ended with their tasks
    # In-process, the caller's own task runs the request: its id is set for the call only.
    assert await call_local(daemon, _Peer(), "host/status", None) == {"ok": True}
    logs.get_logger("test.caller").warning("caller.after")  # the caller's own, later event
    logs.flush_logs()
    events = [json.loads(line) for line in out.getvalue().splitlines()]
    assert sorted(e["request_id"] for e in events if e["event"] == "status.read") == [
        "t-1",
        "t-2",
        "t-3",
    ]
    (after,) = [e for e in events if e["event"] == "caller.after"]
    assert "request_id" not in after, after
    assert sorted(r["result"]["ok"] for r in replies) == [True, True]
    assert daemon.counters["requests_total"] == 3


async def test_an_in_process_call_leaves_its_callers_own_request_id_as_it_was() -> None:
    out = io.StringIO()
    logs.configure_logging("warning", stream=out)
    daemon = _Daemon()
    logs.bind_request("outer")  # a caller that serves a request of its own
    assert await call_local(daemon, _Peer(), "host/status", None) == {"ok": True}
    with pytest.raises(RpcError):  # a failed call too
        await call_local(daemon, _Peer(), "no/such/method", None)
    logs.get_logger("test.caller").warning("caller.after")
    logs.flush_logs()
    events = [json.loads(line) for line in out.getvalue().splitlines()]
    said = [(e["event"], e.get("request_id")) for e in events]
    assert ("status.read", "t-1") in said and ("caller.after", "outer") in said, said


@pytest.mark.parametrize(("level", "clock"), [("info", True), ("warning", False)])
def test_a_requests_start_reads_the_clock_only_when_its_done_event_is_written(
    level: str, clock: bool
) -> None:
    logs.configure_logging(level, stream=io.StringIO())
    request_id, started = _begin(_Daemon())
    assert (request_id, logs.REQUEST_ID.get()) == ("t-1", "t-1")
    assert (started > 0) is clock
