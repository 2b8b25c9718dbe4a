"""The dependency direction of architecture.md, checked by walking imports.

server → engine → transport → protocol, server → compose → protocol; engine may
use compose.budget_split; every layer may use hostd.protocol and hostd.errors.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent / "hostd"

# package → hostd packages/modules it must never import
FORBIDDEN = {
    "protocol": {
        "compose",
        "engine",
        "transport",
        "server",
        "errors",
        "client",
        "cli",
        "config",
        "provider",
    },
    "compose": {"engine", "transport", "server", "client", "cli", "config", "provider"},
    "transport": {"engine", "compose", "server", "client", "cli"},
    "engine": {"server", "client", "cli"},
}


def _hostd_imports(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names = [node.module]
        else:
            continue
        for name in names:
            parts = name.split(".")
            if parts[0] == "hostd" and len(parts) > 1:
                found.add(parts[1])
    return found


@pytest.mark.parametrize("package", sorted(FORBIDDEN))
def test_layer_imports_point_one_way(package: str) -> None:
    pkg = ROOT / package
    if not pkg.exists():
        pytest.skip(f"hostd/{package} does not exist yet")
    bad = []
    for path in sorted(pkg.rglob("*.py")):
        for target in _hostd_imports(path) & FORBIDDEN[package]:
            bad.append(f"{path.relative_to(ROOT.parent)} imports hostd.{target}")
    assert bad == []


def test_the_walker_sees_imports() -> None:
    # Guard against a walker that silently finds nothing.
    assert "protocol" in _hostd_imports(ROOT / "errors.py")
