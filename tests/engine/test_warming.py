"""Readiness is part of the protocol: a provider that is up but not ready yet is
``warming``, never a failure; a start has its own deadline; progress is heard.

Real child processes (``tests.fixtures.warming_provider``) whose start and warm-up
wait on files the test creates, so every verdict follows from events, not speed."""

from __future__ import annotations

import contextlib
import os
from pathlib import Path
from typing import Any

import anyio
import pytest

from hostd._hints import warming_state
from hostd.engine import Host, LegStatus, ProviderSpec
from hostd.engine._outcome import building, failure_of
from hostd.pipeline._degraded import Degraded, degradations
from hostd.transport import provider_error
from tests.engine._helpers import child_pid, healthy, query
from tests.fixtures.procs import ROOT, leftovers, marked_env, python
from tests.fixtures.warming_provider import wait_for

pytestmark = pytest.mark.anyio


def warming(pid: str = "w", *args: str, **kw: Any) -> ProviderSpec:
    kw.setdefault("timeout_ms", 30_000)
    return ProviderSpec(
        pid,
        python("tests.fixtures.warming_provider", *args),
        env=marked_env(),
        cwd=str(ROOT),
        **kw,
    )


async def test_a_bounded_request_to_a_cold_provider_says_warming_and_the_same_process_serves_next(
    tmp_path: Path,
) -> None:
    gate = tmp_path / "warm.gate"
    notes: list[dict[str, Any]] = []
    with anyio.fail_after(120):  # a hang guard
        async with Host([warming("w", "--warm-gate", str(gate))]) as host:
            slot = host.pool.slots["w"]
            fan = await host.query_all(query(), 500, timeout_ms=300)
            first = fan.reports["w"]
            await host.pool.ensure(slot)  # handshaken (it answers that at once)
            pid = child_pid(slot.conn)
            assert host.providers_list()[0]["state"] == "warming"
            # The next bounded ask comes once the host has heard a build step (an event).
            building = anyio.Event()
            if slot.conn is not None and slot.conn.readiness.progress.get("phase") == "build":
                building.set()
            host.pool.progress_listeners.append(
                lambda _p, n: building.set() if n.get("phase") == "build" else None
            )
            await building.wait()
            again = (await host.query_all(query(), 500, timeout_ms=300)).reports["w"]
            gate.touch()
            # No timeout named: the leg waits for readiness (its start deadline), then asks.
            ready = await host.query_all(query(), 500, on_progress=lambda p, n: notes.append(n))
            served_by = child_pid(slot.conn)
            health = host.health("w")
    assert first.status is LegStatus.WARMING, first
    assert first.error_code in ("starting", "warming")
    assert again.status is LegStatus.WARMING and again.error_code == "warming", again
    assert ": build " in (again.error_message or "")  # the provider's own progress
    assert ready.reports["w"].status is LegStatus.OK and ready.accepted
    assert served_by == pid is not None
    # Warming is no failure: no restart, no timeout, no hang count.
    assert (health.starts, health.restarts, health.timeouts) == (1, 0, 0)
    assert health.consecutive_timeouts == 0 and health.warming == 2
    assert any(n.get("state") == "ready" for n in notes)
    assert leftovers() == []


async def test_a_request_waits_for_a_cold_provider_no_longer_than_its_ready_wait(
    tmp_path: Path,
) -> None:
    """``ready_wait_ms``: the ready provider answers, the one still warming up is
    reported warming with the wait it was given, not waited for up to its start
    deadline (an hour: the hang guard would end the test first). Its warm-up gate stays
    shut throughout, so the verdict follows from no speed."""
    gate = tmp_path / "warm.gate"
    cold = warming("w", "--warm-gate", str(gate), start_timeout_s=3_600)
    with anyio.fail_after(120):  # a hang guard
        async with Host([healthy("h"), cold]) as host:
            await host.pool.ready(host.pool.slots["h"])  # ready: its leg is no race
            fan = await host.query_all(query(), 500, ready_wait_ms=200)
            gate.touch()
            health = host.health("w")
    ok, cold_leg = fan.reports["h"], fan.reports["w"]
    assert ok.status is LegStatus.OK and {pid for pid, _ in fan.accepted} == {"h"}, ok
    assert cold_leg.status is LegStatus.WARMING, cold_leg
    assert cold_leg.error_code in ("starting", "warming")
    assert "not ready within 200 ms" in (cold_leg.error_message or ""), cold_leg
    assert (health.restarts, health.timeouts) == (0, 0)  # warming is no failure


