"""``host/reload``, ``hostd reload`` and SIGHUP apply an edited config file to a running
daemon without restarting what did not change.

A real ``hostd serve`` with real provider children: the file is rewritten, the daemon
asked to read it again (over its socket, by the CLI, or by SIGHUP), and what it did is
read from its reply, ``providers/list``, ``host/status``, /proc and its log events,
never from a sleep.
"""

from __future__ import annotations

import json
import signal
import threading
from pathlib import Path
from typing import Any

import anyio
import pytest

from hostd import compose
from hostd.client import connect
from hostd.config import load_config
from hostd.errors import ConfigError, RpcError
from hostd.server import Daemon
from tests.compose._token_fixtures import minilm_tokenizer_path
from tests.fixtures.cli import run_hostd
from tests.fixtures.procs import ROOT, marked_env, python
from tests.server.conftest import STUCK, DaemonProc, write_config

pytestmark = pytest.mark.anyio


async def _rows(daemon: DaemonProc) -> dict[str, dict[str, Any]]:
    async with connect(daemon.socket) as client:
        rows = (await client.call("providers/list", {}))["providers"]
    return {row["id"]: row for row in rows}


async def _ready_pids(daemon: DaemonProc, ids: list[str], handshakes: int) -> dict[str, int]:
    """Each provider's pid once the daemon has logged ``handshakes`` handshakes of it."""
    for pid in ids:
        await daemon.logged_times("provider.handshake.ok", handshakes, provider=pid)
    rows = await _rows(daemon)
    return {pid: rows[pid]["health"]["pid"] for pid in ids}


