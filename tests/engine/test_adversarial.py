"""Every misbehaviour of the adversarial provider is caught and named in its report,
while a healthy provider fanned out beside it still delivers its frames."""

from __future__ import annotations

from typing import Any

import anyio
import pytest

from hostd._hints import NO_HANDSHAKE
from hostd.engine import FanOut, Host, LegReport, LegStatus, RestartPolicy
from hostd.protocol import PROTOCOL_VERSION
from hostd.transport import PipeClient, ProviderConnection
from tests.engine._helpers import adversary, healthy, local, query
from tests.fixtures.gate import Gate

pytestmark = pytest.mark.anyio

ADV = "adv"


async def fan_out(
    mode: str,
    *,
    binding: str = "jsonrpc",
    timeout_ms: int = 15_000,
    host_kw: dict[str, Any] | None = None,
    **query_kw: Any,
) -> tuple[FanOut, Host, list[dict[str, Any]]]:
    specs = [
        healthy("healthy", "--frames", "3"),
        adversary(mode, ADV, binding=binding, timeout_ms=timeout_ms),
    ]
    kw: dict[str, Any] = {
        "start": "boot",
        "grace_period_s": 1.0,
        "start_timeout_s": 20.0,
        "max_line_bytes": 64 * 1024,
        "restart_policy": RestartPolicy(base_delay_s=0.01),
    }
    kw.update(host_kw or {})
    async with Host(specs, **kw) as host:
        fan = await host.query_all(query(**query_kw), 1000)
        listed = host.providers_list()
    healthy_report = fan.reports["healthy"]
    assert healthy_report.status is LegStatus.OK, healthy_report
    assert [pid for pid, _ in fan.accepted].count("healthy") == 3
    return fan, host, listed


def adv(fan: FanOut) -> LegReport:
    return fan.reports[ADV]


def rules(report: LegReport) -> set[str]:
    return {v.rule for v in report.violations}


@pytest.mark.parametrize("binding", ["jsonrpc", "cgp"])
async def test_crash_mid_query_is_reported_crashed(binding: str) -> None:
    fan, _, _ = await fan_out("crash", binding=binding)
    assert adv(fan).status is LegStatus.CRASHED
    assert "mid-line" in (adv(fan).error_message or "")


@pytest.mark.parametrize("binding", ["jsonrpc", "cgp"])
async def test_a_hung_provider_times_out(binding: str) -> None:
    fan, _, _ = await fan_out("hang", binding=binding, timeout_ms=1500)
    assert adv(fan).status is LegStatus.TIMEOUT
    assert adv(fan).error_code == "timeout"


async def test_a_provider_that_stops_reading_never_holds_up_the_fan_out() -> None:
    # "hang" reads its first query, then no more: its input pipe fills up (3.5 KB
    # queries, a 64 KiB pipe). Once full, the early write is refused, the leg's own
    # write waits under the leg's timeout, and the healthy provider answers every time.
    specs = [healthy("healthy", "--frames", "3"), adversary("hang", ADV, timeout_ms=100)]
    big = query(anchors=["a" * 3500])  # a big request; the healthy frames stay small
    # The hung-provider restart is off: the same stuck process must meet every request.
    keep = RestartPolicy(max_consecutive_timeouts=0)
    async with Host(
        specs, start="boot", start_timeout_s=20.0, grace_period_s=0.3, restart_policy=keep
    ) as host:
        first = host.connection(ADV)
        with anyio.fail_after(120):  # a blocked write would hang here, not fail a report
            for _ in range(30):
                fan = await host.query_all(big, 1000)
                assert fan.reports["healthy"].status is LegStatus.OK
                assert [pid for pid, _ in fan.accepted].count("healthy") == 3
                assert adv(fan).status is LegStatus.TIMEOUT
        conn = host.connection(ADV)
        assert conn is first and conn is not None and conn.alive  # no line was cut short
        assert isinstance(conn, ProviderConnection)
        assert not conn.child.send_nowait(b" " * 3500 + b"{}\n")  # the pipe is full indeed


