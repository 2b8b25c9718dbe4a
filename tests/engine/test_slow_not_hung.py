"""Slow is not hung: one health rule for providers and the reranker, with real processes.

A process that misses its deadline but whose late replies still come is answering,
just past the deadline: restarting it would only pay its start again (a reranker
reloads its model), so it is kept. One that answers nothing is hung and restarted
after ``max_consecutive_timeouts`` misses in a row. When a reply comes is an event
the test releases (``tests.fixtures.gate``); that the host has read it is the
transport's ``provider.reply.late`` event; starts are counted by the process itself
(``--starts``) and in its health, never by elapsed time.
"""

from __future__ import annotations

import re
from pathlib import Path

import anyio
import pytest

from hostd.engine import Host, LegStatus, PoolSettings, ProviderSpec, Reranker, RestartPolicy
from hostd.transport import ProviderConnection
from tests.engine._helpers import healthy, local, query
from tests.fixtures.gate import Gate
from tests.fixtures.log_events import Events, events
from tests.fixtures.procs import ROOT, marked_env, python

pytestmark = pytest.mark.anyio

CANDIDATES = [{"key": str(i), "kind": "snippet", "title": "t", "content": "c"} for i in range(3)]
TURNS = 5  # more misses than max_consecutive_timeouts (3)


async def _wait_late(seen: Events, n: int) -> None:
    """Until the host has read ``n`` late replies, or restarted the process as hung
    (then no late reply will come: the test's asserts say what happened)."""
    await seen.until(
        lambda: seen.count("provider.reply.late") >= n or seen.count("provider.hung.restart") > 0
    )


def _reranker(mode: str, starts: Path, *extra: str) -> ProviderSpec:
    args = [mode, "--starts", str(starts), *extra]
    return ProviderSpec(
        "reranker", python("tests.fixtures.reranker", *args), env=marked_env(), cwd=str(ROOT)
    )


def _starts(path: Path) -> int:
    return len(path.read_text().splitlines())


async def test_a_reranker_whose_late_verdicts_still_come_is_not_restarted(
    tmp_path: Path,
) -> None:
    starts = tmp_path / "starts"
    with anyio.fail_after(60), events() as seen:  # a hang guard
        async with Gate() as gate:
            gate.close()
            spec = _reranker("slow", starts, "--hold-port", str(gate.port))
            details: list[str | None] = []
            async with Reranker(spec, PoolSettings(start_timeout_s=30.0)) as reranker:
                await reranker.start_all()
                for turn in range(1, TURNS + 1):
                    # Held at the gate: the host gives up at its (small) deadline.
                    outcome = await reranker.rerank("why", CANDIDATES, 0.2)
                    assert outcome.reason == "timeout"
                    details.append(outcome.detail)
                    await gate.wait_held(turn)
                    gate.open()  # lets the held verdict out, late ...
                    gate.close()  # ... and holds the next one
                    await _wait_late(seen, turn)
                health = reranker.slot.health
                alive = reranker.slot.live() is not None
    assert seen.count("provider.hung.restart") == 0
    assert alive and _starts(starts) == 1 and health.starts == 1
    # Health counts a late reply at the next leg: the last one came after the last leg.
    late = TURNS - 1
    assert (health.timeouts, health.late_replies, health.consecutive_failures) == (TURNS, late, 0)
    assert health.consecutive_timeouts == 1  # each miss since the last late verdict
    # Its fallback names the key to raise, and, once a verdict came late, that it did:
    # a longer deadline would get its verdicts.
    assert details[0] == "no verdict within 200 ms (raise [reranker] timeout_ms)"
    assert details[1:] == [
        f"no verdict within 200 ms; it answered {n} ask{'' if n == 1 else 's'} late: "
        "raise [reranker] timeout_ms"
        for n in range(1, TURNS)
    ]


async def test_a_reranker_that_answers_nothing_is_restarted(tmp_path: Path) -> None:
    starts = tmp_path / "starts"
    with anyio.fail_after(60), events() as seen:  # a hang guard
        settings = PoolSettings(start_timeout_s=30.0, grace_period_s=0.3)
        async with Reranker(_reranker("hang", starts), settings) as reranker:
            await reranker.start_all()
            for _ in range(3):  # max_consecutive_timeouts
                outcome = await reranker.rerank("why", CANDIDATES, 0.2)
                assert outcome.reason == "timeout"
                # No verdict ever came late: nothing says a longer deadline would help.
                assert outcome.detail == "no verdict within 200 ms (raise [reranker] timeout_ms)"
            assert reranker.slot.conn is None  # torn down in the background
            await reranker.start_all()  # a fresh process, joined by event
            health = reranker.slot.health
    assert seen.count("provider.hung.restart") == 1
    assert _starts(starts) == 2 and (health.starts, health.restarts) == (2, 1)
    assert health.last_failure == "hung: no reply to 3 requests in a row"
    assert health.late_replies == 0


