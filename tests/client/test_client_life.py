"""The blocking ``Client`` kept for a program's life: ``close()`` without a ``with`` block,
a reconnect after the daemon restarts, a client-side ``timeout`` that cancels the work
in the daemon, and errors a caller can catch as one ``HostdError``."""

from __future__ import annotations

import gc
import os
import subprocess
import sys
import threading
import time
import warnings
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from hostd.client import (
    CallTimeout,
    Client,
    ConnectionLost,
    HostdError,
    NoDaemon,
    RpcError,
)
from hostd.protocol import CgpErrorCode
from tests.client.test_client import ROOT
from tests.client.test_client import config as config  # noqa: F401  (the fixture)
from tests.fixtures.procs import ServeChild


@pytest.fixture
def serving(config: Path) -> Iterator[tuple[ServeChild, Path]]:
    child = ServeChild(config)
    assert child.start(60)
    try:
        yield child, config.parent / "run" / "s.sock"
    finally:
        child.stop()


def _wait_until(check: Callable[[], bool], what: str, guard_s: float = 60) -> None:
    """Poll ``check()`` until true; ``guard_s`` is only a hang guard."""
    deadline = time.monotonic() + guard_s
    while not check():
        assert time.monotonic() < deadline, what
        time.sleep(0.05)


def test_a_client_kept_without_a_with_block_is_closed_by_close(
    serving: tuple[ServeChild, Path],
) -> None:
    _, sock = serving
    hostd = Client.connect(sock)
    assert not hostd.closed
    assert hostd.compose("kept", budget=200, providers=["alpha"]).citations
    hostd.close()
    assert hostd.closed
    hostd.close()  # a second close is nothing
    with pytest.raises(ConnectionLost, match="closed"):
        hostd.status()


def test_a_socket_client_reconnects_once_its_daemon_is_back(
    serving: tuple[ServeChild, Path], config: Path
) -> None:
    child, sock = serving
    with Client.connect(sock) as hostd:
        first = hostd.status()["pid"]
        assert hostd.connected
        assert child.stop() == 0
        _wait_until(lambda: not hostd.connected, "the client saw its connection end")
        assert not hostd.closed  # ended, to be reopened
        with pytest.raises(NoDaemon):  # down: the next call says so, sends nothing
            hostd.status()
        assert child.start(60)
        # The old connection ended; the call goes out on a new one, to the new daemon.
        again = hostd.status()
        assert again["pid"] != first and again["state"] == "serving" and hostd.connected
        assert hostd.compose("after the restart", budget=200, providers=["alpha"]).citations


def test_without_reconnect_an_ended_connection_stays_ended(
    serving: tuple[ServeChild, Path],
) -> None:
    child, sock = serving
    with Client.connect(sock, reconnect=False) as hostd:
        hostd.status()
        assert child.stop() == 0
        assert child.start(60)
        _wait_until(lambda: hostd.closed, "the client saw its connection end")
        with pytest.raises(ConnectionLost):
            hostd.status()


def test_a_client_timeout_raises_and_cancels_the_work_in_the_daemon(
    serving: tuple[ServeChild, Path],
) -> None:
    _, sock = serving
    with Client.connect(sock) as hostd:
        with pytest.raises(CallTimeout) as caught:
            hostd.compose("wait", providers=["slow"], timeout_ms=600000, timeout=0.5)
        assert isinstance(caught.value, TimeoutError) and isinstance(caught.value, HostdError)
        assert "context/compose" in str(caught.value)
        # $/cancel reached the daemon: only the status call itself is in flight.
        _wait_until(lambda: hostd.status()["in_flight"] == 1, "the slow leg was cancelled")
        assert hostd.compose("still here", providers=["alpha"], timeout=60).citations


def test_an_rpc_error_carries_the_daemons_cgp_code(serving: tuple[ServeChild, Path]) -> None:
    _, sock = serving
    with Client.connect(sock) as hostd:
        with pytest.raises(RpcError) as bad:
            hostd.call("context/compose", {"goal": "x", "budget": "lots"})
        assert bad.value.cgp is CgpErrorCode.BAD_REQUEST and bad.value.rpc_code == -32602
        assert bad.value.remote_reason == "invalid_params"
        with pytest.raises(HostdError):  # every error the client raises on purpose
            hostd.compose("x", providers=["nope"])