async def test_a_cancelled_fan_out_leaves_no_request_pending() -> None:
    # The request goes out before any leg task runs; cancelled at once (and later,
    # mid-wait), each leg still gives its id up, so nothing lingers on the connection.
    specs = [adversary("hang", ADV, timeout_ms=30_000)]
    async with Host(specs, start="boot", start_timeout_s=20.0, grace_period_s=0.3) as host:
        conn = host.connection(ADV)
        assert isinstance(conn, ProviderConnection) and isinstance(conn.client, PipeClient)
        with anyio.CancelScope() as scope:
            scope.cancel()
            await host.query_all(query(), 1000)
        assert conn.client.in_flight == 0
        with anyio.move_on_after(0.2):
            await host.query_all(query(), 1000)
        assert conn.client.in_flight == 0 and conn.alive


@pytest.mark.parametrize("binding", ["jsonrpc", "cgp"])
async def test_a_garbage_line_is_a_protocol_fault(binding: str) -> None:
    fan, _, _ = await fan_out("garbage", binding=binding)
    assert adv(fan).status is LegStatus.ERROR
    assert adv(fan).error_code == "protocol_fault"
    assert "garbage line" in (adv(fan).error_message or "")


async def test_an_over_long_line_is_refused_without_buffering_it() -> None:
    fan, _, _ = await fan_out("overlong")
    assert adv(fan).status is LegStatus.ERROR
    assert adv(fan).error_code == "line_too_long"


async def test_a_lie_about_token_cost_quarantines_the_reply() -> None:
    fan, _, _ = await fan_out("lie_cost")
    report = adv(fan)
    assert report.status is LegStatus.QUARANTINED
    assert "B3" in rules(report)
    assert "declared token_cost 1 but ceil(utf8 bytes/4) is 5" in (report.error_message or "")
    dropped = {fid.frame_id: reason for fid, reason, _ in fan.excluded}
    assert dropped == {"adv:0": "quarantined", "adv:1": "quarantined"}
    assert all(pid != ADV for pid, _ in fan.accepted)


async def test_an_over_budget_reply_is_quarantined_not_truncated() -> None:
    fan, _, _ = await fan_out("over_budget")
    report = adv(fan)
    assert report.status is LegStatus.QUARANTINED
    assert rules(report) >= {"B1"}
    assert f"over the query's max_tokens {fan.shares[ADV]}" in (report.error_message or "")
    assert report.frames_offered == 1 and report.frames_accepted == 0


async def test_a_frame_flood_is_quarantined() -> None:
    fan, _, _ = await fan_out("flood", max_frames=5)
    report = adv(fan)
    assert report.status is LegStatus.QUARANTINED
    assert "B4" in rules(report)
    assert "60 frames returned, over the query's max_frames 5" in (report.error_message or "")
    assert sum(1 for _, reason, _ in fan.excluded if reason == "quarantined") == 60


@pytest.mark.parametrize("binding", ["jsonrpc", "cgp"])
@pytest.mark.parametrize("mode", ["wrong_id", "missing_id"])
async def test_a_reply_with_a_wrong_or_missing_id_is_a_correlation_mismatch(
    mode: str, binding: str
) -> None:
    fan, _, _ = await fan_out(mode, binding=binding)
    assert adv(fan).status is LegStatus.ERROR
    assert adv(fan).error_code == "correlation_mismatch"


@pytest.mark.parametrize("binding", ["jsonrpc", "cgp"])
async def test_a_version_mismatch_is_a_named_handshake_error(binding: str) -> None:
    fan, _, listed = await fan_out("version", binding=binding)
    assert adv(fan).status is LegStatus.ERROR
    assert adv(fan).error_code == "incompatible_version"
    assert "H3" in rules(adv(fan))
    assert {p["id"]: p for p in listed}[ADV]["health"]["consecutive_failures"] >= 1


async def test_a_malformed_version_is_refused_naming_the_version_to_send() -> None:
    fan, _, _ = await fan_out("old_version")
    assert adv(fan).error_code == "incompatible_version"
    assert "H1" in rules(adv(fan))
    message = adv(fan).error_message or ""
    assert "'contextgraph/1' is not contextgraph/<major>.<minor>[-draft]" in message
    assert f"send {PROTOCOL_VERSION!r}" in message


async def test_an_empty_provider_name_fails_the_handshake() -> None:
    fan, _, _ = await fan_out("empty_name")
    assert adv(fan).error_code == "handshake_failed"
    assert "H2" in rules(adv(fan))


async def test_an_off_machine_scope_with_egress_false_is_rejected_at_handshake() -> None:
    fan, _, _ = await fan_out("scope_lie")
    assert adv(fan).status is LegStatus.ERROR
    assert adv(fan).error_code == "handshake_failed"
    assert "C5" in rules(adv(fan))