async def test_a_provider_whose_late_replies_still_come_is_not_restarted() -> None:
    # The same rule for a provider: the slow one is kept, its process never replaced.
    policy = RestartPolicy(max_consecutive_timeouts=2)
    with anyio.fail_after(60), events() as seen:  # a hang guard
        async with Gate() as gate:
            gate.close()
            spec = healthy("slow", "--hold-port", str(gate.port), timeout_ms=200)
            async with Host([spec], start="boot", restart_policy=policy) as host:
                pid = local(host.connection("slow")).child.pid
                for turn in range(1, TURNS + 1):
                    fan = await host.query_all(query(), 500)
                    assert fan.reports["slow"].status is LegStatus.TIMEOUT
                    await gate.wait_held(turn)
                    gate.open()
                    gate.close()
                    await _wait_late(seen, turn)
                conn = host.connection("slow")
                health = host.health("slow")
    assert seen.count("provider.hung.restart") == 0
    assert isinstance(conn, ProviderConnection) and conn.child.pid == pid
    assert (health.starts, health.timeouts, health.late_replies) == (1, TURNS, TURNS - 1)


async def test_a_reranker_killed_between_asks_says_how_it_ended(tmp_path: Path) -> None:
    """Killed while idle (``kill -9``, the OOM killer): the next ask says how it ended,
    as a crash mid-call does, not only that its restart did not come in time; its
    health keeps it for ``hostd providers`` and ``status``. (Its restart's backoff is
    longer than the ask's deadline: the ask cannot wait for it.)"""
    starts = tmp_path / "starts"
    policy = RestartPolicy(base_delay_s=600.0, max_delay_s=600.0)
    with anyio.fail_after(60):  # a hang guard
        settings = PoolSettings(restart_policy=policy)
        async with Reranker(_reranker("reverse", starts), settings) as reranker:
            await reranker.start_all()
            conn = reranker.slot.live()
            assert isinstance(conn, ProviderConnection)
            conn.child.process.kill()
            await conn.child.exited.wait()
            outcome = await reranker.rerank("why", CANDIDATES, 30.0)
            row = reranker.row()
    assert outcome.reason == "crashed", outcome
    assert outcome.detail is not None
    assert outcome.detail.startswith(
        "crashed: reranker process ended; killed by SIGKILL; crashed: provider is down; "
        "next restart in "
    )
    assert row["state"] == "crashed" and _starts(starts) == 1
    assert "killed by SIGKILL" in row["health"]["last_failure"]


async def test_a_burst_that_times_out_together_is_one_miss_and_later_misses_still_add_up() -> None:
    """Requests out together that time out together (a burst on a busy provider) are one
    miss, not one each: the provider is kept. A provider that then answers nothing to
    requests sent one after another, each after the last timed out, is still hung."""
    policy = RestartPolicy(max_consecutive_timeouts=3)
    burst = 5
    with anyio.fail_after(60), events() as seen:  # a hang guard
        async with Gate() as gate:
            gate.close()  # every query held: no reply, on time or late, ever comes
            spec = healthy("slow", "--hold-port", str(gate.port), timeout_ms=300)
            async with Host([spec], start="boot", restart_policy=policy) as host:
                pid = local(host.connection("slow")).child.pid
                statuses: list[LegStatus] = []

                async def ask() -> None:
                    fan = await host.query_all(query(), 500)
                    statuses.append(fan.reports["slow"].status)

                # Each fan-out writes its leg before it first awaits: all are out
                # before any deadline can pass.
                async with anyio.create_task_group() as tg:
                    for _ in range(burst):
                        tg.start_soon(ask)
                after_burst = host.health("slow")
                kept = host.connection("slow")
                # Then one request after another, each sent after the last timed out.
                for _ in range(policy.max_consecutive_timeouts - 1):
                    fan = await host.query_all(query(), 500)
                    statuses.append(fan.reports["slow"].status)
                gone = host.connection("slow")
                health = host.health("slow")
    assert statuses == [LegStatus.TIMEOUT] * (burst + policy.max_consecutive_timeouts - 1)
    assert (after_burst.timeouts, after_burst.consecutive_timeouts) == (burst, 1)
    assert isinstance(kept, ProviderConnection) and kept.child.pid == pid
    assert seen.count("provider.hung.restart") == 1  # by the later misses, not the burst
    assert gone is None and health.last_failure == "hung: no reply to 3 requests in a row"


async def test_a_leg_that_waited_past_its_bound_for_a_restart_says_so() -> None:
    """A request naming no ``timeout_ms`` waits for a provider's start (or its restart
    after a hang), then gives its leg its own bound: a leg that times out after such a
    wait names the wait, so "no reply within 1 ms" is not all a 600 ms leg says. Its
    bound is 1 ms: no process starts within it, so every wait here outlasts it."""
    policy = RestartPolicy(max_consecutive_timeouts=2)
    waited = r"no reply within 1 ms, after waiting \d+ ms for its {}"
    with anyio.fail_after(60), events() as seen:  # a hang guard
        async with Gate() as gate:
            gate.close()  # every query held: no reply, on time or late, ever comes
            spec = healthy("slow", "--hold-port", str(gate.port), timeout_ms=1)
            async with Host([spec], restart_policy=policy) as host:
                messages = []
                for _ in range(3):  # its start; then live; then its restart as hung
                    fan = await host.query_all(query(), 500)
                    assert fan.reports["slow"].status is LegStatus.TIMEOUT
                    messages.append(fan.reports["slow"].error_message or "")
                health = host.health("slow")
    assert seen.count("provider.hung.restart") == 1 and health.restarts == 1
    assert re.fullmatch(waited.format("start"), messages[0]), messages[0]
    assert messages[1] == "no reply within 1 ms"  # live: nothing waited for
    assert re.fullmatch(waited.format("restart"), messages[2]), messages[2]
