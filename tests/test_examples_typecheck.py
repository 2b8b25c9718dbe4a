"""The client examples a user copies type-check as they are: README.md's Python client
block and every Python block of docs/api.md that is hostd's (not a recipe for another
library, such as converting a tokenizer with ``transformers``) pass ``mypy --strict``,
run from outside the checkout against the installed hostd, as a user's own project
runs it."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def _python_blocks(doc: str) -> list[str]:
    text = (ROOT / doc).read_text(encoding="utf-8")
    return re.findall(r"```python\n(.*?)```", text, re.S)


def _another_librarys(block: str) -> bool:
    """Whether ``block`` is about another library: it imports a third-party module and
    not hostd (its typing is that library's, not ours to hold to ``--strict``)."""
    imported = re.findall(r"^(?:from|import)\s+(\w+)", block, re.M)
    others = [m for m in imported if m != "hostd" and m not in sys.stdlib_module_names]
    return bool(others) and "hostd" not in imported


def test_the_client_examples_pass_mypy_strict(tmp_path: Path) -> None:
    readme = [b for b in _python_blocks("README.md") if "hostd.client" in b]
    api = [b for b in _python_blocks("docs/api.md") if not _another_librarys(b)]
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
