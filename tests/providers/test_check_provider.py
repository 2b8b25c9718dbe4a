"""Each bundled provider passes ``hostd check-provider`` as a real child process."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from providers.memory import MemoryStore
from providers.semantic import semantic_unavailable

from ._stdio import REPO, child_env

GOAL = "why does the retry loop give up"


def _tree(root: Path) -> Path:
    root.mkdir()
    (root / "net.py").write_text(
        "def retry_loop(attempts):\n    # the retry loop gives up after three attempts\n"
        "    for _ in range(attempts):\n        pass\n"
    )
    (root / "README.md").write_text("# Retries\n\nThe retry loop gives up after three tries.\n")
    return root


def _check(provider_args: list[str]) -> list[dict[str, object]]:
    r = subprocess.run(
        [sys.executable, "-m", "hostd", "check-provider", "--json", "--goal", GOAL]
        + ["--timeout-ms", "100000", "--", sys.executable, *provider_args],
        cwd=REPO,
        env=child_env(),
        capture_output=True,
        text=True,
        timeout=115,
        check=False,
    )
    results: list[dict[str, object]] = json.loads(r.stdout)
    assert r.returncode == 0, (r.stdout, r.stderr[-2000:])
    return results


def _assert_all_pass(results: list[dict[str, object]]) -> None:
    failed = [r for r in results if not r["passed"] or r["skipped"]]
    assert failed == [], failed
    assert {r["check"] for r in results} >= {"handshake", "query", "verify honesty", "shutdown"}


def test_files_provider_passes_check_provider(tmp_path: Path) -> None:
    _assert_all_pass(_check(["-m", "providers.files", "--root", str(_tree(tmp_path / "t"))]))


def test_memory_provider_passes_check_provider(tmp_path: Path) -> None:
    db = tmp_path / "memory.db"
    with MemoryStore(db) as store:
        store.add("fact", "retries", "the retry loop gives up after three attempts")
    _assert_all_pass(_check(["-m", "providers.memory", "--db", str(db)]))


@pytest.mark.skipif(semantic_unavailable() is not None, reason=f"{semantic_unavailable()}")
def test_semantic_provider_passes_check_provider(tmp_path: Path) -> None:
    root = _tree(tmp_path / "t")
    args = ["-m", "providers.semantic", "--root", str(root), "--cache", str(tmp_path / "c.db")]
    _assert_all_pass(_check(args))


@pytest.mark.parametrize("name", ["files", "memory", "semantic"])
def test_each_provider_lists_its_options_with_help(name: str) -> None:
    r = subprocess.run(
        [sys.executable, "-m", f"providers.{name}", "--help"],
        cwd=REPO,
        env=child_env(),
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert r.returncode == 0, r.stderr
    assert r.stdout.startswith(f"usage: python -m providers.{name}")
    assert ("--db" if name == "memory" else "--include") in r.stdout
