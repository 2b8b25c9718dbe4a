"""A user who reaches a running daemon's socket but may not connect (``EACCES``: the
socket is another user's) is told whose it is and how a daemon is shared, never that
none is running, nor to start one there. A real ``hostd serve``; the client is a real
``hostd`` process too, run as a second user (``nobody``) when the tests run as root,
and refused by the socket's mode otherwise."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest

from hostd.client import Client
from tests.fixtures.procs import ROOT

HANG_GUARD_S = 120
NOBODY = 65534


@pytest.fixture
def serving() -> Iterator[tuple[Path, Path]]:
    """(config, socket) of a serving daemon; the config readable by every user (the
    second one reads it), the socket private as ever."""
    work = Path(tempfile.mkdtemp(prefix="hd-"))  # short: AF_UNIX paths are ~108 bytes
    work.chmod(0o755)  # the second user walks it to the config
    config = work / "hostd.toml"
    config.write_text(f'[host]\nsocket = "{work}/run/h.sock"\nstate_dir = "{work}/state"\n')
    config.chmod(0o644)
    ready = work / "ready.json"
    proc = subprocess.Popen(
        [sys.executable, "-m", "hostd", "--config", str(config), "serve"]
        + ["--ready-file", str(ready)],
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        stdin=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stderr is not None
        for line in proc.stderr:  # the event: it serves
            if '"host.serving"' in line:
                break
        else:
            pytest.fail(f"hostd serve ended: {proc.wait()}")
        yield config, work / "run" / "h.sock"
    finally:
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=HANG_GUARD_S) == 0
        assert proc.stderr is not None
        proc.stderr.close()
        shutil.rmtree(work, ignore_errors=True)


#: Runs ``hostd`` command lines (argv[1], JSON) as uid argv[2] (when not -1), each
#: printing ``<exit status>`` then its stderr. The modules are loaded first, as this
#: user, by the same commands against a socket that does not exist: the second user
#: may not read this interpreter's own files.
_AS_USER = textwrap.dedent(
    """
    import contextlib, io, json, os, pwd, sys
    from hostd.cli import main
    commands, uid = json.loads(sys.argv[1]), int(sys.argv[2])
    for argv in commands:
        with contextlib.redirect_stderr(io.StringIO()), contextlib.redirect_stdout(io.StringIO()):
            main([a.replace("/run/h.sock", "/run/none.sock") for a in argv])
    if uid >= 0:
        os.setgid(uid)
        os.setuid(uid)
    for argv in commands:
        err = io.StringIO()
        with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
            status = main(argv)
        print(status)
        print(json.dumps(err.getvalue()))
    """
)


def _run_as(uid: int, commands: list[list[str]]) -> list[tuple[int, str]]:
    done = subprocess.run(
        [sys.executable, "-c", _AS_USER, json.dumps(commands), str(uid)],
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        capture_output=True,
        text=True,
        timeout=HANG_GUARD_S,
    )
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    return [(int(lines[i]), json.loads(lines[i + 1])) for i in range(0, len(lines), 2)]


def _commands(config: Path, socket: Path) -> list[list[str]]:
    return [
        ["--config", str(config), "status", str(socket)],
        ["--config", str(config), "compose", "x", "--connect", str(socket), "--wait", "0"],
    ]


@pytest.mark.skipif(os.geteuid() != 0, reason="acting as a second user needs root")
def test_another_users_daemon_is_named_as_such_with_how_to_share_one(
    serving: tuple[Path, Path],
) -> None:
    config, socket = serving
    for status, err in _run_as(NOBODY, _commands(config, socket)):
        assert status == 3, err
        assert len(err.strip().splitlines()) == 1, err
        assert f"the socket {socket} is another user's (uid {os.getuid()}" in err, err
        assert f"this user (uid {NOBODY}) may not connect to it (Permission denied)" in err
        assert "loopback TCP with a token" in err and "Sharing a daemon with other users" in err
        assert "none is running" not in err and "start one" not in err, err
        assert "[not_permitted]" in err
    with Client.connect(socket) as client:  # its own user is served as ever
        assert client.call("host/status", {})["state"] == "serving"


@pytest.mark.skipif(os.geteuid() == 0, reason="root connects through any mode")
def test_a_socket_whose_mode_refuses_its_own_user_says_so(serving: tuple[Path, Path]) -> None:
    config, socket = serving
    socket.chmod(0)
    try:
        results = _run_as(-1, _commands(config, socket))
    finally:
        socket.chmod(0o600)
    for status, err in results:
        assert status == 3, err
        assert f"may not connect to the socket {socket} (Permission denied)" in err, err
        assert "check its mode" in err and "none is running" not in err, err
