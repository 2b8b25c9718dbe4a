"""A check whose call missed its deadline is one failure, not the first of many.

check-provider waits a call's deadline more for the late reply: one that comes is
reported on the failed row (how late: the provider works, only too slowly), and the
next check runs on a provider that is free again; the row names the likely causes.
Here the provider is in memory, so the test is both sides of the clock: nothing
answers the first query within its deadline, and its reply arrives while the check
waits for it. A provider that never answers (every later check not run, saying why)
is a real child process in ``test_check_provider_as_the_daemon.py``.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field

import anyio
import pytest

from hostd.cli._check_driver import Driver, RemoteDriver
from hostd.cli._checks import CheckResult, Deadlines, _Run
from hostd.protocol import (
    ContextQuery,
    ContextQueryResult,
    FrameIdentity,
    HandshakeAck,
    VerifyResponse,
)
from hostd.transport.bindings import find_binding

#: A call's deadline: nothing answers within it, whatever the machine's speed.
_DEADLINE_S = 0.05
_QUERY = ContextQuery(goal="how is the configuration loaded", max_frames=1, max_tokens=100)
#: The likely causes, as every missed call's row names them.
_CAUSES = (
    "either its query takes longer than that (--timeout-ms MS allows more here, timeout_ms "
    "in its [[provider]] of hostd.toml), or synchronous work blocks the provider's event "
    "loop (time.sleep or a blocking HTTP call inside async def query: await asyncio.sleep "
    "instead, or run it in a thread with anyio.to_thread.run_sync)"
)


@dataclass
class _Child:
    """A JSON-RPC provider in memory: it answers each request at once with no frame,
    but the first, whose reply it hands to ``late`` (the provider was busy)."""

    exited: anyio.Event = field(default_factory=anyio.Event)
    returncode: int | None = None
    driver: Driver | None = None
    late: list[bytes] = field(default_factory=list)
    answered: int = 0

    async def send(self, data: bytes) -> None:
        assert self.driver is not None
        request = json.loads(data)
        result = {"frames": [], "truncated": False}
        reply = json.dumps({"jsonrpc": "2.0", "id": request["id"], "result": result}) + "\n"
        self.answered += 1
        if self.answered == 1:
            self.late.append(reply.encode())
        else:
            self.driver.on_line(reply.encode())


@dataclass
class _Waiting(Driver):
    """The driver, but the late reply arrives once it waits for it."""

    late: list[bytes] = field(default_factory=list)

    async def catch_up(self, timeout_s: float) -> float | None:
        for line in self.late:
            self.on_line(line)
        return await super().catch_up(timeout_s)


async def _ask(d: Driver | RemoteDriver, run: _Run, name: str) -> None:
    await d.query(_QUERY)
    run.results.append(CheckResult(name, True, "answered"))


@pytest.mark.anyio
async def test_a_late_reply_is_reported_on_its_row_and_the_next_check_runs() -> None:
    codec = find_binding("jsonrpc").codec
    assert codec is not None
    child = _Child()
    driver = _Waiting(child, codec("p"), _DEADLINE_S, late=child.late)
    child.driver = driver
    run = _Run(driver, Deadlines.of(_DEADLINE_S), "p")
    await run.step("query", _ask(driver, run, "query"))
    await run.step("budget honesty", _ask(driver, run, "budget honesty"))
    query, budget = run.results
    assert not query.passed
    missed = re.escape(Deadlines.of(_DEADLINE_S).call.missed())
    said = rf"{missed}; it answered \d+ ms late \(after \d+ ms\): {re.escape(_CAUSES)}"
    assert re.fullmatch(said, query.detail), query.detail
    # The provider was free again: the next check ran and was judged on its own answer.
    assert (budget.name, budget.passed, budget.detail) == ("budget honesty", True, "answered")
    assert driver.overdue is None


@dataclass
class _Silent:
    """A handshaken remote provider that never answers a query."""

    ack: HandshakeAck | None = None

    async def query(self, query: ContextQuery) -> ContextQueryResult:
        await anyio.sleep_forever()
        raise AssertionError("never answers")

    async def verify(self, frames: list[FrameIdentity]) -> VerifyResponse:
        raise AssertionError("not asked")


@pytest.mark.anyio
async def test_a_remote_query_past_its_deadline_names_the_likely_causes() -> None:
    async def opener(_timeout_s: float) -> _Silent:
        return _Silent()

    driver = RemoteDriver(opener, _DEADLINE_S, link=_Silent())
    run = _Run(driver, Deadlines.of(_DEADLINE_S), "r", local=False)
    await run.step("query", _ask(driver, run, "query"))
    (query,) = run.results
    # An HTTP exchange past its deadline is dropped: no late reply is waited for.
    assert query.detail == f"{Deadlines.of(_DEADLINE_S).call.missed()}: {_CAUSES}"
    assert run.stalled is None
