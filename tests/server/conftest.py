"""Harness for daemon tests: real ``hostd serve`` processes with real provider children.

``DaemonProc`` starts the daemon with a config written into a short private
directory, waits for its ``host.serving`` log event (no sleeps), collects its
JSON log, and on teardown stops it and checks that it exited 0, removed its
socket, and left no provider process behind (every provider's command line
carries a per-test marker that is searched for in /proc).
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import uuid
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest
from anyio.abc import Process

ROOT = Path(__file__).resolve().parents[2]


def daemon_command(config: Path, *args: str) -> list[str]:
    return [sys.executable, "-m", "hostd", "--config", str(config), *args]


#: A provider that is still answering whatever the test does: its answer and its leg's
#: deadline both lie far beyond every hang guard, so only the test's own act (a cancel,
#: a disconnect, a shutdown) can end its request, never a clock.
STUCK: dict[str, Any] = {"delay_ms": 600_000, "timeout_ms": 600_000}


def provider_table(pid: str, marker: str, timeout_ms: int = 60000, **opts: Any) -> str:
    """A ``[[provider]]`` running the healthy fixture with ``--name <pid>-<marker>``;
    ``opts`` are its flags, ``timeout_ms`` its leg deadline: generous, since a lazily
    started provider's first leg includes its start and 64 clients may share it (a test
    whose provider must still be answering when the test acts passes ``STUCK``)."""
    extra = [f'"--{k.replace("_", "-")}", "{v}"' for k, v in opts.items()]
    cmd = ", ".join(
        ['"python"', '"-m"', '"tests.fixtures.healthy_provider"', '"--name"', f'"{pid}-{marker}"']
        + extra
    )
    return (
        f'[[provider]]\nid = "{pid}"\ncommand = [{cmd}]\ntimeout_ms = {timeout_ms}\n'
        f'cwd = "{ROOT}"\n'
    )


def marked_processes(marker: str) -> list[int]:
    """Pids whose command line carries ``marker`` (leftover providers)."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == os.getpid():
            continue
        try:
            with open(f"/proc/{entry}/cmdline", "rb") as fh:
                cmdline = fh.read()
            with open(f"/proc/{entry}/stat", "rb") as fh:
                state = fh.read().rsplit(b")", 1)[1].split()[0]
        except OSError:
            continue
        if marker.encode() in cmdline and state != b"Z":
            found.append(int(entry))
    return found


