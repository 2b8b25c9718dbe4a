"""``hostd.provider.run_http``: the HTTPS server's public entry point.

A stdio provider imports ``hostd.provider`` (and the bundled providers import
``run_http`` from it at start) without the ``remote`` extra installed, so naming
``run_http`` must not load starlette or uvicorn: only calling it does. The entry
point repeats the server's signature so that it can defer that import; the two must
not drift.
"""

from __future__ import annotations

import inspect
import subprocess
import sys

from hostd.provider import _http, run_http
from tests.fixtures.procs import ROOT


def test_naming_run_http_loads_no_http_library() -> None:
    probe = (
        "import sys\n"
        "from hostd.provider import run_http\n"
        "import providers.files, providers.memory\n"
        "print(sorted(m for m in ('starlette', 'uvicorn') if m in sys.modules))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,  # a hang guard
        check=True,
    )
    assert done.stdout.strip() == "[]"


def test_the_entry_point_takes_what_the_server_takes_with_the_same_defaults() -> None:
    ours, theirs = (inspect.signature(f, eval_str=True) for f in (run_http, _http.run_http))
    assert ours == theirs
