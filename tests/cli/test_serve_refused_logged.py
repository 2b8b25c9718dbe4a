"""``hostd serve`` that refuses to start (exit 2) says why in its ``log.file`` too, not
only on stderr: an operator who reads only the log file learns it (docs/logging.md,
``host.start.refused``). A real ``hostd serve`` process each time."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from tests.fixtures.cli import run_hostd


def _events(log: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in log.read_text().splitlines() if line.strip()]


def test_a_refused_state_dir_is_logged_to_log_file(tmp_path: Path) -> None:
    state = tmp_path / "state"
    state.mkdir()
    state.chmod(0o777)  # other users may write it: refused, whoever runs the test
    config = tmp_path / "hostd.toml"
    config.write_text(
        f'[host]\nsocket = "{tmp_path}/run/s.sock"\nstate_dir = "{state}"\n'
        '[log]\nfile = "logs/hostd.log"\n'
    )
    done = run_hostd("--config", str(config), "serve")
    assert done.returncode == 2
    assert "host.state_dir" in done.stderr  # said on stderr as ever
    (event,) = _events(tmp_path / "logs" / "hostd.log")
    assert event["event"] == "host.start.refused" and event["level"] == "error"
    assert event["reason"] == "bad_config" and event["key"] == "host.state_dir"
    assert "writable by other users" in event["error"]
    assert event["config"] == str(config)


def test_a_config_that_does_not_load_is_logged_to_the_log_file_it_names(tmp_path: Path) -> None:
    config = tmp_path / "hostd.toml"
    config.write_text(
        f'[host]\nsocket = "{tmp_path}/run/s.sock"\nstate_dir = "{tmp_path}/state"\n'
        'default_budget = "lots"\n'
        f'[log]\nfile = "{tmp_path}/hostd.log"\n'
    )
    done = run_hostd("--config", str(config), "serve")
    assert done.returncode == 2
    assert "host.default_budget" in done.stderr
    (event,) = _events(tmp_path / "hostd.log")
    assert event["event"] == "host.start.refused"
    assert event["reason"] == "bad_config" and event["key"] == "host.default_budget"
    assert "host.default_budget" in event["error"]


def test_a_log_file_that_cannot_be_opened_is_said_on_stderr_alone(tmp_path: Path) -> None:
    (tmp_path / "blocker").write_text("a file, not a folder\n")
    config = tmp_path / "hostd.toml"
    config.write_text(
        f'[host]\nsocket = "{tmp_path}/run/s.sock"\nstate_dir = "{tmp_path}/state"\n'
        f'[log]\nfile = "{tmp_path}/blocker/hostd.log"\n'
    )
    done = run_hostd("--config", str(config), "serve")
    assert done.returncode == 2
    assert "log.file: cannot open" in done.stderr and "Traceback" not in done.stderr
