"""Shared by the MCP tests: configs, and ``hostd mcp`` as a real child for the SDK client."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

from mcp import StdioServerParameters

from tests.server.conftest import ROOT, provider_table

__all__ = ["PATIENT_MS", "ROOT", "hostd_mcp", "serve_lines", "write_config"]


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


#: The tests' ``--ready-wait-ms``: a call waits for a provider's start up to its start
#: deadline, as a socket client's does, so no verdict depends on how fast a provider
#: starts on a busy machine (``hostd mcp``'s own 3 s would).
PATIENT_MS = 600_000


def hostd_mcp(
    config: Path, *args: str, ready_wait_ms: int | None = PATIENT_MS
) -> StdioServerParameters:
    """``hostd --config CONFIG mcp ARGS…`` with this checkout importable;
    ``ready_wait_ms`` its ``--ready-wait-ms`` (None: ``hostd mcp``'s default)."""
    env = dict(os.environ)
    env["PYTHONPATH"] = str(ROOT)
    wait = [] if ready_wait_ms is None else ["--ready-wait-ms", str(ready_wait_ms)]
    return StdioServerParameters(
        command=sys.executable,
        args=["-m", "hostd", "--config", str(config), "mcp", *args, *wait],
        env=env,
        cwd=str(ROOT),
    )


#: A raw client's ``initialize`` (id 0) and ``notifications/initialized``, for tests that
#: write MCP lines themselves.
INITIALIZE: dict[str, Any] = {
    "jsonrpc": "2.0",
    "id": 0,
    "method": "initialize",
    "params": {
        "protocolVersion": "2025-06-18",
        "capabilities": {},
        "clientInfo": {"name": "raw", "version": "0"},
    },
}
INITIALIZED = {"jsonrpc": "2.0", "method": "notifications/initialized"}


async def serve_lines(session: Any, lines: list[bytes], **options: Any) -> list[Any]:
    """Every message ``hostd mcp``'s edge (``serve_mcp``, in process, in front of
    ``session``) wrote for ``lines``, once stdin ended; ``options`` are ``serve_mcp``'s."""
    import anyio

    from hostd.mcp import serve_mcp

    written: list[bytes] = []

    async def receive() -> bytes:
        return lines.pop(0) if lines else b""

    async def send(data: bytes) -> None:
        written.append(data)

    with anyio.fail_after(60):  # a hang guard
        await serve_mcp(session, receive, send, **options)
    return [json.loads(x) for x in b"".join(written).split(b"\n") if x.strip()]
