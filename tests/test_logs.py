"""The log module: its name, the audit events per setting, rotation and file modes."""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent / "hostd"


def test_no_hostd_module_is_named_like_a_stdlib_module() -> None:
    # A ``hostd/logging.py`` is ``logging`` to anything run with hostd/ on sys.path.
    names = {p.stem for p in ROOT.rglob("*.py")} | {p.name for p in ROOT.rglob("*") if p.is_dir()}
    assert sorted(names & sys.stdlib_module_names) == []
