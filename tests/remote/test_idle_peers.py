"""The HTTPS provider server (``--http``) bounds its idle peers: a real server child
process under a 256-descriptor limit, flooded with 300 loopback connections that send
nothing, still serves a token holder afterwards, closes every idle one (before any
token is checked), and reports running out of descriptors in one line per interval,
never a traceback per attempt.

Decided by events: a token holder's reply, the end of file each idle connection sees.
The deadlines are hang guards, and the request deadline the server is given (2 s) is
what ends the idle connections, whatever the machine's speed."""

from __future__ import annotations

import resource
import socket
import ssl
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx
import orjson
import pytest

from tests.fixtures.procs import ROOT, marked_env
from tests.remote._servers import TOKEN, make_tls

FLOOD = 300
FD_LIMIT = 256
HANDSHAKE = orjson.dumps(
    {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "context/handshake",
        "params": {
            "protocol_version": "contextgraph/1.0-draft",
            "host": {"name": "t", "version": "0"},
        },
    }
)


def _limit_descriptors() -> None:  # runs in the child, before exec
    resource.setrlimit(resource.RLIMIT_NOFILE, (FD_LIMIT, FD_LIMIT))


@contextmanager
def _server(tmp_path: Path, *extra: str) -> Iterator[tuple[str, Path, Path]]:
    """``python -m providers.memory --http 127.0.0.1:0`` with TLS, a token and a 2 s
    request deadline, under ``RLIMIT_NOFILE`` 256; yields its URL, CA file and the file
    its stderr goes to."""
    tls = make_tls(tmp_path)
    token = tmp_path / "token"
    token.write_text(TOKEN + "\n")
    stderr = tmp_path / "stderr.txt"
    argv = [sys.executable, "-m", "providers.memory", "--db", str(tmp_path / "m.db")]
    argv += ["--http", "127.0.0.1:0", "--certfile", str(tls.cert_file)]
    argv += ["--keyfile", str(tls.key_file), "--token-file", str(token)]
    argv += ["--request-timeout", "2", *extra]
    with stderr.open("w") as err:
        proc = subprocess.Popen(
            argv, cwd=ROOT, env=marked_env(), stderr=err, preexec_fn=_limit_descriptors
        )
    try:
        deadline = time.monotonic() + 120  # a hang guard for the child's start
        url = None
        while url is None:
            assert proc.poll() is None, stderr.read_text()
            assert time.monotonic() < deadline, "no URL announced"
            for line in stderr.read_text().splitlines():
                if line.startswith("serving "):
                    url = line.split()[1]
            if url is None:
                time.sleep(0.05)  # polling the child's output for its URL, not a wait
        yield url, tls.ca_file, stderr
    finally:
        proc.terminate()
        proc.wait(timeout=60)


def _flood(url: str) -> list[socket.socket]:
    port = int(url.rstrip("/").rsplit(":", 1)[1])
    return [socket.create_connection(("127.0.0.1", port), timeout=60) for _ in range(FLOOD)]


def _closed_by_the_server(sock: socket.socket) -> bool:
    sock.settimeout(60)  # a hang guard: the server's 2 s deadline ends it
    try:
        return sock.recv(1) == b""
    except (ConnectionResetError, TimeoutError):
        return not isinstance(sys.exc_info()[1], TimeoutError)
    finally:
        sock.close()


def _handshake(url: str, ca_file: Path, token: str | None) -> httpx.Response:
    headers = {"content-type": "application/json"}
    if token is not None:
        headers["authorization"] = f"Bearer {token}"
    verify = ssl.create_default_context(cafile=str(ca_file))
    with httpx.Client(verify=verify, timeout=60, trust_env=False) as client:
        return client.post(url, content=HANDSHAKE, headers=headers)


@pytest.mark.slow
def test_a_flood_of_idle_connections_neither_locks_out_token_holders_nor_floods_stderr(
    tmp_path: Path,
) -> None:
    with _server(tmp_path) as (url, ca_file, stderr):
        idle = _flood(url)
        try:
            reply = _handshake(url, ca_file, TOKEN)
            assert reply.status_code == 200, reply
            assert reply.json()["result"]["provider"]["name"]
            assert _handshake(url, ca_file, "wrong").status_code == 401
        finally:
            closed = [_closed_by_the_server(s) for s in idle]
        assert all(closed), f"{closed.count(False)} idle connections left open"
        # Served again once the flood is gone, on a fresh connection.
        assert _handshake(url, ca_file, TOKEN).status_code == 200
    log = stderr.read_text()
    assert "Traceback" not in log and len(log) < 4096, log[:2000]


@pytest.mark.slow
def test_running_out_of_descriptors_is_one_line_per_interval_and_passes(tmp_path: Path) -> None:
    """A cap above the descriptor limit: accepts fail with EMFILE until the deadline
    frees descriptors; the token holder waiting in the backlog is then served."""
    started = time.monotonic()
    with _server(tmp_path, "--max-connections", "1000") as (url, ca_file, stderr):
        idle = _flood(url)
        try:
            reply = _handshake(url, ca_file, TOKEN)
            assert reply.status_code == 200, reply
        finally:
            closed = [_closed_by_the_server(s) for s in idle]
        assert all(closed), f"{closed.count(False)} idle connections left open"
    elapsed = time.monotonic() - started
    log = stderr.read_text()
    assert "Traceback" not in log, log[:2000]
    reports = [line for line in log.splitlines() if "accept failed: EMFILE" in line]
    # One line per 60 s interval at most: a bound that grows with the time taken.
    assert 1 <= len(reports) <= 1 + elapsed // 60, reports