def test_closing_a_spawned_client_stops_its_daemon(config: Path) -> None:
    hostd = Client.spawn(config, stderr=subprocess.DEVNULL, cwd=ROOT)
    pid = hostd.status()["pid"]
    hostd.close()
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)  # stopped and reaped, not left behind


def test_a_client_told_to_wait_reaches_a_daemon_that_starts_after_it(config: Path) -> None:
    sock = config.parent / "run" / "s.sock"
    child = ServeChild(config)
    answers: list[dict[str, object]] = []
    failures: list[BaseException] = []

    def script() -> None:  # a user's program, started before its daemon
        try:
            with Client.connect(sock, wait=120) as hostd:
                answers.append(hostd.status())
                assert child.stop() == 0
                _wait_until(lambda: not hostd.connected, "the client saw its daemon go")
                restarted.set()
                answers.append(hostd.status())  # waits for the daemon to be back
        except BaseException as exc:  # handed to the test's thread
            failures.append(exc)

    restarted = threading.Event()
    thread = threading.Thread(target=script)
    thread.start()
    try:
        assert child.start(60)
        assert restarted.wait(120)
        assert child.start(60)
        thread.join(120)
        assert not thread.is_alive() and not failures, failures
        assert len(answers) == 2 and answers[0]["pid"] != answers[1]["pid"]
    finally:
        child.stop()
        thread.join(10)


def test_a_timeout_that_is_not_a_positive_number_is_refused_before_any_call(
    serving: tuple[ServeChild, Path],
) -> None:
    _, sock = serving
    wrong: list[tuple[object, type[Exception]]] = [
        (0, ValueError),
        (-1, ValueError),
        (float("nan"), ValueError),
        ("5", TypeError),
        (True, TypeError),
    ]
    with Client.connect(sock) as hostd, warnings.catch_warnings():
        warnings.simplefilter("error")  # no coroutine left unawaited, say
        for timeout, error in wrong:
            with pytest.raises(error, match="timeout"):
                hostd.compose("x", timeout=timeout)  # type: ignore[arg-type]
        gc.collect()
        assert hostd.status()["in_flight"] == 1  # nothing was sent
    with pytest.raises(ValueError, match="wait"):
        Client.connect(sock, wait=-1)


def _script(code: str) -> subprocess.CompletedProcess[str]:
    """Run ``code`` as a user's program (a fresh interpreter, this checkout's hostd)."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.run(
        [sys.executable, "-c", code],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,  # a hang guard: the old loop thread kept such a program alive for ever
        check=False,
    )


def test_a_program_that_crashes_before_close_still_exits(
    serving: tuple[ServeChild, Path],
) -> None:
    """A client left open (an agent that raised before ``close()``) never keeps its
    program alive: it ends with its own status, the connection closed at exit."""
    child, sock = serving
    done = _script(
        "from hostd.client import Client\n"
        f"c = Client.connect({str(sock)!r})\n"
        "assert c.status()['pid']\n"
        "raise SystemExit('agent crashed')\n"
    )
    assert done.returncode == 1 and "agent crashed" in done.stderr, done.stderr
    # and the daemon serves on: the connection ended cleanly at the program's exit
    assert child.proc is not None
    with Client.connect(sock) as again:
        assert again.status()["pid"] == child.proc.pid


def test_a_spawned_daemon_left_open_is_stopped_when_its_program_ends(config: Path) -> None:
    done = _script(
        "import subprocess\n"
        "from hostd.client import Client\n"
        f"c = Client.spawn({str(config)!r}, stderr=subprocess.DEVNULL)\n"
        "print(c.status()['pid'], flush=True)\n"
    )  # ends without close()
    assert done.returncode == 0, done.stderr
    pid = int(done.stdout.split()[0])
    _wait_until(lambda: not Path(f"/proc/{pid}").exists(), "the spawned daemon stopped")