async def test_invalid_frames_are_dropped_with_their_rule_ids() -> None:
    fan, _, _ = await fan_out("invalid_frames")
    report = adv(fan)
    assert report.status is LegStatus.OK
    assert report.frames_offered == 6 and report.frames_accepted == 1
    dropped = {fid.frame_id: detail["rules"] for fid, reason, detail in fan.excluded}
    assert dropped == {
        "adv:1": ["F1"],
        "adv:2": ["F3"],
        "adv:3": ["F5"],
        "adv:4": ["schema"],
        "adv:5": ["F4"],
    }
    assert [f.id for pid, f in fan.accepted if pid == ADV] == ["adv:0"]


async def test_injection_shaped_content_is_kept_as_data_and_flagged() -> None:
    fan, _, _ = await fan_out("injection")
    report = adv(fan)
    assert report.status is LegStatus.OK and report.frames_accepted == 1
    assert [v.severity.value for v in report.violations if v.rule == "R3"] == ["notice"]


async def test_unknown_members_are_ignored_and_an_unknown_kind_is_flagged() -> None:
    fan, _, _ = await fan_out("unknown")
    report = adv(fan)
    assert report.status is LegStatus.OK and report.frames_accepted == 1
    assert "U2" in rules(report)
    frame = next(f for pid, f in fan.accepted if pid == ADV)
    assert frame.kind == "hologram" and "sparkle" not in frame.to_wire()


async def test_kinds_outside_the_query_quarantine_the_reply() -> None:
    fan, _, _ = await fan_out("wrong_kind", kinds=["snippet"])
    assert adv(fan).status is LegStatus.QUARANTINED
    assert "Q1" in rules(adv(fan))


@pytest.mark.parametrize("binding", ["jsonrpc", "cgp"])
async def test_a_kind_the_provider_did_not_declare_is_an_invalid_frame(binding: str) -> None:
    # It declares ["snippet"] and the query names no kinds: the fact is still refused (Q1),
    # on its own; the snippet beside it is served.
    fan, _, _ = await fan_out("undeclared_kind", binding=binding)
    report = adv(fan)
    assert report.status is LegStatus.OK, report
    assert [f.id for pid, f in fan.accepted if pid == ADV] == ["adv:0"]
    dropped = {fid.frame_id: (reason, d["rules"]) for fid, reason, d in fan.excluded}
    assert dropped == {"adv:1": ("invalid_frame", ["Q1"])}
    assert {(v.rule, v.field) for v in report.violations} == {("Q1", "frames[1].kind")}


async def test_frames_outside_as_of_quarantine_the_reply() -> None:
    fan, _, _ = await fan_out("stale", as_of="2025-06-01T00:00:00Z")
    assert adv(fan).status is LegStatus.QUARANTINED
    assert "Q2" in rules(adv(fan))


async def test_a_slow_handshake_times_out_instead_of_hanging() -> None:
    # The adversary never answers its handshake, so the host's handshake limit is the
    # only thing that can end it, whatever the machine's speed: the limit is what is
    # tested, and the test holds the other side of the clock. No healthy provider
    # shares this host: the limit is host-wide, and a healthy provider starting on a
    # busy machine may need more than 1 s. test_bounds fans a handshake that never
    # completes out beside a healthy provider, under a generous limit.
    specs = [adversary("slow_handshake", ADV)]
    kw: dict[str, Any] = {"start": "boot", "grace_period_s": 1.0, "start_timeout_s": 1.0}
    with anyio.fail_after(60):  # a hang guard: boot and the leg each wait out 1 s
        async with Host(specs, restart_policy=RestartPolicy(base_delay_s=0.01), **kw) as host:
            fan = await host.query_all(query(), 1000)
            listed = host.providers_list()
    assert adv(fan).status is LegStatus.TIMEOUT
    assert adv(fan).error_code == "handshake_timeout"
    # The handshake's own limit ended it, not the leg's 30 s deadline ("not ready").
    assert adv(fan).error_message == f"no handshake reply within 1000 ms; {NO_HANDSHAKE}"
    assert {p["id"]: p for p in listed}[ADV]["info"] is None


async def test_exit_right_after_handshake_is_reported_crashed() -> None:
    fan, _, listed = await fan_out("exit_after_handshake")
    assert adv(fan).status is LegStatus.CRASHED
    assert {p["id"]: p for p in listed}[ADV]["health"]["crashes"] == 1