class DaemonProc:
    """One ``hostd serve`` child with its config, socket and collected log."""

    def __init__(self, workdir: Path, marker: str, config_text: str) -> None:
        self.workdir = workdir
        self.marker = marker
        self.socket = workdir / "run" / "hostd.sock"
        self.config = workdir / "hostd.toml"
        self.config.write_text(config_text, encoding="utf-8")
        self.process: Process | None = None
        self.log: list[dict[str, Any]] = []
        self.log_text: list[str] = []
        self._serving = anyio.Event()
        self._exited = anyio.Event()
        self._logged = anyio.Event()  # set (and replaced) at every new log event

    async def start(self, tg: Any, *args: str) -> None:
        self.process = await anyio.open_process(
            daemon_command(self.config, "serve", *args),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            cwd=ROOT,
        )
        tg.start_soon(self._read_log)
        with anyio.fail_after(30):
            await self._serving.wait()
        if not self._serving_seen:
            await self.process.wait()
            raise RuntimeError("hostd exited at start:\n" + "\n".join(self.log_text))

    _serving_seen = False

    async def _read_log(self) -> None:
        assert self.process is not None and self.process.stderr is not None
        buf = b""
        try:
            async for chunk in self.process.stderr:
                buf += chunk
                *lines, buf = buf.split(b"\n")
                for raw in lines:
                    text = raw.decode("utf-8", "replace")
                    self.log_text.append(text)
                    try:
                        event = json.loads(text)
                    except ValueError:
                        continue
                    if isinstance(event, dict):
                        self.log.append(event)
                        self._logged.set()
                        self._logged = anyio.Event()
                        if event.get("event") == "host.serving":
                            self._serving_seen = True
                            self._serving.set()
        finally:
            self._serving.set()
            self._exited.set()
            self._logged.set()

    def events(self, name: str) -> list[dict[str, Any]]:
        return [e for e in self.log if e.get("event") == name]

    async def logged(self, name: str, **fields: Any) -> dict[str, Any]:
        """The first ``name`` event (carrying ``fields``, when given), once the daemon has
        logged it (a hang guard bounds it)."""
        with anyio.fail_after(60):
            while not (
                found := [
                    e for e in self.events(name) if all(e.get(k) == v for k, v in fields.items())
                ]
            ):
                if self._exited.is_set():
                    raise AssertionError(f"hostd exited without logging {name!r}")
                await self._logged.wait()
        return found[0]

    async def logged_times(self, name: str, n: int, **fields: Any) -> list[dict[str, Any]]:
        """The ``name`` events (carrying ``fields``) once the daemon has logged ``n`` of
        them (a hang guard bounds it)."""
        with anyio.fail_after(60):
            while (
                len(
                    found := [
                        e
                        for e in self.events(name)
                        if all(e.get(k) == v for k, v in fields.items())
                    ]
                )
                < n
            ):
                if self._exited.is_set():
                    raise AssertionError(f"hostd exited before logging {name!r} {n} times")
                await self._logged.wait()
        return found

    def signal(self, signum: signal.Signals = signal.SIGTERM) -> None:
        assert self.process is not None
        self.process.send_signal(signum)

    async def wait(self) -> int:
        assert self.process is not None
        with anyio.fail_after(60):
            code = await self.process.wait()
            await self._exited.wait()
        return code

    async def stop(self) -> int:
        assert self.process is not None
        if self.process.returncode is None:
            self.signal(signal.SIGTERM)
        return await self.wait()


def write_config(
    workdir: Path, marker: str, providers: dict[str, dict[str, Any]], **host: Any
) -> str:
    lines = ["[host]", f'socket = "{workdir / "run" / "hostd.sock"}"']
    lines.append(f'state_dir = "{workdir / "state"}"')
    for key, value in host.items():
        lines.append(f"{key} = {json.dumps(value)}")
    lines.append("")
    return (
        "\n".join(lines)
        + "\n"
        + "\n".join(provider_table(pid, marker, **opts) for pid, opts in providers.items())
    )


@pytest.fixture
def workdir() -> Iterator[Path]:
    # Short and private: AF_UNIX paths are limited to ~108 bytes.
    path = Path(tempfile.mkdtemp(prefix="hd-"))
    yield path
    shutil.rmtree(path, ignore_errors=True)


@pytest.fixture
def marker() -> str:
    return f"m{uuid.uuid4().hex[:12]}"


@pytest.fixture
async def start_daemon(workdir: Path, marker: str) -> AsyncIterator[Callable[..., Any]]:
    """``await start_daemon(providers={...}, host_key=value, args=(...))`` → a serving daemon."""
    started: list[DaemonProc] = []
    async with anyio.create_task_group() as tg:

        async def start(
            providers: dict[str, dict[str, Any]] | None = None,
            *,
            args: tuple[str, ...] = (),
            extra: str = "",
            **host: Any,
        ) -> DaemonProc:
            if providers is None:
                providers = {"alpha": {}, "beta": {}, "gamma": {}}
            text = write_config(workdir, marker, providers, **host) + extra
            daemon = DaemonProc(workdir, marker, text)
            started.append(daemon)
            await daemon.start(tg, *args)
            return daemon

        try:
            yield start
        finally:
            with anyio.CancelScope(shield=True):
                for daemon in started:
                    if daemon.process is not None and daemon.process.returncode is None:
                        daemon.signal(signal.SIGKILL)
                        await daemon.process.wait()
            tg.cancel_scope.cancel()
    leftovers = marked_processes(marker)
    for pid in leftovers:
        os.kill(pid, signal.SIGKILL)
    assert not leftovers, f"provider processes left behind: {leftovers}"
