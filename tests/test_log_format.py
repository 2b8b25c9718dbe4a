"""``hostd serve`` on a terminal logs human-readable lines; JSON lines when stderr is
not a terminal or with ``--log-format json``. A real daemon whose stderr is a pseudo
terminal; the line waited for is the event, the deadline only a hang guard."""

from __future__ import annotations

import json
import os
import pty
import re
import select
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from tests.fixtures.procs import ROOT

HANG_GUARD_S = 120


def _first_serving_line(tmp_path: Path, *flags: str, tty: bool) -> str:
    config = tmp_path / "hostd.toml"
    config.write_text(f'[host]\nsocket = "{tmp_path}/h.sock"\nstate_dir = "{tmp_path}/state"\n')
    command = [sys.executable, "-m", "hostd", "--config", str(config), *flags, "serve"]
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    if not tty:
        with subprocess.Popen(command, env=env, stderr=subprocess.PIPE, text=True) as proc:
            assert proc.stderr is not None
            line = proc.stderr.readline()
            proc.send_signal(signal.SIGTERM)
            proc.communicate(timeout=HANG_GUARD_S)
        return line
    main, sub = pty.openpty()
    on_tty = subprocess.Popen(command, env=env, stderr=sub, stdin=subprocess.DEVNULL)
    os.close(sub)
    seen = b""
    try:
        while b"\n" not in seen:
            ready, _, _ = select.select([main], [], [], HANG_GUARD_S)
            assert ready, "no log line within the hang guard"
            seen += os.read(main, 4096)
    finally:
        on_tty.send_signal(signal.SIGTERM)
        assert on_tty.wait(timeout=HANG_GUARD_S) == 0
        os.close(main)
    return seen.split(b"\n", 1)[0].decode()


def test_serve_on_a_terminal_logs_human_readable_lines(tmp_path: Path) -> None:
    line = _first_serving_line(tmp_path, tty=True)
    assert not line.lstrip().startswith("{"), line
    assert "host.serving" in line and f"config={tmp_path}/hostd.toml" in _plain(line)


@pytest.mark.parametrize(("flags", "tty"), [(("--log-format", "json"), True), ((), False)])
def test_serve_logs_json_when_asked_or_not_on_a_terminal(
    tmp_path: Path, flags: tuple[str, ...], tty: bool
) -> None:
    event = json.loads(_first_serving_line(tmp_path, *flags, tty=tty))
    assert event["event"] == "host.serving" and event["config"] == f"{tmp_path}/hostd.toml"


def _plain(line: str) -> str:
    """The text without its colour codes (ESC [ … m)."""
    return re.sub(r"\x1b\[[0-9;]*m", "", line)
