"""A credential file that other users may read is named when the daemon starts, with the
``chmod`` that fixes it (``config.secret_file_open``); the daemon serves on."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from hostd.config import load_config, open_secret_files
from tests.fixtures.procs import ROOT


def _config(tmp_path: Path, mode: int) -> Path:
    token = tmp_path / "team.token"
    token.write_text("tok-secret\n", encoding="utf-8")
    token.chmod(mode)
    path = tmp_path / "hostd.toml"
    path.write_text(
        f'[host]\nsocket = "{tmp_path}/s.sock"\nstate_dir = "{tmp_path}/state"\n'
        'start_providers = "lazy"\n'
        '[[provider]]\nid = "team"\nurl = "http://127.0.0.1:9/"\ntoken_file = "team.token"\n',
        encoding="utf-8",
    )
    return path


def test_only_a_file_others_may_read_or_write_is_named(tmp_path: Path) -> None:
    for mode, named in ((0o600, False), (0o400, False), (0o640, True), (0o602, True)):
        cfg = load_config(_config(tmp_path, mode))
        found = open_secret_files(cfg)
        assert bool(found) is named, oct(mode)
        if named:
            assert found == [("provider team: token_file", tmp_path / "team.token", mode)]


def test_the_daemon_says_so_at_start_and_serves(tmp_path: Path) -> None:
    config = _config(tmp_path, 0o644)
    proc = subprocess.Popen(
        [sys.executable, "-m", "hostd", "--config", str(config), "serve"],
        cwd=ROOT,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    events = []
    try:
        assert proc.stderr is not None
        for line in proc.stderr:  # until it serves (or exits: the loop ends)
            if line.startswith("{"):
                events.append(json.loads(line))
                if events[-1]["event"] == "host.serving":
                    break
    finally:
        proc.terminate()
        proc.communicate(timeout=60)
    names = [e["event"] for e in events]
    assert names[-1] == "host.serving", names
    (warned,) = [e for e in events if e["event"] == "config.secret_file_open"]
    token = str(tmp_path / "team.token")
    assert warned["file"] == token and warned["mode"] == "0644"
    assert warned["fix"] == f"chmod 600 {token}" and warned["level"] == "warning"
    assert "tok-secret" not in json.dumps(events)
