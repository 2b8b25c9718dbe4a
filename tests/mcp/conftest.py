"""Shared by the MCP tests: the daemon harness of tests/server, and a small corpus."""

import importlib.util
from pathlib import Path

import pytest

from tests.server.conftest import marker, start_daemon, workdir

__all__ = ["corpus", "marker", "start_daemon", "workdir"]

if importlib.util.find_spec("mcp") is None:  # the mcp extra (scripts/test installs it)
    collect_ignore_glob = ["test_*.py"]


@pytest.fixture
def corpus(workdir: Path) -> Path:
    root = workdir / "corpus"
    root.mkdir()
    (root / "cache.md").write_text(
        "# Cache eviction\n\nThe cache evicts the least recently used entry when it is full.\n",
        encoding="utf-8",
    )
    (root / "parser.md").write_text("The parser reads tokens one line at a time.\n")
    return root
