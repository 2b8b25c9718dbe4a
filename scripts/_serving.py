"""A ``hostd serve`` child for the benchmark scripts, serving until the block ends."""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
from collections.abc import AsyncIterator, Mapping
from pathlib import Path

import anyio


@contextlib.asynccontextmanager
async def serving_daemon(
    config: Path,
    checkout: Path,
    *,
    env: Mapping[str, str] | None = None,
    guard_s: float = 120,
) -> AsyncIterator[None]:
    """``checkout``'s ``hostd serve`` on ``config``, entered once it logs ``host.serving``
    (its JSON log is read for that line and otherwise discarded), terminated and waited
    for when the block ends. ``env`` defaults to this process's, with ``checkout`` first
    on ``PYTHONPATH``."""
    daemon = await anyio.open_process(
        [sys.executable, "-m", "hostd", "--config", str(config), "--log-level", "info", "serve"],
        cwd=checkout,
        env=dict(env) if env is not None else dict(os.environ, PYTHONPATH=str(checkout)),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    serving = anyio.Event()

    async def drain() -> None:
        assert daemon.stderr is not None
        tail = b""
        async for chunk in daemon.stderr:
            if b'"host.serving"' in tail + chunk:
                serving.set()
            tail = chunk[-64:]

    async with daemon, anyio.create_task_group() as tg:
        tg.start_soon(drain)
        with anyio.fail_after(guard_s):
            await serving.wait()
        try:
            yield
        finally:
            daemon.terminate()
            await daemon.wait()
            tg.cancel_scope.cancel()
