"""End to end over a real Unix socket with real provider processes."""

from __future__ import annotations

import json
import socket
import stat
from pathlib import Path
from typing import Any

import anyio
import pytest

from hostd.client import ComposeResult, RpcError, connect
from tests.fixtures.gate import Gate
from tests.server.conftest import ROOT, STUCK
from tests.server.test_malformed import Raw, assert_error, assert_serving

pytestmark = pytest.mark.anyio


def _audit_explains(result: ComposeResult) -> None:
    audit = result.audit
    included = audit.included()
    assert included, "nothing was included"
    # Every rendered frame is cited and explained by exactly one included entry.
    cited = sorted(json.dumps(c.frame.to_wire(), sort_keys=True) for c in result.citations)
    explained = sorted(json.dumps(e.frame.to_wire(), sort_keys=True) for e in included)
    assert cited == explained
    for e in audit.entries:
        if not e.included:
            assert e.reason
        else:
            assert e.position is not None and e.rank is not None
    assert audit.tokens_used <= audit.global_budget


async def test_compose_returns_a_prompt_whose_audit_explains_every_frame(start_daemon) -> None:
    daemon = await start_daemon()
    async with connect(daemon.socket) as client:
        result = await client.compose("how are frames composed", budget=300)
        assert result.prompt.count("<frame ") == len(result.citations)
        _audit_explains(result)
        assert sorted(p.provider_id for p in result.providers) == ["alpha", "beta", "gamma"]
        assert all(p.ok for p in result.providers)
        assert result.request_id
        # The usage of that request can be fetched again by its request_id (UR1).
        usage = await client.usage(result.request_id)
        assert result.usage is not None and usage["usage"] == result.usage.to_wire()
    assert await daemon.stop() == 0
    assert not daemon.socket.exists()
    # The log: one provider.leg per leg and one audit summary (no entry at info), by id.
    rid = result.request_id
    legs = [e for e in daemon.events("provider.leg") if e.get("request_id") == rid]
    assert sorted(e["provider"] for e in legs) == ["alpha", "beta", "gamma"]
    # Each leg's latency as the result's leg report has it (to 3 decimals).
    assert {e["provider"]: e["latency_ms"] for e in legs} == {
        p.provider_id: p.latency_ms for p in result.providers
    }
    (summary,) = [e for e in daemon.events("compose.audit.summary") if e["request_id"] == rid]
    entries = result.audit.entries
    assert summary["entries"] == len(entries)
    included = sum(e.included for e in entries)
    assert summary["dispositions"].get("included", 0) == included
    assert daemon.events("compose.audit") == []


async def test_audit_entries_mode_logs_one_event_per_entry(start_daemon) -> None:
    daemon = await start_daemon({"alpha": {}, "beta": {}}, extra='[log]\naudit = "entries"\n')
    async with connect(daemon.socket) as client:
        result = await client.compose("how are frames composed", budget=300)
    assert await daemon.stop() == 0
    rid = result.request_id
    audits = [e for e in daemon.events("compose.audit") if e.get("request_id") == rid]
    expected = sorted(json.dumps(e.frame.to_wire(), sort_keys=True) for e in result.audit.entries)
    assert sorted(json.dumps(e["frame"], sort_keys=True) for e in audits) == expected
    assert len(daemon.events("compose.audit.summary")) == 1


async def test_frame_content_never_reaches_the_log(start_daemon) -> None:
    daemon = await start_daemon()
    async with connect(daemon.socket) as client:
        result = await client.query("secret-goal-words", budget=300)
    assert await daemon.stop() == 0
    contents = [f["content"] for frames in result["frames"].values() for f in frames]
    assert contents
    log = "\n".join(daemon.log_text)
    for content in contents:
        assert content not in log


