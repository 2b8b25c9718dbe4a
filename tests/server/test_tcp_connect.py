"""A daemon shared on loopback TCP, reached by the CLI (``--connect tcp://HOST:PORT``,
``status``/``stop tcp://…``) and by ``connect_tcp(wait=…)``: real ``hostd`` processes,
the token from ``$HOSTD_TOKEN`` or ``--token-file``, never on the command line."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path

import anyio
import pytest

from hostd.client import connect_tcp
from tests.server.conftest import ROOT

pytestmark = pytest.mark.anyio

TOKEN = "s3cret-token"


def _tcp(port: int) -> str:
    return f'\n[tcp]\nenabled = true\nhost = "127.0.0.1"\nport = {port}\ntoken = "{TOKEN}"\n'


async def _hostd(*args: str, token: str | None = None) -> subprocess.CompletedProcess[bytes]:
    """``python -m hostd ARGS`` as a user would run it, ``$HOSTD_TOKEN`` set to ``token``
    (unset when None), from a folder of no project (its embedded default config)."""
    env = {k: v for k, v in os.environ.items() if k not in ("HOSTD_TOKEN", "HOSTD_CONFIG")}
    if token is not None:
        env["HOSTD_TOKEN"] = token
    env["PYTHONPATH"] = str(ROOT)
    with anyio.fail_after(120):  # a hang guard
        return await anyio.run_process(
            [sys.executable, "-m", "hostd", *args],
            check=False,
            env=env,
            cwd="/",
            stdin=subprocess.DEVNULL,
        )


async def test_the_cli_composes_shows_and_stops_a_daemon_over_tcp_with_its_token(
    start_daemon, workdir: Path
) -> None:
    daemon = await start_daemon({"alpha": {}}, extra=_tcp(0))
    host, port = daemon.events("host.serving")[0]["tcp"]
    where = f"tcp://{host}:{port}"
    token_file = workdir / "team.token"
    token_file.write_text(TOKEN + "\n")

    composed = await _hostd(
        "compose", "over tcp", "--budget", "300", "--connect", where, token=TOKEN
    )
    assert composed.returncode == 0, composed.stderr
    assert b"alpha" in composed.stdout  # the daemon's provider's evidence
    listed = await _hostd("providers", "--connect", where, "--token-file", str(token_file))
    assert listed.returncode == 0, listed.stderr
    assert listed.stdout.startswith(b"alpha")
    shown = await _hostd("status", where, token=TOKEN)
    assert shown.returncode == 0, shown.stderr
    assert f"(pid {daemon.process.pid})".encode() in shown.stdout
    for done in (composed, listed, shown):
        assert TOKEN.encode() not in done.stdout + done.stderr

    stopped = await _hostd("stop", where, "--token-file", str(token_file))
    assert stopped.returncode == 0, stopped.stderr
    assert f"stopped hostd (pid {daemon.process.pid})".encode() in stopped.stdout
    assert await daemon.wait() == 0


async def test_a_wrong_or_missing_token_is_told_without_the_token(start_daemon) -> None:
    daemon = await start_daemon({"alpha": {}}, extra=_tcp(0))
    host, port = daemon.events("host.serving")[0]["tcp"]
    where = f"tcp://{host}:{port}"

    wrong = await _hostd("compose", "x", "--connect", where, token="not-the-token")
    assert wrong.returncode == 3  # a daemon this user may not use, as another user's socket
    said = wrong.stderr.decode()
    assert f"hostd: the daemon at {where} refused $HOSTD_TOKEN (unauthorized)" in said
    assert "not-the-token" not in said and "Traceback" not in said

    missing = await _hostd("status", where)
    assert missing.returncode == 2  # nothing to send: the command line cannot be run
    assert "no token to send: set $HOSTD_TOKEN or give --token-file PATH" in (
        missing.stderr.decode()
    )
    malformed = await _hostd("providers", "--connect", "tcp://127.0.0.1", token=TOKEN)
    assert malformed.returncode == 2
    assert b"a TCP address is written tcp://HOST:PORT" in malformed.stderr
    assert await daemon.stop() == 0


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


async def test_connect_tcp_waits_for_a_daemon_that_starts_later(start_daemon) -> None:
    port = _free_port()
    waiting = anyio.Event()
    said: list[tuple[str, float]] = []

    def on_wait(where: str, wait: float) -> None:
        said.append((where, wait))
        waiting.set()

    async def compose_once_up() -> None:
        # The wait is a hang guard: the daemon is started once the client says it waits.
        async with connect_tcp("127.0.0.1", port, TOKEN, wait=600, on_wait=on_wait) as client:
            assert (await client.compose("waited for", budget=300)).citations

    async with anyio.create_task_group() as tg:
        tg.start_soon(compose_once_up)
        await waiting.wait()
        daemon = await start_daemon({"alpha": {}}, extra=_tcp(port))
    assert said == [(f"127.0.0.1:{port}", 600.0)]
    assert await daemon.stop() == 0


async def test_connect_tcp_without_wait_fails_at_once_naming_the_address() -> None:
    from hostd.client import NoDaemon

    port = _free_port()
    with pytest.raises(NoDaemon) as exc:
        async with connect_tcp("127.0.0.1", port, TOKEN, wait=0):
            pass
    assert f"no daemon at 127.0.0.1:{port}" in str(exc.value)
