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