async def test_a_stderr_flood_is_drained_and_counted_not_logged_line_by_line() -> None:
    fan, _, listed = await fan_out("stderr_flood")
    assert adv(fan).status is LegStatus.OK
    health = {p["id"]: p for p in listed}[ADV]["health"]
    assert health["stderr_suppressed"] > 0
    assert health["stderr_lines"] > health["stderr_suppressed"] - 1


async def test_legs_written_early_each_keep_their_own_deadline() -> None:
    # Every request below is written before any leg is awaited. Each leg still ends on
    # its own: the short-deadline hang times out before the long-deadline one (both
    # never answer, so only their deadlines order them), the crash is reported as it
    # happens, and the held provider, let through only once those three have reported,
    # answers last: its deadline is its own, not the longest of the others'.
    order: list[str] = []
    elapsed: dict[str, float] = {}  # s from before the fan-out to each leg's report
    async with Gate() as gate:
        gate.close()

        def done(report: LegReport) -> None:
            order.append(report.provider_id)
            elapsed[report.provider_id] = anyio.current_time() - start
            if {"hang-short", "hang-long", "crash"} <= set(order):
                gate.open()

        specs = [
            adversary("hang", "hang-short", timeout_ms=300),
            healthy("held", "--frames", "2", "--hold-port", str(gate.port)),
            adversary("crash", "crash"),
            adversary("hang", "hang-long", timeout_ms=1500),
        ]
        kw: dict[str, Any] = {"start": "boot", "start_timeout_s": 20.0, "grace_period_s": 0.3}
        async with Host(specs, **kw) as host:
            start = anyio.current_time()
            with anyio.fail_after(60):  # a hang guard: a leg that waited on another hangs
                fan = await host.query_all(query(), 1000, on_leg_done=done)
            for pid in ("hang-short", "hang-long", "held"):
                client = local(host.connection(pid)).client
                assert isinstance(client, PipeClient) and client.in_flight == 0
    reports = fan.reports
    assert reports["hang-short"].status is LegStatus.TIMEOUT
    assert reports["hang-short"].error_message == "no reply within 300 ms"
    assert reports["hang-long"].status is LegStatus.TIMEOUT
    assert reports["hang-long"].error_message == "no reply within 1500 ms"
    assert reports["held"].status is LegStatus.OK and reports["held"].frames_accepted == 2
    assert reports["crash"].status is LegStatus.CRASHED
    assert gate.held == 1  # the held provider's answer waited for the gate indeed
    assert order.index("hang-short") < order.index("hang-long") < order.index("held")
    assert order.index("crash") < order.index("held")
    # No deadline is cut short: each counts from the fan-out's start (after ``start``),
    # so its report comes at least that long after ``start``, however busy the machine.
    # (A lower bound only: an upper one would time the machine.)
    assert elapsed["hang-short"] >= 0.3 and elapsed["hang-long"] >= 1.5
    lat = {pid: r.latency_ms for pid, r in reports.items()}
    assert lat["hang-short"] < lat["hang-long"] < lat["held"]
    assert sorted(pid for pid, _ in fan.accepted) == ["held", "held"]


async def test_a_slow_leg_callback_holds_up_no_other_leg_and_is_not_cut_short() -> None:
    # on_leg_done may await (the server sends a progress notification). It runs after
    # its own leg: the fast provider's callback waits until the hang beside it has
    # timed out and been reported, so a callback that held up another leg (or was
    # cancelled by that leg's deadline) would hang here or never finish.
    specs = [healthy("fast"), adversary("hang", "hang", timeout_ms=300)]
    completed: list[str] = []
    hang_reported = anyio.Event()

    async def slow_callback(report: LegReport) -> None:
        if report.provider_id == "fast":
            await hang_reported.wait()
        completed.append(report.provider_id)
        if report.provider_id == "hang":
            hang_reported.set()

    async with Host(specs, start="boot", start_timeout_s=20.0, grace_period_s=0.3) as host:
        with anyio.fail_after(60):  # a hang guard: a held-up leg would wait forever
            fan = await host.query_all(query(), 1000, on_leg_done=slow_callback)
    assert fan.reports["fast"].status is LegStatus.OK
    assert fan.reports["hang"].status is LegStatus.TIMEOUT
    assert fan.reports["hang"].error_message == "no reply within 300 ms"
    assert completed == ["hang", "fast"]  # both callbacks ran to the end


