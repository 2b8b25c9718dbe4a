"""The suite keeps out of its user's home: what hostd and the bundled providers write by
default (index caches, the state directory) and the user config they read land in this
run's own directory (tests/conftest.py), in the test process and in its children."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from hostd.config import default_state_dir
from providers._corpus_cache import cache_dir
from tests.fixtures.home import fresh_home
from tests.fixtures.procs import ROOT

RUN = Path(os.environ["HOSTD_TEST_RUN_DIR"])


def test_the_default_cache_and_state_are_the_runs_not_the_home() -> None:
    assert cache_dir("files").is_relative_to(RUN)
    assert default_state_dir().is_relative_to(RUN)
    assert not RUN.is_relative_to(Path.home())


def test_a_child_hostd_finds_no_user_config_of_the_developer(tmp_path: Path) -> None:
    # From a directory with no hostd.toml above it, the config in use is the run's
    # (empty) user-config location's fallback: the embedded default, not ~/.config's.
    out = subprocess.run(
        [sys.executable, "-m", "hostd", "config", "path"],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        timeout=120,
    )
    searched = out.stdout + out.stderr
    assert str(RUN / "config" / "hostd" / "hostd.toml") in searched, searched
    assert str(Path.home() / ".config" / "hostd") not in searched, searched


def test_a_child_in_a_fresh_home_imports_the_checkout_under_test(tmp_path: Path) -> None:
    # Run in a project, outside the checkout, as the init and first-run tests run hostd:
    # its hostd and the bundled providers it starts must be this checkout's, not those
    # of the tree the venv's editable install points at (another worktree's, say).
    # ``-c`` puts the working directory first on the path, as ``-m hostd`` does.
    project = tmp_path / "project"
    project.mkdir()
    out = subprocess.run(
        [
            sys.executable,
            "-c",
            "import hostd, providers; print(hostd.__file__, providers.__file__)",
        ],
        capture_output=True,
        text=True,
        cwd=project,
        env=fresh_home(tmp_path),
        timeout=120,  # a hang guard
        check=True,
    )
    hostd_file, providers_file = out.stdout.split()
    assert Path(hostd_file) == ROOT / "hostd" / "__init__.py", out.stdout
    assert Path(providers_file) == ROOT / "providers" / "__init__.py", out.stdout
