"""``hostd check-provider --binding mcp``: an MCP server checked the way the host uses it.

The real command line as a child process, against the published ``mcp-server-git``
(its ``git_log`` tool over a repository made here), ``server-everything`` (npm) when
installed, and the SDK servers of these tests: one that passes, one serving a stale
copy of a file, one without the tool.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.fixtures.cli import run_hostd

from .test_binding import _everything


def _check(*args: str) -> tuple[int, dict[str, dict[str, Any]]]:
    done = run_hostd("check-provider", "--binding", "mcp", "--json", *args)
    assert done.stdout, done.stderr[-2000:]
    return done.returncode, {r["check"]: r for r in json.loads(done.stdout)}


def _corpus(root: Path) -> Path:
    root.mkdir()
    (root / "cache.md").write_text("# Cache\n\nThe cache evicts the least recently used entry.\n")
    return root


def test_the_published_git_server_passes(tmp_path: Path) -> None:
    pytest.importorskip("mcp_server_git", reason="mcp-server-git (the dev extra) is not installed")
    repo = tmp_path / "repo"
    repo.mkdir()

    def git(*args: str) -> None:
        who = ["-c", "user.name=t", "-c", "user.email=t@example.com"]
        subprocess.run(["git", *who, *args], cwd=repo, check=True, capture_output=True)

    git("init", "-q")
    for i in range(3):
        (repo / f"m{i}.py").write_text(f"x = {i}\n")
        git("add", ".")
        git("commit", "-qm", f"Evict cache entries, step {i}")
    arguments = json.dumps({"repo_path": str(repo), "max_count": 10})
    server = [sys.executable, "-m", "mcp_server_git", "--repository", str(repo)]
    code, checks = _check("--goal", "cache", "--tool", "git_log", "--arguments", arguments,
                          "--", *server)  # fmt: skip
    assert code == 0, checks
    assert checks["query"]["detail"].startswith("3 valid frame(s): commit ")
    assert {c for c, r in checks.items() if not r["passed"]} == set()
    assert checks["shutdown"]["detail"] == "exited with 0 when stdin closed"


def test_a_fixture_server_passes_with_its_files_matching(tmp_path: Path) -> None:
    corpus = _corpus(tmp_path / "c")
    server = [sys.executable, "-m", "tests.mcp.sdk_server", "--root", str(corpus)]
    code, checks = _check("--goal", "how does the cache evict", "--", *server)
    assert code == 0, checks
    assert checks["file sources"]["passed"] and not checks["file sources"]["skipped"]


def test_a_server_serving_a_stale_copy_fails_the_source_check(tmp_path: Path) -> None:
    corpus = _corpus(tmp_path / "c")
    server = [sys.executable, "-m", "tests.mcp.mcpserver_app", "stale", "--root", str(corpus)]
    code, checks = _check("--goal", "cache evicts", "--", *server)
    assert code == 1
    assert not checks["file sources"]["passed"] and checks["file sources"]["rules"] == ["F5"]
    assert checks["query"]["passed"]  # the frames themselves are well formed


def test_a_tool_the_server_does_not_offer_fails_the_handshake(tmp_path: Path) -> None:
    server = [sys.executable, "-m", "tests.mcp.mcpserver_app", "log"]
    code, checks = _check("--tool", "nope", "--", *server)
    assert code == 1
    assert list(checks) == ["handshake"]
    assert "offers no tool 'nope'" in checks["handshake"]["detail"]


def test_tool_flags_belong_to_the_mcp_binding() -> None:
    done = run_hostd("check-provider", "--tool", "x", "--", sys.executable, "-c", "pass")
    assert done.returncode == 2 and "--binding mcp" in done.stderr


def test_the_published_everything_server_passes() -> None:
    command = _everything()
    if command is None:
        pytest.skip(
            "@modelcontextprotocol/server-everything is not installed: "
            "npm install -g @modelcontextprotocol/server-everything (or set MCP_SERVER_EVERYTHING)"
        )
    code, checks = _check("--goal", "how does the server start up", "--", *command)
    assert code == 0, checks
    assert checks["query"]["detail"].split()[0] != "0", checks["query"]