@pytest.mark.parametrize("binding", ["jsonrpc", "cgp"])
async def test_a_malformed_reply_fails_its_leg_alone_and_the_connection_answers_the_rest(
    binding: str,
) -> None:
    # A query is held by the provider while another request's reply comes malformed (a
    # reply to its id, its frames under ``results``); the held one is answered only
    # after a third request's well-formed answer: had the malformed reply torn the
    # connection down, the held query would have failed with it.
    specs = [adversary("malformed", ADV, binding=binding)]
    async with Host(specs, start="boot", start_timeout_s=20.0, grace_period_s=1.0) as host:
        conn = local(host.connection(ADV))
        assert isinstance(conn.client, PipeClient)
        first_pid = conn.child.provider_pid  # health.pid: the provider's own, not the shim's
        held: list[FanOut] = []

        async def ask_held() -> None:
            held.append(await host.query_all(query(goal="hold this one"), 1000))

        with anyio.fail_after(60):  # a hang guard
            async with anyio.create_task_group() as tg:
                tg.start_soon(ask_held)
                await anyio.wait_all_tasks_blocked()
                assert conn.client.in_flight == 1  # the held query is out on this connection
                bad = adv(await host.query_all(query(goal="malformed please"), 1000))
                good = adv(await host.query_all(query(goal="well formed"), 1000))
        (kept,) = held
        (row,) = host.providers_list()
    assert (bad.status, bad.error_code) == (LegStatus.ERROR, "protocol_fault")
    assert bad.error_message == (
        "malformed query result: result.frames is missing (members sent: results, truncated)"
    )
    assert good.status is LegStatus.OK and good.frames_accepted == 1
    assert adv(kept).status is LegStatus.OK and adv(kept).frames_accepted == 1
    health = row["health"]
    assert health["pid"] == first_pid and (health["starts"], health["restarts"]) == (1, 0)
    assert (health["consecutive_failures"], health["errors"], health["ok"]) == (0, 1, 2)
    assert "malformed query result" in health["last_error"]


async def test_a_provider_whose_every_frame_fails_verification_shows_it_in_its_health() -> None:
    """``invalid_legs`` counts every refusal for what a provider sent, as the compose
    summary and ``hostd mcp``'s texts do: frames whose digest is not their content's
    (dropped by verification, after the leg was judged), alone or beside an invalid one."""
    async with Host([adversary("wrong_digests", ADV)], start="boot") as host:
        for n in (1, 2):
            fan = await host.query_all(query(goal="wrong digests"), 1000)
            assert adv(fan).status is LegStatus.OK and adv(fan).frames_offered == 2
            assert fan.accepted == []
            assert host.health(ADV).invalid_legs == n
        assert host.health(ADV).last_error == "digest_mismatch 2 of 2"
        await host.query_all(query(goal="mixed: one untitled"), 1000)
        health = host.health(ADV)
        assert (health.invalid_legs, health.last_error) == (
            3,
            "digest_mismatch 1, invalid_frame 1 of 2 (schema frames[0].title: missing)",
        )
        (row,) = host.providers_list()
        assert row["state"] == "ready" and row["health"]["invalid_legs"] == 3
        fan = await host.query_all(query(goal="right digests"), 1000)
        assert len(fan.accepted) == 2
        assert host.health(ADV).invalid_legs == 0


async def test_a_provider_whose_every_frame_is_refused_shows_it_in_its_health() -> None:
    """Answers whose frames all break the schema (no title) leave the provider ``ready``
    and its legs ``ok``, so its health counts them, and says why, until an answer with
    a usable frame comes."""
    async with Host([adversary("untitled", ADV)], start="boot") as host:
        for n in (1, 2, 3):
            fan = await host.query_all(query(goal="what is refused"), 1000)
            report = adv(fan)
            assert report.status is LegStatus.OK and report.frames_offered == 2
            assert report.frames_accepted == 0
            assert host.health(ADV).invalid_legs == n
        (row,) = host.providers_list()
        assert row["state"] == "ready" and row["health"]["invalid_legs"] == 3
        assert row["health"]["last_error"] == (
            "invalid_frame 2 of 2 (schema frames[0].title: missing)"
        )
        fan = await host.query_all(query(goal="titled, so usable"), 1000)
        assert adv(fan).frames_accepted == 2
        assert host.health(ADV).invalid_legs == 0