def _exited(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat", "rb") as fh:
            state = fh.read().rsplit(b")", 1)[1].split()[0]
    except OSError:
        return True
    return state == b"Z"


async def _reload(daemon: DaemonProc) -> dict[str, Any]:
    async with connect(daemon.socket) as client:
        result: dict[str, Any] = await client.call("host/reload", {})
    return result


async def test_a_reload_keeps_the_unchanged_restarts_the_changed_and_starts_the_added(
    start_daemon: Any, workdir: Any, marker: str
) -> None:
    providers: dict[str, dict[str, Any]] = {"alpha": {}, "beta": {}, "gamma": {}}
    daemon = await start_daemon(providers=providers, start_providers="boot")
    before = await _ready_pids(daemon, ["alpha", "beta", "gamma"], 1)

    edited = {"alpha": {}, "beta": {"frames": 2}, "delta": {}}
    daemon.config.write_text(
        write_config(workdir, marker, edited, start_providers="boot"), encoding="utf-8"
    )
    result = await _reload(daemon)

    assert result["started"] == ["delta"]
    assert result["stopped"] == ["gamma"]
    assert result["restarted"] == ["beta"]
    assert result["kept"] == ["alpha"]
    assert result["needs_restart"] == []
    assert _exited(before["gamma"]) and _exited(before["beta"])  # gone before the reply
    after = await _ready_pids(daemon, ["alpha", "delta"], 1)
    assert after["alpha"] == before["alpha"]  # the same process, warm
    assert (await _ready_pids(daemon, ["beta"], 2))["beta"] != before["beta"]
    async with connect(daemon.socket) as client:
        status = await client.call("host/status", {})
        reply = await client.call("context/compose", {"goal": "g", "providers": ["delta"]})
    assert status["providers"] == 3
    assert set(await _rows(daemon)) == {"alpha", "beta", "delta"}
    (leg,) = reply["providers"]
    assert (leg["provider_id"], leg["status"]) == ("delta", "ok")
    reloaded = await daemon.logged("host.reloaded")
    assert reloaded["trigger"] == "host/reload" and reloaded["stopped"] == ["gamma"]
    assert await daemon.stop() == 0


async def test_an_invalid_config_changes_nothing_and_is_told_as_bad_config(
    start_daemon: Any,
) -> None:
    daemon = await start_daemon(providers={"alpha": {}}, start_providers="boot")
    (alpha,) = (await _ready_pids(daemon, ["alpha"], 1)).values()
    good = daemon.config.read_text(encoding="utf-8")
    daemon.config.write_text(good.replace("timeout_ms = 60000", 'timeout_ms = "x"'))

    with pytest.raises(RpcError) as caught:
        await _reload(daemon)
    assert caught.value.remote_reason == "bad_config"
    assert caught.value.message.startswith("config not reloaded (the daemon keeps running")
    assert "timeout_ms" in caught.value.message
    failed = await daemon.logged("host.reload.failed")
    assert failed["level"] == "error" and failed["trigger"] == "host/reload"

    said = await anyio.to_thread.run_sync(
        lambda: run_hostd("--config", str(daemon.config), "reload")
    )
    assert said.returncode == 2, said.stderr
    assert "config not reloaded" in said.stderr and "timeout_ms" in said.stderr

    async with connect(daemon.socket) as client:
        reply = await client.call("context/compose", {"goal": "g"})
    assert [(p["provider_id"], p["status"]) for p in reply["providers"]] == [("alpha", "ok")]
    assert (await _rows(daemon))["alpha"]["health"]["pid"] == alpha
    assert not daemon.events("host.reloaded")
    assert await daemon.stop() == 0


async def test_a_listener_change_is_named_needs_restart_and_the_rest_is_applied(
    start_daemon: Any,
) -> None:
    daemon = await start_daemon(providers={"alpha": {}})
    text = daemon.config.read_text(encoding="utf-8")
    edited = text.replace("[host]\n", "[host]\ndefault_budget = 1234\n", 1)
    daemon.config.write_text(edited + "\n[tcp]\nport = 47999\n", encoding="utf-8")

    said = await anyio.to_thread.run_sync(
        lambda: run_hostd("--config", str(daemon.config), "reload")
    )

    assert said.returncode == 0, said.stderr
    lines = said.stdout.splitlines()
    assert "kept: alpha" in lines
    assert "applied: host.default_budget" in lines
    assert any(line.startswith("needs-restart: tcp.port (") for line in lines), lines
    warned = await daemon.logged("host.reload.needs_restart")
    assert warned["keys"] == ["tcp.port"]
    async with connect(daemon.socket) as client:
        status = await client.call("host/status", {})
        reply = await client.call("context/compose", {"goal": "g"})
    assert status["tcp"] is None  # the old value stays in force: no TCP listener
    assert reply["usage"]["global_budget"] == 1234  # the applied default, for the next request
    assert await daemon.stop() == 0


async def test_sighup_reloads_as_host_reload_does_and_an_invalid_file_leaves_it_serving(
    start_daemon: Any, workdir: Any, marker: str
) -> None:
    daemon = await start_daemon(providers={"alpha": {}}, start_providers="boot")
    (alpha,) = (await _ready_pids(daemon, ["alpha"], 1)).values()
    edited: dict[str, dict[str, Any]] = {"alpha": {}, "delta": {}}
    daemon.config.write_text(
        write_config(workdir, marker, edited, start_providers="boot"), encoding="utf-8"
    )

    daemon.signal(signal.SIGHUP)
    reloaded = await daemon.logged("host.reloaded", trigger="SIGHUP")

    assert (reloaded["started"], reloaded["kept"]) == (["delta"], ["alpha"])
    await _ready_pids(daemon, ["delta"], 1)
    daemon.config.write_text("[host\n", encoding="utf-8")
    daemon.signal(signal.SIGHUP)
    failed = await daemon.logged("host.reload.failed", trigger="SIGHUP")
    assert failed["level"] == "error" and "not valid TOML" in failed["error"]
    rows = await _rows(daemon)
    assert sorted(rows) == ["alpha", "delta"] and rows["alpha"]["health"]["pid"] == alpha
    assert await daemon.stop() == 0


async def test_a_request_in_flight_on_a_removed_provider_fails_that_leg_alone(
    start_daemon: Any, workdir: Any, marker: str
) -> None:
    daemon = await start_daemon(providers={"alpha": {}, "stuck": STUCK}, start_providers="boot")
    await _ready_pids(daemon, ["alpha", "stuck"], 1)
    replies: list[dict[str, Any]] = []

    async def compose() -> None:
        async with connect(daemon.socket) as client:
            replies.append(await client.call("context/compose", {"goal": "g"}))

    async with anyio.create_task_group() as tg:
        tg.start_soon(compose)
        await daemon.logged("provider.leg", provider="alpha")  # the stuck leg is still out
        daemon.config.write_text(
            write_config(workdir, marker, {"alpha": {}}, start_providers="boot"),
            encoding="utf-8",
        )
        result = await _reload(daemon)
    assert result["stopped"] == ["stuck"]
    (reply,) = replies
    _assert_the_removed_leg_failed_alone(reply, "stuck")
    assert await daemon.stop() == 0


def _assert_the_removed_leg_failed_alone(reply: dict[str, Any], removed: str) -> None:
    """A composition a reload removed ``removed`` under: alpha's leg answered, and the
    removed one's failed saying why."""
    legs = {p["provider_id"]: p for p in reply["providers"]}
    assert legs["alpha"]["status"] == "ok"
    assert legs[removed]["status"] == "crashed", legs[removed]
    assert legs[removed]["error"]["message"] == (
        "provider stopped by a config reload: removed from the config"
    )


async def test_hostd_reload_with_no_daemon_says_so(start_daemon: Any, workdir: Any) -> None:
    config = workdir / "none.toml"
    config.write_text(f'[host]\nsocket = "{workdir / "no.sock"}"\n', encoding="utf-8")
    said = await anyio.to_thread.run_sync(lambda: run_hostd("--config", str(config), "reload"))
    assert said.returncode == 3
    assert "nothing to reload" in said.stderr


async def test_keys_a_reload_left_for_a_restart_stay_in_status_until_one(
    start_daemon: Any,
) -> None:
    daemon = await start_daemon(providers={"alpha": {}})
    text = daemon.config.read_text(encoding="utf-8")
    daemon.config.write_text(text + "\n[log]\nmax_bytes = 200000\n", encoding="utf-8")
    config = ("--config", str(daemon.config))
    said = await anyio.to_thread.run_sync(lambda: run_hostd(*config, "reload"))
    assert said.returncode == 0, said.stderr
    daemon.config.write_text(  # another edit, applied: the first key is still pending
        text.replace("[host]\n", "[host]\ndefault_budget = 1234\n", 1)
        + "\n[log]\nmax_bytes = 200000\n",
        encoding="utf-8",
    )
    said = await anyio.to_thread.run_sync(lambda: run_hostd(*config, "reload"))
    assert said.returncode == 0 and "needs-restart" not in said.stdout, said.stdout

    async with connect(daemon.socket) as client:
        assert (await client.call("host/status", {}))["config_needs_restart"] == ["log.max_bytes"]
    shown = await anyio.to_thread.run_sync(lambda: run_hostd(*config, "status"))
    assert shown.returncode == 0, shown.stderr
    assert "needs-restart: log.max_bytes (changed in the config file;" in shown.stdout
    as_json = await anyio.to_thread.run_sync(lambda: run_hostd(*config, "status", "--json"))
    status = json.loads(as_json.stdout)
    assert status["config_needs_restart"] == ["log.max_bytes"] and status["config_changed"]

    daemon.config.write_text(text, encoding="utf-8")  # edited back: nothing pending
    said = await anyio.to_thread.run_sync(lambda: run_hostd(*config, "reload"))
    assert said.returncode == 0, said.stderr
    async with connect(daemon.socket) as client:
        assert (await client.call("host/status", {}))["config_needs_restart"] == []
    assert await daemon.stop() == 0


def _local_config(path: Path, providers: list[str], tokenizer: Path) -> Path:
    """A config file for an in-process daemon: the healthy fixture as each provider, and
    ``tokenizer``, so a composition counts its floors in a worker thread."""
    env = "{ " + ", ".join(f"{k} = {json.dumps(v)}" for k, v in marked_env().items()) + " }"
    lines = ["[host]", f'state_dir = "{path.parent / "state"}"', f'tokenizer = "{tokenizer}"']
    for pid in providers:
        command = python("tests.fixtures.healthy_provider", "--name", pid)
        lines += ["", "[[provider]]", f'id = "{pid}"', f"command = {json.dumps(command)}"]
        lines += ["timeout_ms = 60000", f'cwd = "{ROOT}"', f"env = {env}"]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def _hold_admission(monkeypatch: pytest.MonkeyPatch) -> tuple[threading.Event, threading.Event]:
    """Each request, as it counts its floors in a worker thread (its admission), sets the
    first event and waits for the second: a test reloads while it is held."""
    counting, go = threading.Event(), threading.Event()
    admit = compose.admit_request

    def held(*args: Any, **kwargs: Any) -> Any:
        counting.set()
        go.wait(120)  # a hang guard: the test sets it
        return admit(*args, **kwargs)

    monkeypatch.setattr(compose, "admit_request", held)
    return counting, go


async def test_a_provider_removed_while_a_request_counted_its_floors_fails_that_leg_alone(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The request reads its providers, then counts its floors in a worker thread; the
    # reload runs while that thread is held, so the fan-out names a provider it removed.
    counting, go = _hold_admission(monkeypatch)
    path = _local_config(tmp_path / "hostd.toml", ["alpha", "beta"], minilm_tokenizer_path())
    daemon = Daemon(load_config(path))
    replies: list[dict[str, Any]] = []
    with anyio.fail_after(120):  # a hang guard
        async with daemon.local() as session:

            async def ask() -> None:
                params = {"goal": "g", "providers": ["alpha", "beta"], "floors": []}
                replies.append(await session.call("context/compose", params))

            async with anyio.create_task_group() as tg:
                tg.start_soon(ask)
                await anyio.to_thread.run_sync(counting.wait)
                _local_config(path, ["alpha"], minilm_tokenizer_path())
                result = await daemon.reload("test")
                go.set()
            assert result["stopped"] == ["beta"]
            with pytest.raises(RpcError) as after:  # a request made after it: unknown
                await session.call("context/compose", {"goal": "g", "providers": ["beta"]})
    assert after.value.remote_reason == "unknown_provider"
    (reply,) = replies
    _assert_the_removed_leg_failed_alone(reply, "beta")


async def test_a_changed_weight_or_timeout_ms_is_applied_in_place_keeping_the_process(
    start_daemon: Any, workdir: Any, marker: str
) -> None:
    providers: dict[str, dict[str, Any]] = {"alpha": STUCK, "beta": {}}
    daemon = await start_daemon(providers=providers, start_providers="boot")
    before = await _ready_pids(daemon, ["alpha", "beta"], 1)
    edited = {"alpha": {**STUCK, "timeout_ms": 500}, "beta": {}}
    text = write_config(workdir, marker, edited, start_providers="boot")
    daemon.config.write_text(
        text.replace('id = "beta"\n', 'id = "beta"\nweight = 3.0\n'), encoding="utf-8"
    )

    result = await _reload(daemon)

    assert (result["updated"], result["restarted"], result["kept"]) == (["alpha", "beta"], [], [])
    async with connect(daemon.socket) as client:
        reply = await client.call(
            "context/compose", {"goal": "g", "budget": 1000, "overfetch": 1.0}
        )
    legs = {p["provider_id"]: p for p in reply["providers"]}
    # alpha never answers: its leg ends at the new deadline, not the old one (10 minutes)
    assert legs["alpha"]["status"] == "timeout"
    assert legs["alpha"]["error"]["message"].startswith("no reply within 500 ms"), legs["alpha"]
    assert legs["beta"]["max_tokens"] == 3 * legs["alpha"]["max_tokens"]  # a share of 3:1
    rows = await _rows(daemon)
    assert {pid: rows[pid]["health"]["pid"] for pid in before} == before
    said = await anyio.to_thread.run_sync(
        lambda: run_hostd("--config", str(daemon.config), "reload")
    )
    assert said.returncode == 0 and "updated: -" in said.stdout.splitlines(), said.stdout
    assert await daemon.stop() == 0


@pytest.mark.parametrize(
    ("first", "cap", "said", "running"),
    [
        # A backoff cap below its base: the key named.
        ("restart_backoff_s = 1", "restart_backoff_max_s = 0.5", "below restart_backoff_s (1)", 5),
        # A cool-down cap below its first: both keys named.
        (
            "retry_failed_after_s = 600",
            "retry_failed_max_s = 120",
            "120 is below retry_failed_after_s (600)",
            3600,
        ),
    ],
)
async def test_a_cap_below_its_first_value_is_refused_at_a_reload_with_the_keys_named(
    tmp_path: Path, first: str, cap: str, said: str, running: float
) -> None:
    path = tmp_path / "hostd.toml"
    text = f'[host]\nstate_dir = "{tmp_path / "state"}"\n{first}\n'
    path.write_text(text, encoding="utf-8")
    daemon = Daemon(load_config(path))
    with anyio.fail_after(60):  # a hang guard
        async with daemon.local():
            path.write_text(f"{text}{cap}\n", encoding="utf-8")
            with pytest.raises(ConfigError) as caught:
                await daemon.reload("test")
    key = cap.split(" = ")[0]
    assert caught.value.data["key"] == f"host.{key}"
    assert caught.value.data["stage"] == "reload"
    assert said in caught.value.message
    assert getattr(daemon.config.host, key) == running  # nothing changed


async def _hostd(*args: str) -> Any:
    return await anyio.to_thread.run_sync(lambda: run_hostd(*args))


async def _socket_moved(
    start_daemon: Any, workdir: Any, marker: str, providers: list[str]
) -> tuple[Any, str, Path]:
    """A daemon serving alpha, its config then edited to ``providers`` and another
    socket: the daemon, the socket it serves at, and the one the config names now."""
    daemon = await start_daemon(providers={"alpha": {}})
    old = str(workdir / "run" / "hostd.sock")
    moved = workdir / "run" / "moved.sock"
    text = write_config(workdir, marker, {pid: {} for pid in providers})
    daemon.config.write_text(text.replace(old, str(moved)), encoding="utf-8")
    return daemon, old, moved


async def test_hostd_reload_after_a_socket_edit_reaches_the_daemon_at_its_old_socket(
    start_daemon: Any, workdir: Any, marker: str
) -> None:
    daemon, old, moved = await _socket_moved(start_daemon, workdir, marker, ["alpha", "beta"])

    said = await _hostd("--config", str(daemon.config), "reload")

    assert said.returncode == 0, said.stderr
    assert f"serves at {old}, not at {moved} (the socket the config names)" in said.stderr
    lines = said.stdout.splitlines()
    assert "started: beta" in lines and "kept: alpha" in lines, lines
    assert any(line.startswith("needs-restart: host.socket (") for line in lines), lines
    assert sorted(await _rows(daemon)) == ["alpha", "beta"]  # the daemon at the old socket
    assert not moved.exists()
    assert await daemon.stop() == 0


async def test_hostd_status_and_stop_after_a_socket_edit_reach_the_daemon_at_its_old_socket(
    start_daemon: Any, workdir: Any, marker: str
) -> None:
    daemon, old, moved = await _socket_moved(start_daemon, workdir, marker, ["alpha"])
    assert (await _hostd("--config", str(daemon.config), "reload")).returncode == 0

    status = await _hostd("--config", str(daemon.config), "status")

    assert status.returncode == 0, status.stderr
    assert f"socket: {old}" in status.stdout.splitlines(), status.stdout
    assert f"serves at {old}, not at {moved} (the socket the config names)" in status.stderr
    assert "needs-restart: host.socket (" in status.stdout

    stop = await _hostd("--config", str(daemon.config), "stop")

    assert stop.returncode == 0, stop.stderr
    assert stop.stdout == f"stopped hostd (pid {daemon.process.pid}) at {old}\n"
    assert f"serves at {old}, not at {moved} (the socket the config names)" in stop.stderr
    assert await daemon.wait() == 0
    assert not moved.exists()


async def test_hostd_reload_status_and_stop_after_a_state_dir_edit_find_the_daemon(
    start_daemon: Any, workdir: Any, marker: str
) -> None:
    """The daemon's lock stays in the state directory it started with; a record in the
    per-user state directory says which one, so the edited config still finds it."""
    daemon = await start_daemon(providers={"alpha": {}})
    old, moved = str(workdir / "run" / "hostd.sock"), workdir / "run" / "moved.sock"
    state, elsewhere = str(workdir / "state"), workdir / "state2"
    text = write_config(workdir, marker, {"alpha": {}, "beta": {}})
    text = text.replace(old, str(moved)).replace(state, str(elsewhere))
    daemon.config.write_text(text, encoding="utf-8")

    reload = await _hostd("--config", str(daemon.config), "reload")

    assert reload.returncode == 0, reload.stderr
    assert f"serves at {old}, not at {moved} (the socket the config names)" in reload.stderr
    assert f"with its state in {state}, not in {elsewhere} (the config's" in reload.stderr
    lines = reload.stdout.splitlines()
    assert "started: beta" in lines, lines
    assert any(line.startswith("needs-restart: host.state_dir (") for line in lines), lines

    status = await _hostd("--config", str(daemon.config), "status")
    assert status.returncode == 0, status.stderr
    assert f"socket: {old}" in status.stdout.splitlines(), status.stdout

    stop = await _hostd("--config", str(daemon.config), "stop")
    assert stop.returncode == 0, stop.stderr
    assert stop.stdout == f"stopped hostd (pid {daemon.process.pid}) at {old}\n"
    assert await daemon.wait() == 0


def _memory_config(path: Path, providers: list[str]) -> Path:
    """A config file for an in-process daemon: ``providers.memory`` as each provider,
    each with its own database beside the file."""
    env = "{ " + ", ".join(f"{k} = {json.dumps(v)}" for k, v in marked_env().items()) + " }"
    lines = ["[host]", f'state_dir = "{path.parent / "state"}"']
    for pid in providers:
        command = python("providers.memory", "--db", str(path.parent / f"{pid}.db"))
        lines += ["", "[[provider]]", f'id = "{pid}"', f"command = {json.dumps(command)}"]
        lines += ["timeout_ms = 60000", f'cwd = "{ROOT}"', f"env = {env}"]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


@pytest.mark.parametrize("method", ["memory/remember", "memory/forget"])
async def test_a_write_to_a_provider_removed_while_it_was_held_is_refused_and_not_written(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, method: str
) -> None:
    # The write has its provider's connection in hand; the reload removes the provider
    # before a byte is sent: the write is answered with the reload's words, typed, and
    # the provider never stores it.
    from hostd.engine import _pool

    path = _memory_config(tmp_path / "hostd.toml", ["notes", "scratch"])
    ready = _pool.ProviderPool.ready
    held, go = anyio.Event(), anyio.Event()

    async def hold(self: Any, slot: Any, deadline: float | None = None) -> Any:
        conn = await ready(self, slot, deadline)
        if slot.spec.id == "scratch" and not held.is_set():
            held.set()
            await go.wait()
        return conn

    params: dict[str, Any] = {"provider": "scratch"}
    if method == "memory/remember":
        params |= {"kind": "fact", "title": "t", "content": "Deploys happen on Tuesdays."}
    else:
        params |= {"id": "mem-1"}
    daemon = Daemon(load_config(path))
    caught: list[RpcError] = []
    with anyio.fail_after(120):  # a hang guard
        async with daemon.local() as session:
            # One entry there already: a forget that reached it would remove it.
            await session.call(
                "memory/remember",
                {"provider": "scratch", "kind": "fact", "title": "a", "content": "b"},
            )
            monkeypatch.setattr(_pool.ProviderPool, "ready", hold)

            async def write() -> None:
                with pytest.raises(RpcError) as refused:
                    await session.call(method, params)
                caught.append(refused.value)

            async with anyio.create_task_group() as tg:
                tg.start_soon(write)
                await held.wait()
                _memory_config(path, ["notes"])
                result = await daemon.reload("test")
                go.set()
            assert result["stopped"] == ["scratch"]
    (error,) = caught
    assert error.remote_reason == "crashed", error
    assert error.message == (
        "provider 'scratch' stopped by a config reload: removed from the config; "
        "nothing was written"
    )
    from providers.memory import MemoryStore

    with MemoryStore(tmp_path / "scratch.db") as store:
        assert [e.frame_id for e in store.list(include_all=True)] == ["mem-1"]


async def test_a_write_sent_when_a_reload_removes_its_provider_is_answered_and_stored(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The write is on its way to the provider when the reload retires it: the process
    # is stopped only once the write is answered, so it is stored whole and said so.
    from hostd.engine import _pool
    from hostd.transport.process import _connection
    from providers.memory import MemoryStore

    path = _memory_config(tmp_path / "hostd.toml", ["notes", "scratch"])
    remember, stop_retired = (
        _connection.ProviderConnection.remember,
        _pool.ProviderPool.stop_retired,
    )
    sending, stopping, go = anyio.Event(), anyio.Event(), anyio.Event()

    async def held_remember(self: Any, request: Any, *, deadline: float | None = None) -> Any:
        sending.set()
        await go.wait()
        return await remember(self, request, deadline=deadline)

    async def seen_stop(self: Any, retired: Any) -> None:
        stopping.set()
        await stop_retired(self, retired)

    monkeypatch.setattr(_connection.ProviderConnection, "remember", held_remember)
    monkeypatch.setattr(_pool.ProviderPool, "stop_retired", seen_stop)
    daemon = Daemon(load_config(path))
    replies: list[dict[str, Any]] = []
    params = {"provider": "scratch", "kind": "fact", "title": "t", "content": "c"}
    with anyio.fail_after(120):  # a hang guard
        async with daemon.local() as session:

            async def write() -> None:
                replies.append(await session.call("memory/remember", params))

            async def reload() -> None:
                replies.append(await daemon.reload("test"))

            async with anyio.create_task_group() as tg:
                tg.start_soon(write)
                await sending.wait()
                _memory_config(path, ["notes"])
                tg.start_soon(reload)
                await stopping.wait()  # the provider is retired, its stop begun
                go.set()
    written, reloaded = replies
    assert reloaded["stopped"] == ["scratch"]
    assert (written["provider"], written["id"]) == ("scratch", "mem-1")
    with MemoryStore(tmp_path / "scratch.db") as store:
        assert [e.frame_id for e in store.list(include_all=True)] == ["mem-1"]


async def test_progress_counts_the_providers_a_request_naming_none_asks_after_a_reload(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The request began under the old config (alpha, beta, gamma) and fans out after
    # the reload left only alpha: its notes count the one leg it runs, not three.
    counting, go = _hold_admission(monkeypatch)
    tokenizer = minilm_tokenizer_path()
    path = _local_config(tmp_path / "hostd.toml", ["alpha", "beta", "gamma"], tokenizer)
    daemon = Daemon(load_config(path))
    replies: list[dict[str, Any]] = []
    notes: list[dict[str, Any]] = []
    with anyio.fail_after(120):  # a hang guard
        async with daemon.local() as session:

            async def ask() -> None:
                params = {"goal": "g", "floors": [], "progress_token": "p"}
                replies.append(
                    await session.call("context/compose", params, on_progress=notes.append)
                )

            async with anyio.create_task_group() as tg:
                tg.start_soon(ask)
                await anyio.to_thread.run_sync(counting.wait)
                _local_config(path, ["alpha"], tokenizer)
                await daemon.reload("test")
                go.set()
    (reply,) = replies
    assert [p["provider_id"] for p in reply["providers"]] == ["alpha"]
    legs = [n for n in notes if "done" in n]
    assert [(n["provider"], n["done"], n["total"]) for n in legs] == [("alpha", 1, 1)], notes
    assert {n["total"] for n in notes} == {1}, notes
