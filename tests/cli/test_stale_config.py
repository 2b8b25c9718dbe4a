"""``stale_config``: the line a ``--connect`` command says when the daemon runs an older
version of the config file the command read, decided from the daemon's ``host/status``
and the file's bytes now (pure: no daemon here; tests/server/test_started_config.py
runs the real one)."""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

from hostd.cli._common import stale_config
from hostd.config import load_config

SOCKET = Path("/run/hostd/h.sock")


def _status(file: Path, text: str, **extra: Any) -> dict[str, Any]:
    digest = "sha256:" + hashlib.sha256(text.encode()).hexdigest()
    started = {"file": str(file), "digest": digest, "loaded_at": "2024-05-01T12:00:00Z"}
    return {"state": "serving", "config": {**started, **extra}}


def _write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "hostd.toml"
    path.write_text(text, encoding="utf-8")
    return path


def test_a_file_edited_since_the_daemon_started_is_said_with_the_socket_and_the_file(
    tmp_path: Path,
) -> None:
    old = "[host]\ndefault_budget = 3000\n"
    path = _write(tmp_path, old + '[[provider]]\nid = "facts"\ncommand = ["x"]\n')
    line = stale_config(load_config(path), _status(path, old), SOCKET)
    assert line is not None
    assert line.startswith(f"the daemon at {SOCKET} was started from an older {path} (changed")
    assert line.endswith(f"): `hostd reload --config {path}` applies the edits")


def test_the_same_bytes_say_nothing(tmp_path: Path) -> None:
    text = "[host]\ndefault_budget = 3000\n"
    path = _write(tmp_path, text)
    assert stale_config(load_config(path), _status(path, text), SOCKET) is None


def test_a_daemon_of_another_file_says_nothing(tmp_path: Path) -> None:
    path = _write(tmp_path, "[host]\ndefault_budget = 3000\n")
    other = tmp_path / "other.toml"
    assert stale_config(load_config(path), _status(other, "[host]\n"), SOCKET) is None


def test_the_same_file_by_another_spelling_of_its_path_is_compared(tmp_path: Path) -> None:
    path = _write(tmp_path, "[host]\ndefault_budget = 3000\n")
    link = tmp_path / "link.toml"
    link.symlink_to(path)
    assert stale_config(load_config(path), _status(link, "[host]\n"), SOCKET) is not None


def test_a_daemon_that_does_not_say_which_file_says_nothing(tmp_path: Path) -> None:
    path = _write(tmp_path, "[host]\ndefault_budget = 3000\n")
    cfg = load_config(path)
    assert stale_config(cfg, {"state": "serving"}, SOCKET) is None  # older than `config`
    assert stale_config(cfg, {"config": None}, SOCKET) is None  # a config built in code
    assert stale_config(cfg, {"config": {"file": str(path)}}, SOCKET) is None  # no digest


def test_an_unreadable_time_leaves_the_time_out(tmp_path: Path) -> None:
    path = _write(tmp_path, "[host]\ndefault_budget = 3000\n")
    line = stale_config(load_config(path), _status(path, "[host]\n", loaded_at="soon"), SOCKET)
    assert line is not None and "changed since" not in line
    assert f"started from an older {path}: `hostd reload" in line
