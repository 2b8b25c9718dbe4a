"""Two projects, two daemons: each project's ``hostd serve`` listens on a socket of its
own (its config file's), so ``--connect`` and ``Client.connect()`` from a project reach
that project's daemon and cite that project's files. Real ``hostd`` child processes in
a fresh home; every wait is on an event (the CLI's own wait for a socket, a process
exit), deadlines are hang guards only."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from hostd.config import load_config
from tests.fixtures.home import fresh_home, hostd_in

pytestmark = pytest.mark.slow

HANG_GUARD_S = 180
GOAL = "what colour is the lighthouse?"
FACTS = {
    "north": "The lighthouse of the north project is painted crimson.",
    "south": "The lighthouse of the south project is painted turquoise.",
}

_CLIENT = """
import json
from hostd.client import Client
with Client.connect() as hostd:
    result = hostd.compose({goal!r}, budget=800)
print(json.dumps(result.prompt))
"""


def _project(base: Path, name: str) -> Path:
    project = base / name
    project.mkdir()
    (project / "lighthouse.md").write_text(f"# Lighthouse\n\n{FACTS[name]}\n")
    return project


def _serve(project: Path, env: dict[str, str]) -> subprocess.Popen[str]:
    """``hostd serve`` started in ``project`` with no ``--config``: it finds the
    project's own ``hostd.toml``."""
    return subprocess.Popen(
        [sys.executable, "-m", "hostd", "serve", "--ready-file", str(project / "ready.json")],
        cwd=project,
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )


def _stop(proc: subprocess.Popen[str]) -> tuple[int, str]:
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=HANG_GUARD_S)
    return proc.returncode, err


def test_two_projects_daemons_serve_side_by_side_each_reached_from_its_project(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    env = fresh_home(tmp_path)
    monkeypatch.setenv("HOME", env["HOME"])  # init names the state directories from ~
    projects = {name: _project(tmp_path, name) for name in FACTS}
    for project in projects.values():
        made = hostd_in(project, env, "init", "--providers", "files")
        assert made.returncode == 0, made.stderr
    daemons = {name: _serve(project, env) for name, project in projects.items()}
    try:
        for name, project in projects.items():
            # --connect waits for the daemon's socket (an event), then asks it.
            out = hostd_in(
                project, env, "compose", GOAL, "--budget", "800", "--connect", "--wait", "120"
            )
            assert out.returncode == 0, (name, out.stderr)
            others = [fact for other, fact in FACTS.items() if other != name]
            assert FACTS[name] in out.stdout and not any(f in out.stdout for f in others)
            # A script in the project, Client.connect() with no argument: the same daemon.
            script = subprocess.run(
                [sys.executable, "-c", _CLIENT.format(goal=GOAL)],
                cwd=project,
                env=env,
                capture_output=True,
                text=True,
                timeout=HANG_GUARD_S,  # a hang guard
                check=False,
            )
            assert script.returncode == 0, script.stderr
            assert FACTS[name] in json.loads(script.stdout)
        sockets = {
            name: json.loads((project / "ready.json").read_text())["socket"]
            for name, project in projects.items()
        }
    finally:
        stopped = {name: _stop(proc) for name, proc in daemons.items()}
    assert {code for code, _ in stopped.values()} == {0}, stopped
    assert sockets["north"] != sockets["south"]
    for name, project in projects.items():  # what `hostd config path` says it is
        where = json.loads(hostd_in(project, env, "config", "path", "--json").stdout)
        assert where["socket"] == sockets[name]
    for sock in sockets.values():
        assert Path(sock).parent == tmp_path / "run" / "hostd"
    # Each daemon kept its consent ledger and handshake records in its project's own
    # state directory (`hostd init`'s host.state_dir), none in the global one.
    states = {load_config(project / "hostd.toml").state_path for project in projects.values()}
    assert len(states) == 2
    for state in states:
        assert {"consent.sqlite3", "handshakes"} <= {p.name for p in state.iterdir()}
        assert (state / "handshakes" / "files.json").is_file()
    glob = tmp_path / "home" / ".local" / "state" / "hostd"
    assert not {"consent.sqlite3", "handshakes"} & {p.name for p in glob.iterdir()}
