"""``hostd.client``: the blocking wrapper over a socket and over a spawned stdio daemon,
and the async client's cancellation turning into ``$/cancel``."""

from __future__ import annotations

import json
import shutil
import signal
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import anyio
import pytest

from hostd.client import Client, ComposeResult, RpcError, connect
from tests.fixtures.procs import ServeChild

ROOT = Path(__file__).resolve().parents[2]


def _provider(pid: str, *extra: str) -> str:
    words = ["python", "-m", "tests.fixtures.healthy_provider", "--name", pid, *extra]
    return (
        f'[[provider]]\nid = "{pid}"\ncommand = {json.dumps(words)}\ncwd = "{ROOT}"\n'
        "timeout_ms = 600000\n"  # far beyond every guard: only a cancel ends "slow"'s leg
    )


@pytest.fixture
def config() -> Iterator[Path]:
    workdir = Path(tempfile.mkdtemp(prefix="hc-"))  # short: AF_UNIX path limit
    path = workdir / "hostd.toml"
    path.write_text(
        f'[host]\nsocket = "{workdir}/run/s.sock"\nstate_dir = "{workdir}/state"\n'
        + _provider("alpha")
        + _provider("slow", "--delay-ms", "600000"),
        encoding="utf-8",
    )
    yield path
    shutil.rmtree(workdir, ignore_errors=True)


@pytest.fixture
def daemon(config: Path) -> Iterator[Path]:
    """A ``hostd serve`` child; yields its socket once it logs ``host.serving``."""
    child = ServeChild(config)
    serving = child.start(60)
    try:
        assert serving
        yield config.parent / "run" / "s.sock"
    finally:
        assert child.stop() == 0


def test_sync_client_over_the_socket(daemon: Path) -> None:
    with Client.connect(daemon) as hostd:
        result = hostd.compose("sync please", budget=200, providers=["alpha"])
        assert isinstance(result, ComposeResult) and len(result.citations) == 3
        assert result.usage is not None
        assert hostd.usage(result.request_id)["usage"] == result.usage.to_wire()
        assert [p["id"] for p in hostd.providers()] == ["alpha", "slow"]
        assert hostd.status()["state"] == "serving"
        with pytest.raises(RpcError) as exc:
            hostd.compose("x", providers=["nope"])
        assert exc.value.remote_reason == "unknown_provider"


def test_sync_client_spawning_a_stdio_daemon(config: Path) -> None:
    with Client.spawn(config, stderr=subprocess.DEVNULL, cwd=ROOT) as hostd:
        result = hostd.compose("spawned", budget=200, providers=["alpha"])
        assert result.prompt.count("<frame ") == 3 == len(result.evidence)


