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


def _run_check(provider_args: list[str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "hostd", "check-provider", "--json", "--goal", GOAL]
        + ["--timeout-ms", "100000", "--", sys.executable, *provider_args],
        cwd=REPO,
        env=child_env(),
        capture_output=True,
        text=True,
        timeout=115,
        check=False,
    )


def _check(provider_args: list[str]) -> list[dict[str, object]]:
    r = _run_check(provider_args)
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


@pytest.mark.slow
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


# Each misbehaviour and the rule the daemon's leg audit quarantines it under (B2).
QUARANTINED = {"lie_cost": "B3", "over_budget": "B1", "flood": "B4", "wrong_kind": "Q1"}


def _daemon_quarantines(tmp_path: Path) -> dict[str, set[str]]:
    """Compose once through a real daemon: the quarantine rules of each adversary's leg."""
    from hostd.client import Client
    from hostd.engine import QUARANTINE_RULES

    lines = [f'[host]\nstate_dir = "{tmp_path / "state"}"\n']
    for mode in QUARANTINED:
        command = [sys.executable, "-m", "tests.fixtures.adversarial_provider", mode]
        lines.append(
            f'[[provider]]\nid = "{mode}"\ncommand = {json.dumps(command)}\ncwd = "{REPO}"\n'
            "timeout_ms = 60000\n"  # generous: the leg's deadline includes a lazy start
        )
    config = tmp_path / "hostd.toml"
    config.write_text("\n".join(lines), encoding="utf-8")
    with Client.spawn(config, cwd=REPO, env=child_env()) as client:
        result = client.compose(GOAL, budget=400, kinds=["snippet"])
    out: dict[str, set[str]] = {}
    for report in result.providers:
        assert report.status == "quarantined", report
        out[report.provider_id] = {
            v["rule"] for v in report.violations if v["rule"] in QUARANTINE_RULES
        }
    return out


def test_a_reply_the_daemon_quarantines_fails_check_provider_with_the_same_rule(
    tmp_path: Path,
) -> None:
    daemon = _daemon_quarantines(tmp_path)
    for mode, rule in QUARANTINED.items():
        assert rule in daemon[mode], (mode, daemon[mode])
        r = _run_check(["-m", "tests.fixtures.adversarial_provider", mode])
        assert r.returncode == 1, (mode, r.stdout, r.stderr[-2000:])
        failed = {c["check"]: set(c["rules"]) for c in json.loads(r.stdout) if not c["passed"]}
        assert any(rule in rules for rules in failed.values()), (mode, failed)