async def test_query_reports_the_verification_of_every_accepted_frame(start_daemon) -> None:
    daemon = await start_daemon()
    async with connect(daemon.socket) as client:
        result = await client.query("how are frames composed", budget=300)
    assert await daemon.stop() == 0
    accepted = sorted(
        (
            (pid, f["id"], f.get("content_digest"))
            for pid, frames in result["frames"].items()
            for f in frames
        ),
        key=lambda k: (k[0], k[1], k[2] is not None, k[2] or ""),  # FrameId order
    )
    assert accepted
    listed = [
        (e["frame"]["provider_id"], e["frame"]["frame_id"], e["frame"].get("content_digest"))
        for e in result["verification"]
    ]
    assert listed == accepted  # one entry each, in FrameId order
    assert all(e["verification"]["state"] for e in result["verification"])


async def test_domain_failures_are_errors_with_a_reason(start_daemon) -> None:
    daemon = await start_daemon()
    async with connect(daemon.socket) as client:
        with pytest.raises(RpcError) as floors:
            await client.compose("x", budget=10, floors=[{"label": "pinned", "content": "y" * 400}])
        assert floors.value.remote_reason == "floors_exceed_budget"
        # the floor costs its fenced block, and the preamble comes with it
        data = floors.value.rpc_data
        assert [f["label"] for f in data["floors"]] == ["pinned"]
        assert data["floors"][0]["cost"] > 100 and data["preamble"] > 0
        assert data["total"] > data["budget"] == 10
        with pytest.raises(RpcError) as unknown:
            await client.compose("x", providers=["nope"])
        assert unknown.value.remote_reason == "unknown_provider"
        with pytest.raises(RpcError) as bad:
            await client.compose("x", budget="lots")  # type: ignore[arg-type]  # on purpose
        assert bad.value.rpc_code == -32602 and "budget" in bad.value.message
        with pytest.raises(RpcError) as typo:
            await client.call("context/compose", {"goal": "x", "budgte": 5})
        assert typo.value.rpc_data["field"] == "budgte"
        with pytest.raises(RpcError) as when:
            await client.compose("x", as_of="yesterday")
        assert when.value.rpc_data["field"] == "as_of"
        status = await client.status()
        assert status["state"] == "serving"
    assert await daemon.stop() == 0


async def test_no_provider_configured_is_a_named_error(start_daemon) -> None:
    daemon = await start_daemon(providers={})
    async with connect(daemon.socket) as client:
        with pytest.raises(RpcError) as exc:
            await client.compose("x")
        assert exc.value.remote_reason == "no_provider_available"
    assert await daemon.stop() == 0


async def test_progress_echoes_the_token_and_is_absent_without_one(start_daemon) -> None:
    daemon = await start_daemon()
    seen: list[dict[str, Any]] = []
    async with connect(daemon.socket) as client:
        result = await client.compose("progress please", budget=300, on_progress=seen.append)
        assert sorted(p["provider"] for p in seen) == ["alpha", "beta", "gamma"]
        # Each note's latency is its leg's, rounded as the result's leg report has it.
        legs = {r.provider_id: r.latency_ms for r in result.providers}
        assert {p["provider"]: p["latency_ms"] for p in seen} == legs
        assert {p["total"] for p in seen} == {3}
        token = seen[0]["progress_token"]
        assert all(p["progress_token"] == token for p in seen)
        await client.compose("no progress", budget=300)
        assert client.notifications == []
    assert await daemon.stop() == 0


@pytest.mark.parametrize("rid", ["c1", 1.5])  # a fractional id is served, so cancellable
async def test_cancel_drops_the_work_and_its_reply(start_daemon, rid: str | float) -> None:
    daemon = await start_daemon({"slow": STUCK, "fast": {}})
    params = {"goal": "slow", "providers": ["slow"], "timeout_ms": 600000}
    line = {"jsonrpc": "2.0", "id": rid, "method": "context/compose", "params": params}
    async with connect(daemon.socket) as client:
        await client.send_raw(json.dumps(line).encode() + b"\n")
        # The request is in flight once host/status counts it (besides itself).
        with anyio.fail_after(30):
            while (await client.status())["in_flight"] < 2:
                pass
        await client.notify("$/cancel", {"id": rid})
        with anyio.fail_after(30):
            while (await client.status())["in_flight"] > 1:
                pass
        # The daemon still serves, and no reply for "c1" ever arrived.
        result = await client.compose("fast", providers=["fast"], budget=200)
        assert result.providers[0].status == "ok"
    assert await daemon.stop() == 0
    cancelled = daemon.events("request.cancelled")
    assert len(cancelled) == 1


