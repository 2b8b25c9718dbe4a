"""The client examples a user copies type-check as they are: README.md's Python client
block and every Python block of docs/api.md pass ``mypy --strict``, run from outside the
checkout against the installed hostd, as a user's own project runs it."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def _python_blocks(doc: str) -> list[str]:
    text = (ROOT / doc).read_text(encoding="utf-8")
    return re.findall(r"```python\n(.*?)```", text, re.S)


def test_the_client_examples_pass_mypy_strict(tmp_path: Path) -> None:
    readme = [b for b in _python_blocks("README.md") if "hostd.client" in b]
    api = _python_blocks("docs/api.md")
    assert readme and len(api) >= 2, "the examples this test checks are gone"
    files = []
    for i, block in enumerate([*readme, *api]):
        path = tmp_path / f"example_{i}.py"
        # A block that shows a fragment uses the client's names without importing them.
        head = "" if "import" in block else "from hostd.client import *  # noqa\n"
        path.write_text(head + block, encoding="utf-8")
        files.append(path.name)
    done = subprocess.run(
        [sys.executable, "-m", "mypy", "--strict", "--no-incremental", *files],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
