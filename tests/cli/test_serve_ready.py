"""A daemon that is starting is waited for, and says when it is ready: ``compose
--connect`` waits for its socket (``--wait``), ``serve`` writes ``--ready-file`` and
sends ``READY=1`` to ``$NOTIFY_SOCKET`` (a real Unix datagram socket here, as
systemd's). Real ``hostd`` child processes; every wait is on an event (a datagram,
a log line, a process exit), deadlines are hang guards only."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from hostd.cli._ready import sd_notify
from hostd.client import Client
from tests.fixtures.procs import ROOT

HANG_GUARD_S = 120


def _config(tmp_path: Path, *, provider: bool = False) -> Path:
    text = (
        f'[host]\nsocket = "{tmp_path}/run/h.sock"\nstate_dir = "{tmp_path}/state"\n'
        '[log]\nlevel = "info"\n'
    )
    if provider:
        text += (
            '[[provider]]\nid = "healthy"\n'
            'command = ["python", "-m", "tests.fixtures.healthy_provider"]\n'
            f'cwd = "{ROOT}"\n'
        )
    path = tmp_path / "hostd.toml"
    path.write_text(text)
    return path


def _env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "NOTIFY_SOCKET"}
    env["PYTHONPATH"] = str(ROOT)
    return {**env, **extra}


@pytest.fixture
def notify_socket(tmp_path: Path) -> Iterator[tuple[socket.socket, str]]:
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    path = str(tmp_path / "notify.sock")
    sock.bind(path)
    sock.settimeout(HANG_GUARD_S)  # a hang guard: READY=1 is the event waited for
    try:
        yield sock, path
    finally:
        sock.close()


def _stop(proc: subprocess.Popen[str]) -> int:
    proc.send_signal(signal.SIGTERM)
    return proc.wait(timeout=HANG_GUARD_S)


def test_serve_notifies_ready_on_notify_socket_and_writes_then_removes_its_ready_file(
    tmp_path: Path, notify_socket: tuple[socket.socket, str]
) -> None:
    sock, address = notify_socket
    config = _config(tmp_path)
    ready = tmp_path / "ready.json"
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "hostd",
            "--config",
            str(config),
            "serve",
            "--ready-file",
            "ready.json",
        ],
        cwd=tmp_path,
        env=_env(NOTIFY_SOCKET=address),
        stdin=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stderr is not None
        first, second = json.loads(proc.stderr.readline()), json.loads(proc.stderr.readline())
        # The log's first line says which config file this daemon runs on; with no
        # provider in it, the next says where hostd looked and `hostd init`.
        assert (first["event"], first["config"]) == ("host.serving", str(config))
        assert second["event"] == "host.no_providers" and "hostd init" in second["message"]
        message = sock.recv(4096).decode()
        fields = dict(line.split("=", 1) for line in message.splitlines())
        assert fields["READY"] == "1" and fields["MAINPID"] == str(proc.pid)
        assert fields["STATUS"] == f"serving on {tmp_path}/run/h.sock"
        # Ready means served: the file is already there and the socket answers.
        body = json.loads(ready.read_text())
        assert body == {
            "pid": proc.pid,
            "socket": f"{tmp_path}/run/h.sock",
            "tcp": None,
            "config": str(config),
        }
        with Client.connect(tmp_path / "run" / "h.sock") as client:
            assert client.call("host/status", {})["state"] == "serving"
        proc.send_signal(signal.SIGTERM)
        assert sock.recv(64) == b"STOPPING=1"  # told as the stop begins
        assert proc.wait(timeout=HANG_GUARD_S) == 0  # one signal: a graceful stop
    finally:
        if proc.poll() is None:
            assert _stop(proc) == 0
        assert proc.stderr is not None
        proc.stderr.close()
    assert not ready.exists()


def test_sd_notify_reaches_an_abstract_socket_and_is_silent_without_one() -> None:
    name = f"hostd-test-notify-{os.getpid()}"
    with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as sock:
        sock.bind("\0" + name)
        sock.settimeout(HANG_GUARD_S)
        assert sd_notify("READY=1", {"NOTIFY_SOCKET": "@" + name})
        assert sock.recv(64) == b"READY=1"
    assert not sd_notify("READY=1", {})
    assert not sd_notify("READY=1", {"NOTIFY_SOCKET": "relative/path"})


def test_compose_connect_waits_for_a_daemon_started_after_it(tmp_path: Path) -> None:
    config = _config(tmp_path, provider=True)
    base = [sys.executable, "-m", "hostd", "--config", str(config)]
    compose = subprocess.Popen(
        [*base, "--log-level", "info", "compose", "anything", "--connect", "--wait", "600"],
        cwd=tmp_path,
        env=_env(),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    serve = None
    try:
        assert compose.stderr is not None
        for line in compose.stderr:  # the event: it is waiting for the socket
            if line.startswith("{") and json.loads(line)["event"] == "client.waiting":
                break
        else:
            pytest.fail("compose --connect ended without waiting")
        assert not (tmp_path / "run" / "h.sock").exists()  # nothing to connect to yet
        serve = subprocess.Popen(
            [*base, "serve"],
            cwd=tmp_path,
            env=_env(),
            stdin=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        out, err = compose.communicate(timeout=HANG_GUARD_S)
        assert compose.returncode == 0, err
        assert "<frame " in out and "healthy=ok(" in err
    finally:
        if compose.poll() is None:
            compose.kill()
            compose.wait()
        if serve is not None:
            serve.send_signal(signal.SIGTERM)
            assert serve.wait(timeout=HANG_GUARD_S) == 0


def test_a_wait_that_runs_out_says_how_long_it_waited(tmp_path: Path) -> None:
    config = _config(tmp_path)
    done = subprocess.run(
        [sys.executable, "-m", "hostd", "--config", str(config), "compose", "x"]
        + ["--connect", "--wait", "0.2"],
        cwd=tmp_path,
        env=_env(),
        capture_output=True,
        text=True,
        timeout=HANG_GUARD_S,
    )
    assert done.returncode == 3
    assert f"no daemon at {tmp_path}/run/h.sock" in done.stderr and "waited 0.2 s" in done.stderr


def test_a_killed_daemons_ready_file_is_gone_before_the_next_one_serves_and_both_are_logged(
    tmp_path: Path, notify_socket: tuple[socket.socket, str]
) -> None:
    sock, address = notify_socket
    config = _config(tmp_path)
    ready = tmp_path / "ready.json"
    command = [sys.executable, "-m", "hostd", "--config", str(config), "serve"]
    command += ["--ready-file", str(ready)]

    def serve() -> subprocess.Popen[str]:
        return subprocess.Popen(
            command,
            cwd=tmp_path,
            env=_env(NOTIFY_SOCKET=address),
            stdin=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
        )

    first = serve()
    try:
        assert sock.recv(4096).startswith(b"READY=1")  # the event: it serves
        first.kill()  # no clean stop: its socket, lock record and ready file stay
        first.wait(timeout=HANG_GUARD_S)
    finally:
        if first.poll() is None:
            first.kill()
            first.wait()
        assert first.stderr is not None
        first.stderr.close()
    assert json.loads(ready.read_text())["pid"] == first.pid  # what a poller would find
    assert (tmp_path / "run" / "h.sock").exists()

    second = serve()
    try:
        assert second.stderr is not None
        events: dict[str, dict[str, object]] = {}
        for line in second.stderr:
            event = json.loads(line)
            events[event["event"]] = event
            if event["event"] == "host.serving":
                # Serving now, its ready file not yet written: the killed one's is gone.
                if ready.exists():
                    assert json.loads(ready.read_text())["pid"] == second.pid
            if {"host.unclean_stop", "host.ready_file.stale"} <= events.keys():
                break
        else:
            pytest.fail(f"hostd serve ended: {second.wait()}")
        unclean, stale = events["host.unclean_stop"], events["host.ready_file.stale"]
        assert unclean["pid"] == first.pid and unclean["socket"] == f"{tmp_path}/run/h.sock"
        assert unclean["level"] == "warning"
        assert stale == {**stale, "file": str(ready), "pid": first.pid, "level": "warning"}
        assert sock.recv(4096).startswith(b"READY=1")
        assert json.loads(ready.read_text())["pid"] == second.pid
        assert _stop(second) == 0
    finally:
        if second.poll() is None:
            second.kill()
            second.wait()
        assert second.stderr is not None
        second.stderr.close()
    assert not ready.exists()
    # After a clean stop, nothing is said: the next start's log goes on as ever.
    third = serve()
    try:
        assert third.stderr is not None
        lines = [json.loads(third.stderr.readline())["event"] for _ in range(2)]
        assert lines == ["host.serving", "host.no_providers"]
        assert _stop(third) == 0
    finally:
        if third.poll() is None:
            third.kill()
            third.wait()
        assert third.stderr is not None
        third.stderr.close()