async def test_a_connections_close_after_an_inline_cancel_carries_no_request_id(
    start_daemon,
) -> None:
    # ``$/cancel`` runs in the connection's own task (never queued behind its work): its
    # request id must not stay there for the connection's later events.
    daemon = await start_daemon({"slow": STUCK}, extra='[log]\nlevel = "debug"\n')
    params = {"goal": "slow", "providers": ["slow"], "timeout_ms": 600000}
    line = {"jsonrpc": "2.0", "id": "c1", "method": "context/compose", "params": params}
    cancel = {"jsonrpc": "2.0", "method": "$/cancel", "params": {"id": "c1"}}
    async with await anyio.connect_unix(str(daemon.socket)) as stream:
        await stream.send(json.dumps(line).encode() + b"\n" + json.dumps(cancel).encode() + b"\n")
        cancelled = await daemon.logged("request.cancelled")
        (opened,) = daemon.events("connection.opened")
    closed = await daemon.logged("connection.closed", connection=opened["connection"])
    assert await daemon.stop() == 0
    assert cancelled["request_id"] and cancelled["connection"] == opened["connection"]
    assert "request_id" not in closed, closed
    # The cancel's own id (its ``request.done`` is not written) went nowhere else either.
    said = {e.get("request_id") for e in daemon.log if e.get("connection") == opened["connection"]}
    assert said == {None, cancelled["request_id"]}, said


def _compose_line(id_: int, goal: str) -> str:
    params = {"goal": goal, "budget": 300}
    return json.dumps({"jsonrpc": "2.0", "id": id_, "method": "context/compose", "params": params})


async def test_an_id_in_flight_is_refused_to_a_second_request_until_answered(
    start_daemon, marker: str
) -> None:
    # The provider holds the answer to a goal starting "hold" until it answers another
    # query: the first request stays in flight until the test sends a second goal.
    adversarial = (
        '[[provider]]\nid = "adv"\ncommand = ["python", "-m", '
        '"tests.fixtures.adversarial_provider", "malformed", "--name", '
        f'"adv-{marker}"]\ntimeout_ms = 60000\ncwd = "{ROOT}"\n'
    )
    daemon = await start_daemon(providers={}, extra=adversarial, start_providers="boot")
    await daemon.logged("provider.handshake.ok", provider="adv")
    async with await anyio.connect_unix(daemon.socket) as stream:
        raw = Raw(stream)
        # One write: the daemon reads the held request before the second one.
        await raw.send(f"{_compose_line(7, 'hold')}\n{_compose_line(7, 'release')}\n".encode())
        refused = assert_error(await raw.line(), -32600, 7)
        assert refused["data"]["reason"] == "id_in_use", refused
        assert "in flight on this connection" in refused["message"]
        # Never run: the provider still holds the first answer until another goal comes.
        await raw.send(f"{_compose_line(8, 'release')}\n".encode())
        answered = sorted([await raw.line(), await raw.line()], key=lambda r: r["id"])
        assert [(r["id"], "prompt" in r.get("result", {})) for r in answered] == [
            (7, True),
            (8, True),
        ], answered
        # Answered, the id is free again; and no other reply for 7 was left to come.
        reused = await raw.ask(f"{_compose_line(7, 'once more')}\n".encode())
        assert reused["id"] == 7 and "prompt" in reused["result"], reused
        await assert_serving(raw)
    assert await daemon.stop() == 0


async def test_socket_is_private(start_daemon) -> None:
    daemon = await start_daemon()
    assert stat.S_IMODE(daemon.socket.stat().st_mode) == 0o600
    assert stat.S_IMODE(daemon.socket.parent.stat().st_mode) == 0o700
    assert await daemon.stop() == 0


