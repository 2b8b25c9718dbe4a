"""A provider's descendants: a provider that exits while a grandchild holds its output is
a crash, and no descendant outlives its provider's teardown or the host itself."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import anyio
import pytest
from anyio.abc import TaskGroup

from hostd._reaper import descendants
from hostd._reaper import supported as reaper_supported
from hostd._teardown import wait_exited
from hostd.errors import ProviderCrashed
from hostd.protocol import ContextQuery
from hostd.transport import ProviderConnection
from hostd.transport.process import _shim
from tests.fixtures.procs import ROOT, marked_env, python

pytestmark = pytest.mark.anyio

QUERY = ContextQuery(goal="g", max_frames=1, max_tokens=10)


def _orphaning(mode: str, pidfile: Path) -> list[str]:
    return python("tests.transport.orphaning_provider", mode, str(pidfile))


async def _open(tg: TaskGroup, mode: str, pidfile: Path) -> ProviderConnection:
    return await ProviderConnection.open(
        mode,
        _orphaning(mode, pidfile),
        task_group=tg,
        env=marked_env(),
        cwd=ROOT,
        handshake_timeout=30,
        grace=0.5,
    )


@pytest.fixture(params=["reaper", "no_reaper"])
def reaper(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> bool:
    """Both ways a provider runs: under the ``_reaper`` shim, and directly (where the
    shim cannot work: then the host must see the exit itself)."""
    if request.param == "no_reaper":
        monkeypatch.setattr(_shim, "reaper_supported", lambda: False)
        return False
    if not reaper_supported():
        pytest.skip("the reaper shim needs Linux /proc and prctl")
    return True


async def test_a_provider_that_exits_while_a_grandchild_holds_its_output_is_a_crash(
    tmp_path: Path, reaper: bool
) -> None:
    pidfile = tmp_path / "pids"
    async with anyio.create_task_group() as tg:
        conn = await _open(tg, "exit_mid_query", pidfile)
        with anyio.fail_after(20), pytest.raises(ProviderCrashed) as crashed:
            await conn.query(QUERY)
        if not reaper:  # the shim kills the grandchild at once: then the output ends too
            assert "exited (code 4) while its output stayed open" in crashed.value.message
        assert not conn.alive
        await conn.aclose()
    assert pidfile.read_text().split()  # the grandchild was there (and is gone: fixture)


async def test_the_fan_out_reports_such_a_leg_crashed_not_timed_out(
    tmp_path: Path, reaper: bool
) -> None:
    from hostd.engine import Host, ProviderSpec

    spec = ProviderSpec(
        "exits",
        _orphaning("exit_mid_query", tmp_path / "pids"),
        env=marked_env(),
        cwd=str(ROOT),
        timeout_ms=30_000,  # far beyond the crash: a timeout would mean it was missed
    )
    async with Host([spec]) as host:
        with anyio.fail_after(25):
            fan = await host.query_all(QUERY, 100)
    assert fan.reports["exits"].status == "crashed"


async def _gone(pids: list[int]) -> None:
    with anyio.fail_after(30):  # a hang guard; the fixture also checks by the env mark
        await wait_exited(pids)


def _recorded(pidfile: Path) -> list[int]:
    return [int(p) for p in pidfile.read_text().split()]


async def test_teardown_reaches_a_grandchild_that_left_the_process_group(
    tmp_path: Path, reaper: bool
) -> None:
    if not reaper:
        pytest.skip("without the shim a setsid() grandchild is out of reach (documented)")
    pidfile = tmp_path / "pids"
    async with anyio.create_task_group() as tg:
        conn = await _open(tg, "setsid", pidfile)
        (grandchild,) = _recorded(pidfile)  # written before the handshake was answered
        assert os.getsid(grandchild) == grandchild != os.getsid(conn.child.pid)
        assert (await conn.query(QUERY)).frames == []  # it serves meanwhile
        await conn.aclose()
    await _gone([grandchild])


async def test_a_killed_host_takes_its_provider_and_every_descendant_with_it(
    tmp_path: Path, reaper: bool
) -> None:
    if not reaper:
        pytest.skip("without the shim a killed host leaves its providers (documented)")
    pidfile = tmp_path / "pids"
    host = await anyio.open_process(
        python("tests.transport.lone_host", "setsid", str(pidfile)),
        env={**os.environ, **marked_env()},
        cwd=ROOT,
        stdin=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        assert host.stdout is not None
        seen = b""
        with anyio.fail_after(60):
            while b"ready\n" not in seen:  # after its log lines (structlog's stdout)
                seen += await host.stdout.receive()
        tree = descendants(host.pid)  # the shim, the provider and its grandchild
        (grandchild,) = _recorded(pidfile)
        assert grandchild in tree and len(tree) >= 3
        host.kill()
        assert await host.wait() == -signal.SIGKILL
        await _gone(tree)
    finally:
        if host.returncode is None:
            host.kill()
            await host.wait()
        await host.aclose()


@pytest.mark.parametrize(
    ("code", "returncode"),
    [
        ("raise SystemExit(7)", 7),
        ("import os, signal; os.kill(os.getpid(), signal.SIGTERM)", -signal.SIGTERM),
        ("import os, signal; os.kill(os.getpid(), signal.SIGKILL)", -signal.SIGKILL),
    ],
)
def test_the_shim_exits_as_its_provider_did(code: str, returncode: int, reaper: bool) -> None:
    if not reaper:
        pytest.skip("the shim itself")
    command = [sys.executable, "-c", code]
    done = subprocess.run(_shim.under_reaper(command), env=marked_env(), timeout=60)
    assert done.returncode == returncode
