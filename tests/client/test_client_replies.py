"""The client matches replies by the integer id it sent, through the one correlation table."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import anyio
import pytest

from hostd.client import spawn

pytestmark = pytest.mark.anyio

ROOT = Path(__file__).resolve().parents[2]


async def test_a_reply_whose_id_is_true_does_not_answer_request_1() -> None:
    # ``True == 1`` in Python: a table keyed by the raw id would hand request 1 the
    # boolean reply. Only the integer the client sent answers it.
    command = [sys.executable, "-m", "tests.fixtures.boolean_id_daemon"]
    with anyio.fail_after(60):  # a hang guard, not the thing tested
        async with spawn(command=command, cwd=ROOT, stderr=subprocess.DEVNULL) as client:
            assert await client.call("host/status") == "own"
            assert await client.call("host/status") == "own"
