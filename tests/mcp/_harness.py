"""Shared by the MCP tests: configs, and ``hostd mcp`` as a real child for the SDK client."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

from mcp import StdioServerParameters

from tests.server.conftest import ROOT, provider_table

__all__ = ["ROOT", "hostd_mcp", "write_config"]


def write_config(
    workdir: Path, marker: str, providers: dict[str, dict[str, Any]], extra: str = ""
) -> Path:
    """A config of healthy fixture providers (``--name <id>-<marker>``) plus ``extra``."""
    lines = [
        "[host]",
        f'socket = "{workdir / "run" / "hostd.sock"}"',
        f'state_dir = "{workdir / "state"}"',
        "",
    ]
    text = "\n".join(lines) + "\n".join(
        provider_table(p, marker, **o) for p, o in providers.items()
    )
    path = workdir / "hostd.toml"
    path.write_text(text + extra, encoding="utf-8")
    return path


def hostd_mcp(config: Path, *args: str) -> StdioServerParameters:
    """``hostd --config CONFIG mcp ARGS…`` with this checkout importable."""
    env = dict(os.environ)
    env["PYTHONPATH"] = str(ROOT)
    return StdioServerParameters(
        command=sys.executable,
        args=["-m", "hostd", "--config", str(config), "mcp", *args],
        env=env,
        cwd=str(ROOT),
    )