async def _started_in(host: Host, phase: str) -> None:
    """Start provider ``w`` and return once the host has heard it warm up in ``phase``."""
    slot = host.pool.slots["w"]
    await host.pool.ensure(slot)
    heard = anyio.Event()
    host.pool.progress_listeners.append(
        lambda _p, n: heard.set() if n.get("phase") == phase else None
    )
    if slot.conn is not None and slot.conn.readiness.progress.get("phase") == phase:
        heard.set()
    await heard.wait()


async def _warming_leg(tmp_path: Path, phase: str) -> dict[str, Any]:
    """The wire report of a bounded ask to a provider warming in ``phase``, asked once the
    host has heard that phase (an event)."""
    gate = tmp_path / f"{phase}.gate"
    spec = warming("w", "--warm-gate", str(gate), "--phase", phase)
    with anyio.fail_after(120):  # a hang guard
        async with Host([spec]) as host:
            await _started_in(host, phase)
            report = (await host.query_all(query(), 500, timeout_ms=300)).reports["w"]
            gate.touch()
    assert report.status is LegStatus.WARMING, report
    return report.to_wire()


async def test_a_warming_leg_says_what_the_provider_is_doing_by_its_phase(
    tmp_path: Path,
) -> None:
    """A provider loading what an earlier run saved is not said to build its index."""
    loading = await _warming_leg(tmp_path, "load")
    building = await _warming_leg(tmp_path, "embed")
    assert loading["error"]["phase"] == "load" and building["error"]["phase"] == "embed"
    said = warming_state(loading) or ""
    assert said.startswith("still loading its saved index ("), said
    assert ": load " in said, said  # the provider's figure, as before
    assert (warming_state(building) or "").startswith("still building its index ("), building


async def test_a_request_begun_while_a_provider_warms_hears_where_it_stands_at_once(
    tmp_path: Path,
) -> None:
    """A model load reports one step, then nothing until it is loaded: a request begun
    after that step is told it when it starts, not when the load ends. The gate stays
    shut throughout, so whatever the request heard came before the provider's next step."""
    gate = tmp_path / "load.gate"
    spec = warming(
        "w", "--warm-gate", str(gate), "--steps", "1", "--phase", "load model", "--quiet"
    )
    told: list[dict[str, Any]] = []
    with anyio.fail_after(120):  # a hang guard
        async with Host([spec]) as host:
            await _started_in(host, "load model")
            fan = await host.query_all(
                query(), 500, timeout_ms=300, on_progress=lambda _p, n: told.append(n)
            )
            gate.touch()
    report = fan.reports["w"]
    assert [n.get("phase") for n in told] == ["load model"], told
    # The leg ends saying what the request was last told the provider was doing.
    assert report.status is LegStatus.WARMING and report.phase == "load model", report


async def test_a_start_slower_than_the_old_five_seconds_is_served_not_killed(
    tmp_path: Path,
) -> None:
    # The provider answers no handshake until the gate exists; the test holds the gate
    # shut past the old fixed 5 s limit (a deliberately slow start, not a wait for an
    # event), and nothing here depends on how fast the machine is.
    gate = tmp_path / "handshake.gate"
    spec = warming("slow", "--handshake-gate", str(gate), timeout_ms=2000)
    results: list[Any] = []
    with anyio.fail_after(120):  # a hang guard
        async with Host([spec], start="lazy") as host:

            async def ask() -> None:
                results.append(await host.query_all(query(), 500))  # names no timeout_ms

            async with anyio.create_task_group() as tg:
                tg.start_soon(ask)
                await anyio.sleep(6)  # the slow start the test is about
                gate.touch()
            health = host.health("slow")
    report = results[0].reports["slow"]
    assert report.status is LegStatus.OK, report
    assert (health.starts, health.restarts, health.consecutive_failures) == (1, 0, 0)


async def test_a_start_past_its_own_deadline_is_cut_and_says_so(tmp_path: Path) -> None:
    spec = warming("stuck", "--handshake-gate", str(tmp_path / "never"), start_timeout_s=0.5)
    with anyio.fail_after(60):  # a hang guard
        async with Host([spec], start="lazy", grace_period_s=0.3) as host:
            fan = await host.query_all(query(), 500)
    report = fan.reports["stuck"]
    assert report.status is LegStatus.TIMEOUT and report.error_code == "handshake_timeout"


async def test_boot_start_reports_progress_through_providers_list(tmp_path: Path) -> None:
    gate = tmp_path / "warm.gate"
    with anyio.fail_after(120):  # a hang guard
        async with Host([warming("w", "--warm-gate", str(gate), "--steps", "5")]) as host:
            await host.pool.ensure(host.pool.slots["w"])
            row = host.providers_list()[0]
            gate.touch()
            states = await host.warm_all()
            after = host.providers_list()[0]
    assert row["state"] == "warming" and row["health"]["readiness"] == "warming"
    assert states == {"w": "ready"}
    assert after["state"] == "ready" and after["health"]["progress"]["state"] == "ready"