async def test_a_stale_socket_is_replaced(start_daemon, workdir) -> None:
    run = workdir / "run"
    run.mkdir(mode=0o700)
    stale = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    stale.bind(str(run / "hostd.sock"))
    stale.close()  # the file stays, nobody listens: what a killed daemon leaves
    daemon = await start_daemon()
    async with connect(daemon.socket) as client:
        assert (await client.status())["state"] == "serving"
    assert await daemon.stop() == 0


async def test_a_live_socket_is_not_stolen(start_daemon, workdir) -> None:
    first = await start_daemon()
    second_config = workdir / "second.toml"
    second_config.write_text(first.config.read_text(), encoding="utf-8")
    from tests.server.conftest import daemon_command

    done = await anyio.run_process(
        daemon_command(second_config, "serve"), check=False, cwd=str(ROOT)
    )
    assert done.returncode == 2
    err = done.stderr.decode()
    assert "already serving" in err and "Traceback" not in err
    async with connect(first.socket) as client:
        assert (await client.status())["state"] == "serving"
    assert await first.stop() == 0


async def test_host_shutdown_stops_gracefully(start_daemon) -> None:
    daemon = await start_daemon()
    async with connect(daemon.socket) as client:
        await client.compose("warm the providers up", budget=200)
        assert (await client.shutdown()) == {"stopping": True}
    assert await daemon.wait() == 0
    assert not daemon.socket.exists()
    assert [e["reason"] for e in daemon.events("host.stopped")] == ["host/shutdown"]


async def test_sixty_four_concurrent_clients_all_compose(start_daemon) -> None:
    daemon = await start_daemon()
    results: list[ComposeResult] = []

    async def one(i: int) -> None:
        async with connect(daemon.socket) as client:
            results.append(await client.compose(f"question {i}", budget=300))

    with anyio.fail_after(90):
        async with anyio.create_task_group() as tg:
            for i in range(64):
                tg.start_soon(one, i)
    assert len(results) == 64
    assert len({r.request_id for r in results}) == 64
    for r in results:
        assert all(p.ok for p in r.providers)
    assert await daemon.stop() == 0


async def test_sigterm_under_load_loses_no_reply_in_service(start_daemon) -> None:
    # Both providers hold every answer at the gate until the daemon has taken SIGTERM:
    # each request is still in service then, however long the clients take to get in
    # (a provider merely slow by N ms could answer the first before the last arrived).
    async with Gate() as gate:
        held = {"hold_port": gate.port, "timeout_ms": 600_000}
        daemon = await start_daemon({"alpha": held, "beta": held}, grace_period_s=60)
        replies: list[Any] = []
        n = 24

        async def one(i: int) -> None:
            async with connect(daemon.socket) as client:
                replies.append(await client.compose(f"load {i}", budget=200))

        async with connect(daemon.socket) as watcher:
            await watcher.compose("start the providers", budget=200)  # the gate is open
            gate.close()
            async with anyio.create_task_group() as tg:
                for i in range(n):
                    tg.start_soon(one, i)
                # SIGTERM once every request is being served (the watcher's status is one
                # more); the answers go out only once the daemon is stopping.
                with anyio.fail_after(60):
                    await gate.wait_held(2 * n)  # each request's two legs are at the gate
                    while (await watcher.status())["in_flight"] < n + 1:
                        pass
                daemon.signal()
                await daemon.logged("host.stopping")
                gate.open()
    assert len(replies) == n
    assert all(r.request_id and len(r.providers) == 2 for r in replies)
    assert {p.status for r in replies for p in r.providers} == {"ok"}
    assert await daemon.wait() == 0
    assert not daemon.socket.exists()