def _script(code: str, *args: str) -> subprocess.CompletedProcess[str]:
    """A user's script run with this interpreter, its stdout and stderr captured."""
    return subprocess.run(
        [sys.executable, "-c", code, *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


_SPAWNS = """
import sys
from hostd.client import Client
level = {"default": "warning", "none": None}[sys.argv[2]]
with Client.spawn(sys.argv[1], log_level=level) as hostd:
    hostd.compose("spawned", budget=200, providers=["alpha"])
print("done")
"""


@pytest.mark.parametrize(("level", "info_logged"), [("default", False), ("none", True)])
def test_a_spawned_daemon_sharing_the_callers_stderr_logs_at_warning(
    config: Path, level: str, info_logged: bool
) -> None:
    # The caller's script inherits its stderr to the daemon, as a user's script does.
    done = _script(_SPAWNS, str(config), level)
    assert done.returncode == 0 and done.stdout == "done\n", done.stderr
    lines = done.stderr.splitlines()
    events = [json.loads(line)["event"] for line in lines if line.startswith("{")]
    assert ("provider.leg" in events) is info_logged, events


_REFUSED = """
import subprocess, sys
from hostd.client import Client
from hostd.errors import ConnectionLost
stderr = {"yours": None, "dropped": subprocess.DEVNULL}[sys.argv[2]]
try:
    with Client.spawn(sys.argv[1], stderr=stderr) as hostd:
        hostd.status()
except ConnectionLost as exc:
    print(exc)
    print(sorted(exc.data.items()))
"""


@pytest.mark.parametrize("stderr", ["yours", "dropped"])
def test_a_spawned_daemon_that_refuses_its_config_says_why_in_the_error(
    tmp_path: Path, stderr: str
) -> None:
    typo = tmp_path / "hostd.toml"
    typo.write_text(f'[host]\nstate_dir = "{tmp_path}/state"\ntokenizr = "x.json"\n')
    done = _script(_REFUSED, str(typo), stderr)
    assert done.returncode == 0, done.stderr
    why = f"{typo}: host.tokenizr: unknown key (did you mean tokenizer?) [bad_config]"
    # The program reads the reason in the error it caught, its stderr dropped or not ...
    assert done.stdout.splitlines() == [
        f"hostd closed the connection: the daemon exited with status 2: {why}",
        "[('daemon_reason', 'bad_config'), ('exit_status', 2)]",
    ]
    # ... and the daemon's stderr reaches the caller's as it comes, unless dropped.
    assert (f"hostd: {why}" in done.stderr.splitlines()) is (stderr == "yours")


@pytest.mark.anyio
async def test_cancelling_a_call_cancels_the_work_in_the_daemon(daemon: Path) -> None:
    async with connect(daemon) as client:
        call = anyio.CancelScope()

        async def wait() -> None:
            with call:  # a reply that never comes: the call is cancelled, not timed out
                await client.compose("wait", providers=["slow"], timeout_ms=600000)

        async with anyio.create_task_group() as tg:
            tg.start_soon(wait)
            # Cancelled once the daemon has the work (host/status counts it besides itself).
            with anyio.fail_after(30):
                while (await client.status())["in_flight"] < 2:
                    pass
            call.cancel()
        with anyio.fail_after(30):
            while (await client.status())["in_flight"] > 1:
                pass
        still = await client.compose("still here", providers=["alpha"])
        assert isinstance(still, ComposeResult) and still.citations and still.evidence


@pytest.mark.anyio
async def test_a_spawned_daemon_that_ignores_its_closed_stdin_is_terminated() -> None:
    # The transport's ladder: stdin closed → grace → SIGTERM (→ SIGKILL, not needed here).
    from hostd.client import spawn

    stubborn = [sys.executable, "-c", "import time; time.sleep(600)"]
    with anyio.fail_after(60):
        async with spawn(command=stubborn, grace_s=0.1, stderr=subprocess.DEVNULL) as client:
            process = client.process
    assert process is not None
    assert process.returncode == -signal.SIGTERM


def test_connecting_where_no_daemon_serves_is_a_typed_error_naming_the_socket(
    tmp_path: Path,
) -> None:
    from hostd.errors import NoDaemon

    missing = tmp_path / "none.sock"
    with pytest.raises(NoDaemon) as caught, Client.connect(missing):
        pass
    assert str(missing) in str(caught.value) and "hostd serve" in str(caught.value)
    assert isinstance(caught.value, ConnectionError)  # what callers catching OSError see

    async def main() -> None:
        async with connect(missing):
            pass

    with pytest.raises(NoDaemon):
        anyio.run(main)

    # Named by its config, the hint starts that config's daemon.
    config = tmp_path / "hostd.toml"
    config.write_text(f'[host]\nsocket = "{missing}"\n')
    with pytest.raises(NoDaemon) as by_config, Client.connect(config=config):
        pass
    assert f"start one with `hostd --config {config} serve`" in str(by_config.value)


_RAISES = """\
from hostd.protocol import Capabilities, ProviderInfo, QueryCapability
from hostd.provider import Provider, run_stdio


class Raises(Provider):
    info = ProviderInfo(name="raises", version="1.0")
    capabilities = Capabilities(query=QueryCapability(kinds=["fact"]))

    async def query(self, query):
        raise RuntimeError("notes database is locked")


run_stdio(Raises())
"""


def test_a_providers_internal_error_says_where_its_own_words_are(tmp_path: Path) -> None:
    # The daemon reports the error by its size, never its text; the report says where
    # the provider's stderr went, as `hostd compose` does, still without quoting it.
    script = tmp_path / "raises.py"
    script.write_text(_RAISES, encoding="utf-8")
    config = tmp_path / "hostd.toml"
    config.write_text(
        f'[host]\nstate_dir = "{tmp_path}/state"\n'
        f'[[provider]]\nid = "raises"\ncommand = ["python", "{script}"]\ncwd = "{ROOT}"\n'
        + _provider("alpha"),
        encoding="utf-8",
    )
    with Client.spawn(config, stderr=subprocess.DEVNULL, cwd=ROOT) as hostd:
        result = hostd.compose("anything", budget=200)
    legs = {leg.provider_id: leg for leg in result.providers}
    failed = legs["raises"]
    assert failed.status == "error" and failed.error is not None
    assert failed.error.message.startswith("provider answered internal (")
    where = failed.where_to_look
    assert where is not None and where.startswith("raises's own words are on its stderr")
    assert "provider.stderr" in where and "at warning" in where
    assert "`hostd check-provider --provider raises`" in where
    assert "database is locked" not in where + failed.error.message
    assert legs["alpha"].ok and legs["alpha"].where_to_look is None
