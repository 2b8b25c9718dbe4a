"""``providers/list`` and ``hostd providers`` show the ``[reranker]``, over a real daemon.

A ``strategy: "rerank"`` composition that falls back says so in its own audit; the
reranker's entry (a key of its own beside ``providers``) is where a user sees that a
rerank server is cooling down or a reranker process is up: its kind, state, failures
in a row, when it is tried again, why the latest ask fell back, and how many asks fell
back. Its URL is shown without the query, and never the credential (C8). Without a
``[reranker]`` the entry is ``null`` and the CLI prints no line for it.
"""

from __future__ import annotations

import json
import socket
from pathlib import Path
from typing import Any

import anyio
import pytest

from hostd.cli._daemon import FAILING_LEGS
from hostd.client import connect
from tests.server.conftest import ROOT, daemon_command
from tests.server.test_rerank import PROVIDERS, _record, reranker_table
from tests.server.test_rerank_server import REFUSED_HINT, TOKEN, rerank_server, server_table

pytestmark = pytest.mark.anyio

#: What the rerank server's URL carries in its query: a key some servers take there.
QUERY_KEY = "qk-5e1f0a9c33d2"


def _closed_port() -> int:
    """A loopback port bound and closed again: nothing listens, a connect is refused."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
    return port


async def _cli(daemon: Any, *args: str) -> tuple[str, str]:
    """``hostd providers ARGS --connect`` against ``daemon``: its stdout and stderr."""
    command = [*daemon_command(daemon.config, "providers", *args), "--connect", str(daemon.socket)]
    done = await anyio.run_process(command, cwd=ROOT, check=False)
    assert done.returncode == 0, done.stderr.decode()
    return done.stdout.decode(), done.stderr.decode()


def _reranker_line(stdout: str) -> list[str]:
    (line,) = [x for x in stdout.splitlines() if x.startswith("[reranker]")]
    return line.split("\t")


async def test_a_refused_rerank_server_is_listed_failed_and_cooling_down(
    start_daemon: Any, workdir: Path
) -> None:
    port = _closed_port()
    token = workdir / "rerank.token"
    token.write_text(TOKEN)
    # The cool-down (10 min) is a hang guard's length: the listing always falls in it.
    table = (
        f'[reranker]\nurl = "http://127.0.0.1:{port}/v1?key={QUERY_KEY}"\n'
        f'token_file = "{token}"\ntimeout_ms = 60000\ncool_down_after = 1\n'
        "cool_down_ms = 600000\nmax_cool_down_ms = 600000\n"
    )
    daemon = await start_daemon(providers=PROVIDERS, extra=table)
    async with connect(daemon.socket) as client:
        result = await client.compose("why", budget=4000, strategy="rerank")
        listed = await client.call("providers/list")
    assert _record(result)["reason"] == "unavailable"
    # The providers' rows are as they were: providers alone.
    assert [p["id"] for p in listed["providers"]] == ["alpha", "beta"]
    row = listed["reranker"]
    health = row["health"]
    assert (row["id"], row["kind"], row["binding"], row["state"]) == (
        "reranker",
        "url",
        "http",
        "failed",
    )
    assert (row["asks"], row["fallbacks"], health["consecutive_failures"]) == (1, 1, 1)
    assert 0 < health["retry_in_s"] <= 600
    assert row["last_fallback"].startswith("unavailable: ConnectError")
    assert health["last_failure"] == row["last_fallback"]
    assert row["remote"]["url"] == f"http://127.0.0.1:{port}/v1/rerank"
    assert row["remote"]["credential"] == "<redacted>"
    shown = json.dumps(listed)
    assert QUERY_KEY not in shown and TOKEN not in shown

    # Asked again while it cools down: not sent, a fallback all the same, and the CLI says so.
    async with connect(daemon.socket) as client:
        await client.compose("why", budget=4000, strategy="rerank")
    stdout, stderr = await _cli(daemon)
    fields = _reranker_line(stdout)
    assert fields[:5] == [
        "[reranker]",
        "url",
        "failed",
        "cohere",
        f"http://127.0.0.1:{port}/v1/rerank bearer <redacted>",
    ]
    assert fields[5].startswith(
        "asks 2, fallbacks 2, 1 failure in a row, cooling down: next try in "
    )
    assert (
        "hostd: [reranker]: the last ask fell back: unavailable: cooling_down: 1 failure in a row"
        in stderr
    )
    assert [x.split("\t")[0] for x in stdout.splitlines()] == ["alpha", "beta", "[reranker]"]
    stdout, _ = await _cli(daemon, "--json")
    printed = json.loads(stdout)
    assert [p["id"] for p in printed["providers"]] == ["alpha", "beta"]
    assert (printed["reranker"]["state"], printed["reranker"]["health"]["skipped"]) == ("failed", 1)
    assert QUERY_KEY not in stdout + stderr and TOKEN not in stdout + stderr
    assert await daemon.stop() == 0


async def test_a_reranker_process_is_listed_up_with_its_verdicts(
    start_daemon: Any, marker: str
) -> None:
    daemon = await start_daemon(providers=PROVIDERS, extra=reranker_table("reverse", marker))
    async with connect(daemon.socket) as client:
        result = await client.compose("why", budget=4000, strategy="rerank")
        listed = await client.call("providers/list")
    assert _record(result)["reason"] is None
    row = listed["reranker"]
    assert (row["kind"], row["binding"], row["state"]) == ("process", "jsonrpc", "ready")
    assert (row["asks"], row["fallbacks"], row["last_fallback"]) == (1, 0, None)
    assert row["health"]["consecutive_failures"] == 0 and "remote" not in row
    assert row["info"]["name"] == "fixture-reranker"
    stdout, stderr = await _cli(daemon)
    fields = _reranker_line(stdout)
    assert fields == [
        "[reranker]",
        "process",
        "ready",
        "fixture-reranker 1",
        "-",
        "asks 1, fallbacks 0",
    ]
    assert "[reranker]" not in stderr
    assert await daemon.stop() == 0


async def test_without_a_reranker_the_entry_is_null_and_no_line_is_printed(
    start_daemon: Any,
) -> None:
    daemon = await start_daemon(providers=PROVIDERS)
    async with connect(daemon.socket) as client:
        listed = await client.call("providers/list")
    assert listed == {"providers": listed["providers"], "reranker": None}
    stdout, stderr = await _cli(daemon)
    assert [x.split("\t")[0] for x in stdout.splitlines()] == ["alpha", "beta"]
    assert "reranker" not in stdout + stderr
    stdout, _ = await _cli(daemon, "--json")
    assert json.loads(stdout)["reranker"] is None
    assert await daemon.stop() == 0


async def test_status_names_a_reranker_whose_asks_all_fail_and_exits_4(
    start_daemon: Any,
) -> None:
    """``hostd status || alert``: a rerank server that refuses every ask (an embedding
    model served) is a line of its own, saying why, and exit 4 once its last
    ``FAILING_LEGS`` asks failed, in text and ``--json`` alike."""
    async with rerank_server("status400") as port:
        daemon = await start_daemon(providers=PROVIDERS, extra=server_table(port))
        async with connect(daemon.socket) as client:
            for _ in range(FAILING_LEGS):
                result = await client.compose("why", budget=4000, strategy="rerank")
        assert _record(result)["reason"] == "error"
        status = [*daemon_command(daemon.config, "status", str(daemon.socket))]
        shown = await anyio.run_process(status, cwd=ROOT, check=False)
        printed = await anyio.run_process([*status, "--json"], cwd=ROOT, check=False)
        assert await daemon.stop() == 0
    assert shown.returncode == 4, shown.stderr.decode()
    (line,) = [x for x in shown.stdout.decode().splitlines() if x.startswith("[reranker]")]
    assert line == (
        f"[reranker] url: ready; its last {FAILING_LEGS} asks failed: error: HTTP 400: "
        f"{REFUSED_HINT}; asks {FAILING_LEGS}, fallbacks {FAILING_LEGS}"
    )
    assert printed.returncode == 4
    assert json.loads(printed.stdout)["reranker"]["fallbacks"] == FAILING_LEGS