async def test_a_session_reuses_verified_frames_on_its_next_turn(start_daemon) -> None:
    daemon = await start_daemon({"alpha": {}})
    async with connect(daemon.socket) as client:
        first = await client.compose("turn one", budget=300, session="s1")
        second = await client.compose("turn one", budget=300, session="s1")
    assert await daemon.stop() == 0
    assert first.verification is not None and second.verification is not None
    assert first.verification["held"] == 0
    assert second.verification["held"] == 3
    assert second.verification["verify_requested"] == 3
    # Unchanged evidence renders byte-identically across turns (prompt caches depend on it).
    assert second.prompt == first.prompt


async def test_a_second_sigterm_ends_the_grace_period_at_once(start_daemon) -> None:
    daemon = await start_daemon({"slow": STUCK}, grace_period_s=600)
    async with connect(daemon.socket) as client:
        async with anyio.create_task_group() as tg:

            async def stuck() -> None:
                with pytest.raises(RpcError) as exc:  # answered, not cut off
                    await client.compose("stuck", timeout_ms=600_000)
                assert exc.value.remote_reason == "shutting_down"

            tg.start_soon(stuck)
            with anyio.fail_after(30):
                while (await client.status())["in_flight"] < 2:
                    pass
            daemon.signal()
            await daemon.logged("host.stopping")
            daemon.signal()
    assert await daemon.wait() == 0
    assert daemon.events("host.signal.forced") and daemon.events("host.grace_expired")
    assert not daemon.socket.exists()


async def test_consent_gates_an_egress_provider_over_the_api(start_daemon) -> None:
    daemon = await start_daemon({"local": {}, "cloud": {"egress_scope": "api.example.com"}})
    async with connect(daemon.socket) as client:
        before = await client.compose("needs consent", budget=300)
        status = {p.provider_id: p for p in before.providers}
        assert status["local"].status == "ok"
        assert status["cloud"].status == "no_consent"
        assert status["cloud"].missing_scopes == ["api.example.com"]
        # "ready" in providers/list, yet asked by nothing: the row says what it lacks.
        rows = {r["id"]: r for r in await client.providers()}
        assert rows["cloud"]["consent_missing"] == ["api.example.com"]
        assert rows["local"]["consent_missing"] == []
        receipt = (await client.consent_grant("cloud", "api.example.com", "tester"))["receipt"]
        assert receipt["grantor"] == "tester" and receipt["active"]
        rows = {r["id"]: r for r in await client.providers()}
        assert rows["cloud"]["consent_missing"] == []
        after = await client.compose("needs consent", budget=300)
        assert {p.provider_id: p.status for p in after.providers}["cloud"] == "ok"
        assert [r["scope"] for r in await client.consent_list("cloud")] == ["api.example.com"]
        assert (await client.consent_revoke("cloud", "api.example.com", "tester"))["revoked"]
        again = await client.compose("needs consent", budget=300)
        assert {p.provider_id: p.status for p in again.providers}["cloud"] == "no_consent"
        with pytest.raises(RpcError) as exc:
            await client.consent_grant("nope", "x")
        assert exc.value.remote_reason == "unknown_provider"
    assert await daemon.stop() == 0
    granted = [e for e in daemon.events("consent.granted") if e["provider"] == "cloud"]
    assert len(granted) == 1


def _shared_dir(run: Path) -> None:
    run.mkdir()
    run.chmod(0o755)


def _regular_file(run: Path) -> None:
    run.mkdir()
    run.chmod(0o700)
    (run / "hostd.sock").write_text("not a socket")


@pytest.mark.parametrize(
    ("prepare", "message"),
    [(_shared_dir, "accessible by other users"), (_regular_file, "is not a socket")],
    ids=["shared-directory", "regular-file"],
)
async def test_an_unsafe_socket_path_is_refused(workdir, prepare, message) -> None:
    from tests.server.conftest import daemon_command

    run = workdir / "run"
    prepare(run)
    config = workdir / "hostd.toml"
    config.write_text(f'[host]\nsocket = "{run}/hostd.sock"\nstate_dir = "{workdir}/state"\n')
    done = await anyio.run_process(daemon_command(config, "serve"), check=False, cwd=ROOT)
    assert done.returncode == 2
    err = done.stderr.decode()
    assert message in err and "Traceback" not in err
