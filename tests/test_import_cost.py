"""What an entry point loads: a library is imported where it is first needed.

Every CLI command, daemon start and provider process pays for what its imports load
(and the test suite pays it thousands of times). jsonrpcserver (with jsonschema) is
the wire dispatcher's, loaded by the first request a ``Dispatcher`` answers; httpx is
the remote carrier's, loaded by the first ``RemoteEndpoint`` built. Each is checked in
a fresh interpreter: this one has loaded both long ago.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

#: Libraries only some paths need: none of them may load with a module's import.
ON_USE = ("jsonrpcserver", "httpx")


def _run(code: str) -> list[str]:
    done = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        check=True,
        timeout=120,
        cwd=ROOT,
    )
    # The marker keeps out a debug line structlog (not configured here) prints.
    return [line[len("loaded=") :] for line in done.stdout.split() if line.startswith("loaded=")]


def _loaded(step: str) -> str:
    """A line of code printing which of ``ON_USE`` are loaded after ``step``."""
    found = f"','.join(m for m in {ON_USE!r} if m in sys.modules) or 'none'"
    return f"{step}\nprint('loaded=' + ({found}))\n"


@pytest.mark.parametrize(
    "module", ["hostd.server", "hostd.cli", "hostd.client", "hostd.provider", "hostd.engine"]
)
def test_importing_an_entry_point_loads_no_library_it_may_not_use(module: str) -> None:
    assert _run(_loaded(f"import sys, {module}")) == ["none"]


def test_jsonrpcserver_loads_with_the_first_request_at_the_wire() -> None:
    code = (
        "import sys, anyio\n"
        "from pydantic import BaseModel\n"
        "from hostd.rpc import DirectDispatcher, Dispatcher, Method\n"
        "class P(BaseModel):\n    x: int = 0\n"
        "async def echo(ctx, p):\n    return p.x\n"
        "methods = {'echo': Method(P, echo)}\n"
        "wire, direct = Dispatcher(methods), DirectDispatcher(methods)\n"
        "assert anyio.run(direct.call, 'echo', {'x': 2}, None) == 2\n"
        + _loaded("")
        + "req = {'jsonrpc': '2.0', 'id': 1, 'method': 'echo', 'params': {'x': 3}}\n"
        "assert anyio.run(wire.dispatch, req, None)['result'] == 3\n" + _loaded("")
    )
    # Built and called in-process: nothing of the wire's library; one request at the wire.
    assert _run(code) == ["none", "jsonrpcserver"]


def test_httpx_loads_with_the_first_remote_endpoint() -> None:
    code = (
        _loaded("import sys\nfrom hostd.transport import RemoteEndpoint")
        + "RemoteEndpoint('p', 'https://provider.example/cgp')\n"
        + _loaded("")
    )
    assert _run(code) == ["none", "httpx"]
