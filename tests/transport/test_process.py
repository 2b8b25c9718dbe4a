"""Provider child processes: scrubbed env, stderr into the log, the teardown ladder."""

from __future__ import annotations

import json
import os
import signal
import sys

import anyio
import pytest
from structlog.testing import capture_logs

from hostd.errors import ProviderCrashed
from hostd.protocol import ContextQuery
from hostd.transport import ChildProcess, ProviderConnection, scrubbed_env
from tests.fixtures.procs import MARK_VAR, ROOT, leftovers, marked_env, python

pytestmark = pytest.mark.anyio


def test_scrubbed_env_keeps_the_allow_list_and_the_named_extras() -> None:
    source = {"PATH": "/bin", "HOME": "/h", "AWS_SECRET_ACCESS_KEY": "s3cr3t", "LANG": "C"}
    env = scrubbed_env({"PROVIDER_TOKEN": "given"}, source=source)
    assert env == {"PATH": "/bin", "HOME": "/h", "LANG": "C", "PROVIDER_TOKEN": "given"}


async def test_a_child_sees_only_the_scrubbed_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HOSTD_TEST_SECRET", "do-not-leak")
    code = "import json, os, sys; sys.stdout.write(json.dumps(dict(os.environ)) + chr(10))"
    async with anyio.create_task_group() as tg:
        child = await ChildProcess.spawn(
            "env", [sys.executable, "-c", code], env={**marked_env(), "GIVEN": "yes"}
        )
        child.start_pumps(tg)
        assert child.process.stdout is not None
        data = b""
        async for chunk in child.process.stdout:
            data += chunk
        await child.aclose(grace=5)
    seen = json.loads(data)
    assert "HOSTD_TEST_SECRET" not in seen
    assert seen["GIVEN"] == "yes" and seen[MARK_VAR]


async def test_stderr_lines_reach_the_log_tagged_with_the_provider_id() -> None:
    code = "import sys; sys.stderr.write('warming up\\nready\\n'); sys.stderr.flush()"
    with capture_logs() as logs:
        async with anyio.create_task_group() as tg:
            child = await ChildProcess.spawn(
                "noisy", [sys.executable, "-c", code], env=marked_env()
            )
            child.start_pumps(tg)
            await child.exited.wait()
            await child.aclose(grace=5)
    lines = [e for e in logs if e["event"] == "provider.stderr"]
    assert [(e["provider"], e["line"]) for e in lines] == [
        ("noisy", "warming up"),
        ("noisy", "ready"),
    ]


async def test_a_child_that_ignores_sigterm_is_killed() -> None:
    code = (
        "import signal, sys, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); "
        "sys.stdout.write('armed\\n'); sys.stdout.flush(); time.sleep(600)"
    )
    with capture_logs() as logs:
        async with anyio.create_task_group() as tg:
            child = await ChildProcess.spawn(
                "stubborn", [sys.executable, "-c", code], env=marked_env()
            )
            child.start_pumps(tg)
            assert child.process.stdout is not None
            await child.process.stdout.receive()  # the SIGTERM handler is installed
            code_ = await child.aclose(grace=0.2)
    assert code_ == -signal.SIGKILL
    events = [e["event"] for e in logs]
    assert "provider.process.sigterm" in events and "provider.process.sigkill" in events


async def test_a_child_that_exits_on_stdin_eof_needs_no_signal() -> None:
    code = "import sys; sys.stdin.read()"
    with capture_logs() as logs:
        async with anyio.create_task_group() as tg:
            child = await ChildProcess.spawn(
                "polite", [sys.executable, "-c", code], env=marked_env()
            )
            child.start_pumps(tg)
            assert await child.aclose(grace=30) == 0
    assert "provider.process.sigterm" not in [e["event"] for e in logs]


async def test_teardown_reaches_grandchildren_in_the_process_group() -> None:
    async with anyio.create_task_group() as tg:
        conn = await ProviderConnection.open(
            "g",
            python("tests.fixtures.adversarial_provider", "grandchild"),
            task_group=tg,
            env=marked_env(),
            cwd=ROOT,
            grace=0.3,
            handshake_timeout=30,
        )
        pgid = os.getpgid(conn.child.pid)
        assert pgid == conn.child.pid  # its own process group (new session)
        with anyio.move_on_after(0.2):
            await conn.query(ContextQuery(goal="g", max_frames=1, max_tokens=10))
        await conn.aclose()
    assert leftovers() == []


async def test_a_missing_command_is_a_crash_not_an_exception_group() -> None:
    async with anyio.create_task_group() as tg:
        with pytest.raises(ProviderCrashed):
            await ProviderConnection.open("x", ["/nonexistent/provider"], task_group=tg)
