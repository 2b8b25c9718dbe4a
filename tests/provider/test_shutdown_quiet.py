"""A provider told to shut down while busy exits 0 and writes no traceback to stderr."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from typing import Any

import pytest

from tests.fixtures.procs import ROOT

QUERY = {"goal": "g", "max_frames": 50, "max_tokens": 100_000}


def _req(method: str, params: Any = None, id_: int | None = None) -> bytes:
    msg: dict[str, Any] = {"jsonrpc": "2.0", "method": method}
    if params is not None:
        msg["params"] = params
    if id_ is not None:
        msg["id"] = id_
    return json.dumps(msg).encode() + b"\n"


@pytest.mark.parametrize("delay_ms", ["0", "5"])
def test_shutdown_under_load_is_quiet_and_clean(delay_ms: str) -> None:
    proc = subprocess.Popen(
        [sys.executable, "-m", "tests.fixtures.healthy_provider", "--frames", "50",
         "--delay-ms", delay_ms],
        cwd=ROOT,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )  # fmt: skip
    try:
        # Many pipelined queries, the shutdown right behind them, more lines after it,
        # and stdin closed while replies are still being written: nothing waits.
        burst = b"".join(_req("context/query", {"query": QUERY}, i) for i in range(200))
        tail = b"".join(_req("context/query", {"query": QUERY}, 1000 + i) for i in range(50))
        _, err = proc.communicate(burst + _req("context/shutdown") + tail, timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    text = err.decode("utf-8", "replace")
    assert "Traceback" not in text, text
    assert "Error" not in text, text
    assert proc.returncode == 0


def test_a_host_that_stops_reading_mid_reply_gets_a_quiet_exit() -> None:
    proc = subprocess.Popen(
        [sys.executable, "-m", "tests.fixtures.healthy_provider", "--frames", "50"],
        cwd=ROOT,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    assert proc.stdin is not None and proc.stdout is not None and proc.stderr is not None
    try:
        proc.stdin.write(
            _req(
                "context/handshake",
                {"protocol_version": "contextgraph/1.0", "host": {"name": "t", "version": "0"}},
                0,
            )
        )
        proc.stdin.flush()
        assert json.loads(proc.stdout.readline())["id"] == 0  # serving
        proc.stdout.close()  # the host goes away: every later reply hits a broken pipe
        for i in range(100):
            proc.stdin.write(_req("context/query", {"query": QUERY}, i + 1))
        proc.stdin.close()
        err = proc.stderr.read()
        proc.wait(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        proc.stderr.close()
    text = err.decode("utf-8", "replace")
    assert "Traceback" not in text, text
    assert "Exception ignored" not in text, text
    assert proc.returncode == 0