def test_a_warming_answer_is_told_in_hostds_words_with_the_providers_progress() -> None:
    # What a provider that is up but not ready answers (hostd.provider's refusal).
    exc = provider_error(
        {
            "code": -32006,
            "message": "still indexing, try again",
            "data": {"cgp_code": "unavailable", "warming": True},
        }
    )
    progress = {"state": "warming", "phase": "embed", "done": 64, "total": 449}
    status, code, message, _ = failure_of(exc, progress)
    assert (status, code) == (LegStatus.WARMING, "warming")
    assert message == "provider warming, answered not ready: embed 64/449"
    assert failure_of(exc)[2] == "provider warming, answered not ready"
    # Any other unavailable answer is the provider's error, reported by size only.
    other = provider_error({"code": -32006, "message": "down", "data": {"cgp_code": "unavailable"}})
    assert failure_of(other, progress)[:2] == (LegStatus.ERROR, "unavailable")


async def test_an_answer_given_while_its_provider_warms_is_served_as_partial(
    tmp_path: Path,
) -> None:
    """A provider that answers from what it has built so far (a semantic index embedded
    in part) is served: its leg is ok, its note says how much it searched, and the
    composition is degraded for it; the warm-up goes on, and is no fault."""
    gate = tmp_path / "warm.gate"
    spec = warming(
        "w",
        "--warm-gate",
        str(gate),
        "--steps",
        "4",
        "--phase",
        "embed",
        "--answer-meanwhile",
    )
    with anyio.fail_after(120):  # a hang guard
        async with Host([spec]) as host:
            slot = host.pool.slots["w"]
            await host.pool.ensure(slot)
            heard = anyio.Event()  # its last step: it answers from then on
            host.pool.progress_listeners.append(
                lambda _p, n: heard.set() if n.get("done") == 3 else None
            )
            if slot.conn is not None and slot.conn.readiness.progress.get("done") == 3:
                heard.set()
            await heard.wait()
            # Its start deadline gone by, as an hour into a warm-up: no leg waits for its
            # readiness, it is asked at once.
            slot.start_deadline = anyio.current_time()
            fan = await host.query_all(query(), 500, timeout_ms=30_000)
            state = host.providers_list()[0]["state"]
            gate.touch()
            health = host.health("w")
    report = fan.reports["w"]
    assert report.status is LegStatus.OK and fan.accepted, report
    assert report.note == "partial: searched 3 of 4; still warming (embed)"
    # Its coverage, for composing: it gets at most the share of the budget it has built.
    assert fan.coverage == {"w": (3, 4)}
    assert degradations(fan.reports, {}) == (Degraded("provider_partial", "w", "warming"),)
    assert state == "warming"
    assert health.partial_legs == 0 and health.last_error is None  # no fault of its


async def test_a_request_asks_a_warming_provider_as_soon_as_it_answers_meanwhile(
    tmp_path: Path,
) -> None:
    """Within its start deadline a request waits for a warming provider's ready; one
    that says it answers meanwhile (``answering``) is asked then, not an hour later."""
    gate = tmp_path / "warm.gate"
    args = ("--warm-gate", str(gate), "--steps", "4", "--phase", "embed", "--answer-meanwhile")
    # A deadline no test outlives: only the provider's word ends the wait.
    spec = warming("w", *args, start_timeout_s=3_600)
    with anyio.fail_after(120):  # a hang guard
        async with Host([spec]) as host:
            fan = await host.query_all(query(), 500)
            gate.touch()
    report = fan.reports["w"]
    assert report.status is LegStatus.OK and fan.accepted, report
    assert report.note is not None and report.note.startswith("partial: searched 3 of 4")


