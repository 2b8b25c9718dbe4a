"""``run_stdio`` owns the wire: what the provider writes to stdout goes to stderr, and
a stdin the event loop cannot watch (``/dev/null``, a regular file) is read to its end.

Real child processes over real pipes; ``fail_after`` is only a hang guard.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import anyio
import pytest

from hostd.protocol import PROTOCOL_VERSION
from tests.fixtures.procs import ROOT, marked_env
from tests.provider.noisy_provider import PRINTED, RAW

pytestmark = pytest.mark.anyio

HANDSHAKE = {"protocol_version": PROTOCOL_VERSION, "host": {"name": "t", "version": "0"}}
QUERY = {"query": {"goal": "g", "max_frames": 5, "max_tokens": 1000}}
QUERIES = 20  # 20 prints of 1 KiB: past Python's 8 KiB stdout buffer, so it would flush


def _req(method: str, params: Any, id: int) -> bytes:
    msg = {"jsonrpc": "2.0", "method": method, "params": params, "id": id}
    return json.dumps(msg).encode() + b"\n"


def _env() -> dict[str, str]:
    """As the host starts a provider: no PYTHONUNBUFFERED, so ``sys.stdout`` is
    block-buffered on a pipe."""
    inherited = {k: v for k, v in os.environ.items() if not k.startswith("PYTHON")}
    return {**inherited, **marked_env()}


async def _run(
    module: str, *args: str, stdin: Any = None, input: bytes | None = None
) -> subprocess.CompletedProcess[bytes]:
    with anyio.fail_after(60):  # a hang guard only
        return await anyio.run_process(
            [sys.executable, "-m", module, *args],
            input=input,
            stdin=stdin,
            check=False,
            cwd=ROOT,
            env=_env(),
        )


def _replies(stdout: bytes) -> list[dict[str, Any]]:
    """Every stdout line, each of which must be a JSON-RPC reply."""
    replies = []
    for line in stdout.splitlines():
        reply = json.loads(line)  # anything else on the wire fails here
        assert reply["jsonrpc"] == "2.0" and ("result" in reply or "error" in reply), line
        replies.append(reply)
    return replies


@pytest.mark.parametrize("mode", ["--print", "--raw"])
async def test_what_a_provider_writes_to_stdout_goes_to_stderr_not_the_wire(mode: str) -> None:
    requests = _req("context/handshake", HANDSHAKE, 0) + b"".join(
        _req("context/query", QUERY, i) for i in range(1, QUERIES + 1)
    )
    done = await _run("tests.provider.noisy_provider", mode, input=requests)
    replies = _replies(done.stdout)
    assert sorted(r["id"] for r in replies) == list(range(QUERIES + 1))  # each one, once
    assert all("result" in r for r in replies)
    assert replies[0]["result"]["provider"]["name"] == "noisy"
    if mode == "--print":  # every query's line, and the one printed before run_stdio
        assert done.stderr.count((PRINTED + "\n").encode()) == QUERIES + 1
    else:
        assert done.stderr.count(RAW) == QUERIES
    assert done.returncode == 0


async def test_stdin_from_dev_null_is_the_end_of_input_at_once() -> None:
    done = await _run("tests.fixtures.healthy_provider", stdin=subprocess.DEVNULL)
    assert done.stdout == b""
    assert b"Traceback" not in done.stderr, done.stderr
    assert done.returncode == 0


async def test_stdin_from_a_regular_file_is_answered_then_the_provider_exits(
    tmp_path: Path,
) -> None:
    requests = tmp_path / "requests.jsonl"
    requests.write_bytes(_req("context/handshake", HANDSHAKE, 1) + _req("context/query", QUERY, 2))
    with requests.open("rb") as stdin:
        done = await _run("tests.fixtures.healthy_provider", stdin=stdin)
    replies = {r["id"]: r for r in _replies(done.stdout)}
    assert sorted(replies) == [1, 2]
    assert replies[1]["result"]["provider"]["name"] == "healthy"
    assert len(replies[2]["result"]["frames"]) == 3
    assert b"Traceback" not in done.stderr, done.stderr
    assert done.returncode == 0


async def test_a_query_that_raises_leaves_its_traceback_on_stderr() -> None:
    """An author's bug: the line it is on, not only the exception's name. Malformed
    params are the caller's mistake: one line, not a traceback."""
    lines = [
        _req("context/handshake", HANDSHAKE, 1),
        _req("context/query", QUERY, 2),
        _req("context/query", {"query": {"goal": "g"}}, 3),  # max_tokens missing
        _req("context/shutdown", {}, 4),
    ]
    done = await _run("tests.provider.raising_provider", input=b"".join(lines))
    replies = {r["id"]: r for r in _replies(done.stdout)}
    assert replies[2]["error"]["data"]["cgp_code"] == "internal", replies[2]
    err = done.stderr.decode()
    assert "provider: context/query failed: IndexError: tuple index out of range" in err
    assert "raising_provider.py" in err and "in lookup" in err and "return rows[3]" in err
    assert (
        "provider: context/query: refused a request with malformed params "
        "(2 error(s), the first at query.max_frames); answered bad_request"
    ) in err
    assert "_QueryParams" not in err  # the validation's internals are not the author's


async def test_an_async_warm_and_a_plain_query_are_run_as_written() -> None:
    """``async def warm`` is awaited (not left a coroutine never awaited), and a plain
    ``def query`` (a blocking driver call) is run in a worker thread."""
    async with await anyio.open_process(
        [sys.executable, "-m", "tests.provider.plain_provider"], cwd=ROOT, env=_env()
    ) as proc:
        assert proc.stdin is not None and proc.stdout is not None
        await proc.stdin.send(_req("context/handshake", HANDSHAKE, 1))
        buf = b""
        with anyio.fail_after(60):  # a hang guard: the ready note is the event
            while b'"state":"ready"' not in buf.replace(b" ", b""):
                buf += await proc.stdout.receive()
            assert b"1 row loaded" in buf  # its warm-up's return: the ready message
            await proc.stdin.send(_req("context/query", QUERY, 2))
            while b'"id":2' not in buf.replace(b" ", b""):
                buf += await proc.stdout.receive()
        await proc.stdin.aclose()
    replies = {r["id"]: r for r in map(json.loads, buf.splitlines()) if "id" in r}
    assert [f["content"] for f in replies[2]["result"]["frames"]] == ["Deploys happen on Tuesdays."]
