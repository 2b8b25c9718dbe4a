"""Host fan-out with real child providers: ordering, budget split, usage, health, teardown."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

import anyio
import pytest

from hostd.engine import (
    ConsentStore,
    FanOut,
    Host,
    LegReport,
    LegStatus,
    ProviderState,
    RestartPolicy,
)
from hostd.errors import BadRequest, ShuttingDown, UnknownProvider
from hostd.protocol import FrameId, canonical_token_cost
from tests.engine._helpers import adversary, healthy, query
from tests.fixtures.gate import Gate
from tests.fixtures.procs import leftovers

pytestmark = pytest.mark.anyio


async def test_every_provider_delivers_and_results_are_ordered_by_provider_and_frame_id() -> None:
    specs = [healthy("zeta", "--frames", "3"), healthy("alpha", "--frames", "4")]
    async with Host(specs) as host:
        fan = await host.query_all(query(), 1000)
    assert list(fan.reports) == ["alpha", "zeta"]
    assert all(r.status is LegStatus.OK for r in fan.reports.values())
    keys = [FrameId.of(pid, f) for pid, f in fan.accepted]
    assert keys == sorted(keys)
    assert [pid for pid, _ in fan.accepted] == ["alpha"] * 4 + ["zeta"] * 3
    assert fan.excluded == []
    assert set(fan.verification) == {FrameId.of(p, f) for p, f in fan.accepted}


async def test_the_budget_is_split_before_each_query_is_built() -> None:
    specs = [healthy("a", "--frames", "50"), healthy("b", "--frames", "50", weight=3.0)]
    async with Host(specs) as host:
        fan = await host.query_all(query(max_frames=50), 400)
    assert fan.shares == {"a": 100, "b": 300}
    assert fan.reports["a"].max_tokens == 100 and fan.reports["b"].max_tokens == 300
    # Honest providers stay within their share, so the whole stays within the budget.
    for pid in ("a", "b"):
        assert fan.reports[pid].tokens_accepted <= fan.shares[pid]
    assert fan.usage_report()["budget_consumed"] <= 400


async def test_usage_report_totals_canonical_costs_and_lists_frame_ids() -> None:
    async with Host([healthy("a", "--frames", "3")]) as host:
        fan = await host.query_all(query(), 500)
    usage = fan.usage_report()
    assert usage["budget_consumed"] == sum(canonical_token_cost(f.content) for _, f in fan.accepted)
    assert [u["frame"] for u in usage["frames"]] == [
        FrameId.of(p, f).to_wire() for p, f in fan.accepted
    ]
    one = FrameId.of(*fan.accepted[0])
    assert fan.usage_report(served=[one])["frames"] == [usage["frames"][0]]


async def test_a_provider_error_is_a_report_with_its_cgp_code() -> None:
    async with Host([healthy("a")]) as host:
        fan = await host.query_all(query(goal="refuse"), 500)
    report = fan.reports["a"]
    assert report.status is LegStatus.ERROR
    assert report.error_code == "bad_request"


async def test_a_subset_runs_only_the_named_providers_and_unknown_ids_are_refused() -> None:
    async with Host([healthy("a"), healthy("b")]) as host:
        fan = await host.query_all(query(), 500, providers=["b"])
        assert list(fan.reports) == ["b"]
        with pytest.raises(UnknownProvider):
            await host.query_all(query(), 500, providers=["nope"])


async def test_on_leg_done_sees_each_report_as_its_leg_finishes() -> None:
    seen: list[LegReport] = []

    async def record(report: LegReport) -> None:
        seen.append(report)

    async with Host([healthy("a"), healthy("b")]) as host:
        fan = await host.query_all(query(), 500, on_leg_done=record)
    assert sorted(r.provider_id for r in seen) == ["a", "b"]
    assert isinstance(fan, FanOut)


async def test_providers_list_shows_info_capabilities_state_and_health() -> None:
    async with Host([healthy("a"), healthy("b")], start="boot") as host:
        await host.query_all(query(), 500, providers=["a"])
        listed = {p["id"]: p for p in host.providers_list()}
    assert listed["a"]["info"]["name"] == "a"
    assert listed["a"]["capabilities"]["verify"] is True
    assert listed["a"]["state"] == "ready"
    assert listed["a"]["health"]["ok"] == 1 and listed["b"]["health"]["legs"] == 0
    assert listed["a"]["binding"] == "jsonrpc"


async def test_fifty_concurrent_queries_pipelined_to_one_provider_each_get_their_reply() -> None:
    async with Host([healthy("a", "--frames", "2", "--delay-ms", "30")], start="boot") as host:
        conn = host.connection("a")
        assert conn is not None
        results: dict[int, FanOut] = {}

        async def one(i: int) -> None:
            results[i] = await host.query_all(query(goal=f"goal number {i}"), 500)

        async with anyio.create_task_group() as tg:
            for i in range(50):
                tg.start_soon(one, i)
        assert host.connection("a") is conn  # one process served them all
    for i, fan in results.items():
        assert fan.reports["a"].status is LegStatus.OK
        # Each caller got the reply to its own query (the goal is echoed in the content).
        assert all(f"goal number {i}:" in (f.content or "") for _, f in fan.accepted)
        assert len(fan.accepted) == 2


async def test_a_crashed_provider_is_restarted_by_the_next_request() -> None:
    policy = RestartPolicy(base_delay_s=0.01, max_attempts=5)
    async with Host([adversary("crash", "c")], restart_policy=policy) as host:
        first = await host.query_all(query(), 500)
        assert first.reports["c"].status is LegStatus.CRASHED
        pid_before = host.health("c").starts
        second = await host.query_all(query(), 500)
        assert second.reports["c"].status is LegStatus.CRASHED
        health = host.health("c")
    assert pid_before == 1 and health.starts == 2 and health.restarts == 1
    assert health.crashes == 2 and health.consecutive_failures == 2


async def test_a_provider_that_crashed_once_after_serving_is_waited_for_and_serves() -> None:
    """A first failure since it last answered is no crash loop: the next request waits
    for its restart and is served by it, each time."""
    policy = RestartPolicy(base_delay_s=0.01, max_attempts=5)
    statuses = []
    async with Host([adversary("crash_on_goal", "c")], restart_policy=policy) as host:
        for goal in ("find it", "crash now", "find it", "crash again", "find it"):
            fan = await host.query_all(query(goal=goal), 1000)
            statuses.append(fan.reports["c"].status)
        health = host.health("c")
    ok, crashed = LegStatus.OK, LegStatus.CRASHED
    assert statuses == [ok, crashed, ok, crashed, ok]
    assert health.starts == 3 and health.consecutive_failures == 0


async def test_a_provider_in_a_crash_loop_is_restarted_behind_the_requests(
    tmp_path: Path,
) -> None:
    """It crashed again after its restart, answering nothing between: its next restart
    (held at a gate: a slow start) runs behind the requests, which get the other
    providers' frames at once, its leg saying why, also when the request names a
    ``ready_wait_ms`` (``hostd mcp`` names one with every call: a wait for starts and
    warm-ups, not for a crash loop); it serves once it is up."""
    policy = RestartPolicy(base_delay_s=0.01, max_attempts=5)
    async with Gate() as gate:
        gate.close()  # its third start and later ones wait at the gate
        extra = ("--start-gate", str(gate.port), str(tmp_path / "starts"), "3")
        specs = [adversary("crash_on_goal", "c", extra=extra), healthy("h", "--frames", "2")]
        async with Host(specs, restart_policy=policy) as host:
            crash = query(goal="crash now")
            first = await host.query_all(crash, 1000)
            # A first failure's restart is waited for: asked again, it crashes again.
            second = await host.query_all(crash, 1000)
            assert [fan.reports["c"].status for fan in (first, second)] == [
                LegStatus.CRASHED,
                LegStatus.CRASHED,
            ]
            # Its third start is begun by that crash, and held at the gate: a slow one.
            # Not waited for, whatever the request's ready_wait_ms (the gate stays shut,
            # so a wait would hang): "restarting", which no asking again soon cures: a
            # fault (crashed), not "warming".
            for ready_wait_ms in (None, 0, 600_000):
                fan = await host.query_all(query(), 1000, ready_wait_ms=ready_wait_ms)
                report = fan.reports["c"]
                assert (report.status, report.error_code) == (LegStatus.CRASHED, "restarting")
                assert [pid for pid, _ in fan.accepted] == ["h", "h"]
                message = report.error_message or ""
                assert message.startswith(
                    "provider restarting after 2 failures in a row, not waited for; "
                    "its last failure: crashed: "
                ), message
            assert host.providers_list()[0]["state"] == "crashed"
            health = host.health("c")
            assert (health.starts, health.consecutive_failures) == (2, 2)
            # Those three legs never reached it: counted, yet no crash of their own.
            assert (health.legs, health.crashes, health.failing_legs) == (5, 2, 2)
            await gate.wait_held(1)
            assert gate.held == 1  # one restart under way, not one per request
            gate.open()
            await host.pool.ensure(host.pool.slots["c"])  # its restart, up
            assert await host.warm_all() == {"c": "ready", "h": "ready"}
            served = await host.query_all(query(), 1000)
            assert served.reports["c"].status is LegStatus.OK, served.reports["c"]
            health = host.health("c")
    assert (health.starts, health.consecutive_failures) == (3, 0)


async def test_a_crash_loops_leg_is_a_failure_while_a_provider_building_its_index_is_warming(
    tmp_path: Path,
) -> None:
    """A provider that crashes on every query, once in a crash loop (its restart crashed
    again: its next restart, held at a gate, runs behind the request), is reported
    ``crashed``, code ``restarting``, and degrades the composition as a failed provider
    (``provider_failed``, detail ``restarting``): a dashboard must not read it as one
    to wait for. A provider building its index (no failure: its warm-up gate stays shut)
    beside it is still ``warming``. Neither leg counts as a failure in its health."""
    from hostd.pipeline._degraded import Degraded, degradations
    from tests.engine.test_warming import warming

    policy = RestartPolicy(base_delay_s=0.01, max_attempts=5)
    async with Gate() as gate:
        gate.close()  # its third start and later ones wait at the gate
        extra = ("--start-gate", str(gate.port), str(tmp_path / "starts"), "3")
        specs = [
            adversary("crash", "c", extra=extra),
            healthy("h"),
            warming("w", "--warm-gate", str(tmp_path / "warm.gate")),  # its gate stays shut
        ]
        with anyio.fail_after(120):  # a hang guard
            async with Host(specs, restart_policy=policy) as host:
                for slot in host.pool.slots.values():
                    await host.pool.ensure(slot)  # each handshaken: no leg is "starting"
                # Its first crash's restart is waited for, and crashes too: a crash loop.
                for _ in range(2):
                    fan = await host.query_all(query(), 1000, providers=["c", "h"])
                    assert fan.reports["c"].status is LegStatus.CRASHED, fan.reports["c"]
                    assert fan.reports["c"].error_code == "crashed", fan.reports["c"]
                before = host.health("c")
                # w is never ready: the request's wait for it ends, whatever its speed.
                fan = await host.query_all(query(), 1000, ready_wait_ms=200)
                after, building = host.health("c"), host.health("w")
                states = {row["id"]: row["state"] for row in host.providers_list()}
    looping, cold = fan.reports["c"], fan.reports["w"]
    assert (looping.status, looping.error_code) == (LegStatus.CRASHED, "restarting"), looping
    assert (cold.status, cold.error_code) == (LegStatus.WARMING, "warming"), cold
    assert fan.reports["h"].status is LegStatus.OK and {p for p, _ in fan.accepted} == {"h"}
    # Neither is expected to answer as the request is planned: h is asked for the whole
    # budget, they for their nominal thirds, each saying why its share was kept apart.
    assert {p: (r.share, r.max_tokens, r.share_apart) for p, r in fan.reports.items()} == {
        "c": (334, 334, "restarting"),
        "h": (1000, 1000, None),
        "w": (333, 333, "warming"),
    }
    wire = looping.to_wire()
    assert (wire["status"], wire["error"]["code"]) == ("crashed", "restarting"), wire
    assert wire["error"]["message"].startswith(
        "provider restarting after 2 failures in a row, not waited for; its last failure: "
    ), wire
    assert degradations(fan.reports, fan.figures) == (
        Degraded("provider_failed", "c", "restarting"),
        Degraded("provider_warming", "w", "warming"),
    )
    assert states == {"c": "crashed", "h": "ready", "w": "warming"}
    # The leg that never reached it is counted as a leg, not as one more failure.
    assert after.legs == before.legs + 1
    assert (after.crashes, after.failing_legs) == (before.crashes, before.failing_legs) == (2, 2)
    assert (after.consecutive_failures, after.warming) == (2, 0)
    assert (building.warming, building.crashes, building.restarts) == (1, 0, 0)


async def test_warm_all_does_not_wait_for_a_crash_loops_restart(tmp_path: Path) -> None:
    """A provider that exits at every start, failed twice in a row: ``warm_all`` (``hostd
    warm``) says it is restarting, with its last failure, as a request does, and waits
    neither for its backoff nor for its restart (held at a gate that stays shut: a wait
    would hang), which goes on behind, one at a time."""
    policy = RestartPolicy(base_delay_s=0.01, max_attempts=5)
    async with Gate() as gate:
        gate.close()  # its third start and later ones wait at the gate
        extra = ("--start-gate", str(gate.port), str(tmp_path / "starts"), "3")
        specs = [adversary("noisy_start_crash", "c", extra=extra), healthy("h")]
        with anyio.fail_after(60):  # a hang guard
            async with Host(specs, restart_policy=policy) as host:
                for _ in range(2):  # a first failure's restart is waited for: it fails again
                    fan = await host.query_all(query(), 1000)
                    assert fan.reports["c"].status is not LegStatus.OK, fan.reports["c"]
                assert host.health("c").consecutive_failures == 2
                states = await host.warm_all()
                assert states["h"] == "ready"
                assert states["c"].startswith(
                    "restarting: provider restarting after 2 failures in a row, not waited "
                    "for; its last failure: "
                ), states
                assert "IndexLocked: the index is locked" in states["c"]
                await gate.wait_held(1)
                assert gate.held == 1  # its restart is under way behind, once
                gate.open()


async def test_restarts_stop_after_the_bounded_attempts() -> None:
    policy = RestartPolicy(base_delay_s=0.001, max_delay_s=0.001, max_attempts=2)
    async with Host([adversary("crash", "c")], restart_policy=policy) as host:
        for _ in range(2):
            await host.query_all(query(), 500)
        third = await host.query_all(query(), 500)
        listed = host.providers_list()[0]
    assert third.reports["c"].status is LegStatus.CRASHED
    assert "restart attempts exhausted" in (third.reports["c"].error_message or "")
    assert listed["state"] == "failed" and listed["health"]["starts"] == 2


async def test_a_parked_providers_legs_are_no_failures_of_its_own() -> None:
    """Parked (its attempts spent, no retry of its own), a provider's legs fail at once,
    never sent: each is counted as a leg with its message, yet its health's failures
    (crashed legs, failing legs, failures and timeouts in a row, the figure its message
    quotes) stay what its real failures made them, however many requests meet it."""
    policy = RestartPolicy(
        base_delay_s=0.001, max_delay_s=0.001, max_attempts=2, retry_failed_after_s=0
    )
    async with Host([adversary("crash", "c")], restart_policy=policy) as host:
        for _ in range(2):  # it crashes at each query: parked after the second
            await host.query_all(query(), 500)
        before = host.health("c")
        legs = [(await host.query_all(query(), 500)).reports["c"] for _ in range(4)]
        after = host.health("c")
    assert before.state is ProviderState.FAILED
    for report in legs:
        assert (report.status, report.error_code) == (LegStatus.CRASHED, "parked"), report
        assert not report.sent, report
        assert (report.error_message or "").startswith("restart attempts exhausted (2); ")
    assert legs[0].error_message == legs[-1].error_message
    assert after.legs == before.legs + 4 and after.last_error == legs[-1].error_message
    figures = ("crashes", "failing_legs", "consecutive_failures", "consecutive_timeouts")
    assert {f: getattr(after, f) for f in figures} == {f: getattr(before, f) for f in figures}
    assert (after.crashes, after.failing_legs, after.consecutive_failures) == (2, 2, 2)


async def test_cancelling_the_host_mid_query_leaves_no_process() -> None:
    started = anyio.Event()
    with anyio.move_on_after(30):
        async with Host(
            [
                adversary("hang", "h", timeout_ms=60_000),
                adversary("grandchild", "g", timeout_ms=60_000),
            ],
            start="boot",
            grace_period_s=0.5,
        ) as host:
            async with anyio.create_task_group() as tg:

                async def run() -> None:
                    started.set()
                    await host.query_all(query(), 500)

                tg.start_soon(run)
                await started.wait()
                await anyio.wait_all_tasks_blocked()
                tg.cancel_scope.cancel()
    assert leftovers() == []


async def test_consent_gates_an_egress_provider_until_every_scope_is_granted(
    tmp_path: Path,
) -> None:
    specs = [healthy("cloud", "--egress-scope", "vendor:search", "--egress-scope", "crm:eu")]
    async with Host(specs, state_dir=tmp_path) as host:
        refused = await host.query_all(query(), 500)
        report = refused.reports["cloud"]
        assert report.status is LegStatus.NO_CONSENT
        assert report.missing_scopes == ("vendor:search", "crm:eu")
        assert refused.accepted == []
        assert isinstance(host.consent, ConsentStore)
        host.consent.grant("cloud", "vendor:search", "tester")
        partial = await host.query_all(query(), 500)
        assert partial.reports["cloud"].missing_scopes == ("crm:eu",)
        host.consent.grant("cloud", "crm:eu", "tester")
        allowed = await host.query_all(query(), 500)
        assert allowed.reports["cloud"].status is LegStatus.OK
        assert len(allowed.accepted) == 3
        host.consent.revoke("cloud", "crm:eu", "tester")
        revoked = await host.query_all(query(), 500)
        assert revoked.reports["cloud"].status is LegStatus.NO_CONSENT


class _Gate:
    """A consent gate double that records what it was asked."""

    def __init__(self, granted: set[str]) -> None:
        self.granted = granted
        self.asked: list[tuple[str, list[str]]] = []

    def missing_scopes(self, provider_id: str, scopes: Iterable[str]) -> list[str]:
        self.asked.append((provider_id, list(scopes)))
        return [s for s in scopes if s not in self.granted]


async def test_no_query_payload_reaches_an_unconsented_provider() -> None:
    gate = _Gate(granted=set())
    async with Host(
        [healthy("e", "--egress-scope", "vendor:x"), healthy("local")], consent=gate
    ) as host:
        fan = await host.query_all(query(), 500)
        health = host.health("e")
    assert gate.asked == [("e", ["vendor:x"])]  # local-only providers need no receipt
    assert fan.reports["e"].status is LegStatus.NO_CONSENT
    assert fan.reports["local"].status is LegStatus.OK
    # What it lacks, and the command that records it.
    assert fan.reports["e"].error_message == (
        "no consent recorded for scope(s): vendor:x; `hostd consent grant e vendor:x` records it"
    )
    # The provider answered nothing because it was asked nothing (C2).
    assert fan.reports["e"].frames_offered == 0 and health.no_consent == 1


async def test_without_any_consent_store_egress_providers_are_refused() -> None:
    async with Host([healthy("e", "--egress-scope", "vendor:x")]) as host:
        fan = await host.query_all(query(), 500)
    assert fan.reports["e"].status is LegStatus.NO_CONSENT


async def test_an_error_in_the_host_body_propagates_unwrapped_and_tears_down() -> None:
    with pytest.raises(ValueError, match="boom"):
        async with Host([healthy("a")], start="boot"):
            raise ValueError("boom")
    assert leftovers() == []


async def test_the_host_refuses_new_work_once_closed() -> None:
    host = Host([healthy("a")])
    async with host:
        pass
    with pytest.raises(ShuttingDown):
        await host.query_all(query(), 100)


async def test_a_budget_that_cannot_be_split_is_a_bad_request() -> None:
    async with Host([healthy("a", weight=0.0)]) as host:
        with pytest.raises(BadRequest):
            await host.query_all(query(), -5)