async def test_an_answer_begun_while_warming_is_partial_though_ready_came_before_it(
    tmp_path: Path,
) -> None:
    """The reply says it was answered while warming (``warming``): its provider's ready
    note, written while it searched, reaches the host first and does not make it whole."""
    gate, asked = tmp_path / "warm.gate", tmp_path / "query.gate"
    args = ("--warm-gate", str(gate), "--steps", "4", "--phase", "embed", "--answer-meanwhile")
    spec = warming("w", *args, "--query-gate", str(asked))
    with anyio.fail_after(120):  # a hang guard
        async with Host([spec]) as host:
            slot = host.pool.slots["w"]
            conn = await host.pool.ensure(slot)
            heard = anyio.Event()  # its last step: it answers from then on
            host.pool.progress_listeners.append(
                lambda _p, n: heard.set() if n.get("done") == 3 else None
            )
            if conn.readiness.progress.get("done") == 3:
                heard.set()
            await heard.wait()
            slot.start_deadline = anyio.current_time()  # asked at once, whatever it says
            async with anyio.create_task_group() as tg:
                fans: list[Any] = []

                async def ask() -> None:
                    fans.append(await host.query_all(query(), 500))

                tg.start_soon(ask)
                marker = asked.with_name(asked.name + ".asked")  # the provider has it
                await anyio.to_thread.run_sync(wait_for, marker)
                gate.touch()
                await conn.readiness.settled.wait()  # its ready note, before the reply
                assert conn.readiness.state == "ready"
                asked.touch()
    report = fans[0].reports["w"]
    assert report.status is LegStatus.OK, report
    assert report.note == "partial: searched 3 of 4; still warming (embed)"
    assert fans[0].coverage == {"w": (3, 4)}  # as far as the reply says, not its ready note
    assert degradations(fans[0].reports, {}) == (Degraded("provider_partial", "w", "warming"),)


async def test_providers_list_says_a_warming_builds_time_left_once_its_rate_is_measured(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`hostd status` reads it from the daemon, which hears every note of the build: the
    rate from the phase's first note (done 0) to its latest (done 2 of 3)."""
    from hostd.cli._daemon import provider_state

    monkeypatch.setattr("hostd.transport._readiness.RATE_SPAN_S", 0.0)  # any span measures
    gate = tmp_path / "warm.gate"
    with anyio.fail_after(120):  # a hang guard
        async with Host([warming("w", "--warm-gate", str(gate), "--steps", "3")]) as host:
            slot = host.pool.slots["w"]
            await host.pool.ensure(slot)
            near = anyio.Event()  # its last step before the gate: an event, not a wait
            host.pool.progress_listeners.append(
                lambda _p, n: near.set() if n.get("done") == 2 else None
            )
            if slot.conn is not None and slot.conn.readiness.progress.get("done") == 2:
                near.set()
            await near.wait()
            (row,) = host.providers_list()
            gate.touch()
    assert row["state"] == "warming" and isinstance(row["health"]["left_s"], int), row
    # A third of the work left, at the rate of the two thirds done in the test's time.
    assert provider_state(row) == "warming (build 2/3, less than a minute left)"


async def test_a_host_closed_while_a_provider_starts_stops_it_without_the_grace(
    tmp_path: Path,
) -> None:
    """A host closing (``hostd mcp``'s client gone) while a provider's handshake is
    held: the start is given up and its process stopped at once (SIGTERM), not after
    the grace for the end of its input and again for the end of its stderr, which a
    process that reads nothing yet never gives. The grace is an hour, so the old
    ladder is caught by the hang guard whatever the machine's speed."""
    gate, started = tmp_path / "handshake.gate", tmp_path / "started"
    os.mkfifo(started)
    spec = warming(
        "held", "--handshake-gate", str(gate), "--started", str(started), start_timeout_s=3_600
    )
    try:
        with anyio.fail_after(120):  # a hang guard
            async with Host([spec], start="lazy", grace_period_s=3_600) as host:
                slot = host.pool.slots["held"]
                async with anyio.create_task_group() as tg:
                    tg.start_soon(host.pool.ensure, slot)  # the start goes on in the pool
                    # Returns once the provider's process runs; its handshake stays held.
                    await anyio.to_thread.run_sync(started.read_text, abandon_on_cancel=True)
                    tg.cancel_scope.cancel()  # the wait for it, not the start
    finally:
        with contextlib.suppress(OSError):  # a writer left waiting (the guard fired)
            os.close(os.open(started, os.O_RDWR | os.O_NONBLOCK))
    assert not gate.exists()  # never let through: the start was given up, not served
    assert leftovers() == []


@pytest.mark.parametrize(
    ("progress", "built"),
    [
        ({"phase": "embed", "done": 128, "total": 60366}, (128, 60366)),
        ({"phase": "embed", "done": 0, "total": 10}, (0, 10)),
        ({"phase": "embed", "done": 10, "total": 10}, None),  # built: no cap
        ({"phase": "embed", "total": 10}, None),
        ({"phase": "load"}, None),
        ({"done": True, "total": 10}, None),
    ],
)
def test_a_warming_answers_coverage_is_its_builds_figures_while_it_is_short_of_total(
    progress: dict[str, Any], built: tuple[int, int] | None
) -> None:
    assert building(progress) == built
