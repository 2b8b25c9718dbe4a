"""The README's examples stay true: its provider example passes check-provider."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
README = (ROOT / "README.md").read_text(encoding="utf-8")


def _block_after(heading: str) -> str:
    section = README.split(heading, 1)[1]
    match = re.search(r"```python\n(.*?)```", section, re.S)
    assert match, f"no python block after {heading!r}"
    return match.group(1)


def test_the_two_commands_are_the_scripts_ci_runs() -> None:
    assert "scripts/demo" in README and "scripts/test" in README
    assert "scripts/test" in (ROOT / ".ci" / "run").read_text(encoding="utf-8")
    for script in ("demo", "test"):
        assert os.access(ROOT / "scripts" / script, os.X_OK), script


def test_readme_provider_example_passes_check_provider(tmp_path: Path) -> None:
    source = tmp_path / "notes_provider.py"
    source.write_text(_block_after("### Writing a provider"), encoding="utf-8")
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    done = subprocess.run(
        [sys.executable, "-m", "hostd", "check-provider", "--", sys.executable, str(source)],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=90,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "FAIL" not in done.stdout
