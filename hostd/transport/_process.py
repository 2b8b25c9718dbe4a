"""Provider child processes: start, stderr capture, teardown ladder.

Owns the OS side of a provider: ``anyio.open_process`` in a new session (its
own process group, so teardown reaches grandchildren too), a scrubbed
environment (an allow-list plus what the config names), stderr lines drained
into the structured log tagged with the provider id (bounded, so a stderr
flood neither blocks the child nor floods the log), and the teardown ladder:
the binding's shutdown message → grace → SIGTERM to the group → grace →
SIGKILL to the group. Teardown is shielded from cancellation, so a host
cancelled mid-query still leaves no orphan.
"""

from __future__ import annotations

import os
import signal
import subprocess
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import anyio
import structlog
from anyio.abc import Process, TaskGroup

from hostd.errors import ProviderCrashed

from ._framing import LineReader

__all__ = [
    "ENV_ALLOW_LIST",
    "ChildProcess",
    "StderrPolicy",
    "scrubbed_env",
]

log = structlog.get_logger("hostd.transport")

#: Variables a provider inherits from the host; everything else must be named in its config.
ENV_ALLOW_LIST: tuple[str, ...] = (
    "PATH",
    "HOME",
    "LANG",
    "LC_ALL",
    "LC_CTYPE",
    "TZ",
    "TMPDIR",
    "PYTHONPATH",
    "VIRTUAL_ENV",
    "SYSTEMROOT",
)


def scrubbed_env(
    extra: Mapping[str, str] | None = None,
    *,
    source: Mapping[str, str] | None = None,
    allow: Sequence[str] = ENV_ALLOW_LIST,
) -> dict[str, str]:
    """The allow-listed part of ``source`` (default ``os.environ``) plus ``extra``."""
    src = os.environ if source is None else source
    env = {k: src[k] for k in allow if k in src}
    env.update(extra or {})
    return env


@dataclass(slots=True, frozen=True)
class StderrPolicy:
    """How much of a child's stderr reaches the log: the first ``burst`` lines, then one
    summary every ``every`` lines (the rest is drained and counted, never buffered)."""

    burst: int = 200
    every: int = 1000
    max_line_bytes: int = 64 * 1024


class ChildProcess:
    """One running provider process. Create with ``await ChildProcess.start(...)``."""

    def __init__(self, provider_id: str, process: Process, policy: StderrPolicy) -> None:
        self.provider_id = provider_id
        self.process = process
        self.policy = policy
        self.stderr_lines = 0
        self.stderr_suppressed = 0
        self.exited = anyio.Event()
        self._closing = False

    def __repr__(self) -> str:
        return (
            f"<ChildProcess {self.provider_id} pid={self.pid} "
            f"returncode={self.process.returncode} stderr_lines={self.stderr_lines}>"
        )

    @property
    def pid(self) -> int:
        return self.process.pid

    @property
    def returncode(self) -> int | None:
        return self.process.returncode

    @classmethod
    async def spawn(
        cls,
        provider_id: str,
        command: Sequence[str],
        *,
        env: Mapping[str, str] | None = None,
        cwd: str | Path | None = None,
        policy: StderrPolicy | None = None,
    ) -> ChildProcess:
        """Spawn ``command`` in its own process group; then run ``start_pumps``.

        Raises ``OSError`` when the command cannot be started.
        """
        process = await anyio.open_process(
            list(command),
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=scrubbed_env(env),
            cwd=cwd,
            start_new_session=True,
        )
        log.info("provider.process.started", provider=provider_id, pid=process.pid)
        return cls(provider_id, process, policy or StderrPolicy())

    def start_pumps(self, task_group: TaskGroup) -> None:
        """Drain stderr into the log and watch for exit, in ``task_group``."""
        task_group.start_soon(self._pump_stderr)
        task_group.start_soon(self._watch_exit)

    async def _watch_exit(self) -> None:
        await self.process.wait()
        self.exited.set()

    async def _wait(self, within: float | None) -> bool:
        """Whether the process exited within ``within`` seconds (``None``: wait for it)."""
        if self.process.returncode is not None:
            return True
        with anyio.move_on_after(within):
            await self.process.wait()
        return self.process.returncode is not None

    async def _pump_stderr(self) -> None:
        assert self.process.stderr is not None
        reader = LineReader(self.process.stderr, self.policy.max_line_bytes, keep_unterminated=True)
        while True:
            try:
                raw = await reader.receive_line()
            except anyio.EndOfStream:
                break
            except Exception:  # LineTooLong: counted, the pump moves on
                raw = b"<over-long stderr line>"
            self.stderr_lines += 1
            n = self.stderr_lines
            if n <= self.policy.burst:
                log.info(
                    "provider.stderr",
                    provider=self.provider_id,
                    line=raw.decode("utf-8", errors="replace")[:2000],
                )
            else:
                self.stderr_suppressed += 1
                if (n - self.policy.burst) % self.policy.every == 0:
                    log.warning(
                        "provider.stderr.suppressed",
                        provider=self.provider_id,
                        suppressed=self.stderr_suppressed,
                    )

    async def send(self, data: bytes) -> None:
        """Write to the child's stdin; a closed pipe means the provider is gone."""
        assert self.process.stdin is not None
        try:
            await self.process.stdin.send(data)
        except (anyio.BrokenResourceError, anyio.ClosedResourceError, OSError) as exc:
            raise ProviderCrashed("provider closed its input") from exc

    def _signal_group(self, sig: signal.Signals) -> bool:
        try:
            os.killpg(self.process.pid, sig)
        except (ProcessLookupError, PermissionError):
            return False
        return True

    async def aclose(
        self,
        *,
        shutdown: Callable[[], Awaitable[None]] | None = None,
        grace: float = 2.0,
    ) -> int | None:
        """The teardown ladder; shielded, idempotent. Returns the exit code."""
        with anyio.CancelScope(shield=True):
            if not self._closing:
                self._closing = True
                await self._ladder(shutdown, grace)
            await self._wait(None)
        return self.process.returncode

    async def _ladder(self, shutdown: Callable[[], Awaitable[None]] | None, grace: float) -> None:
        if self.process.returncode is None and shutdown is not None:
            try:
                with anyio.fail_after(grace):
                    await shutdown()
            except Exception:  # a dead or stuck pipe: go on down the ladder
                pass
        stdin = self.process.stdin
        if stdin is not None:
            try:
                await stdin.aclose()  # R2: EOF also tells a provider to exit
            except Exception:
                pass
        if not await self._wait(grace):
            log.warning("provider.process.sigterm", provider=self.provider_id, pid=self.pid)
            self._signal_group(signal.SIGTERM)
            if not await self._wait(grace):
                log.warning("provider.process.sigkill", provider=self.provider_id, pid=self.pid)
        # Also after a clean exit: the group may hold grandchildren the provider left.
        self._signal_group(signal.SIGKILL)
        await self._wait(None)
        for stream in (self.process.stdout, self.process.stderr):
            if stream is not None:
                try:
                    await stream.aclose()
                except Exception:
                    pass
        # anyio's stream aclose() does not close asyncio's pipe transports; a pipe whose
        # EOF the loop has not processed yet would otherwise leak (ResourceWarning).
        transport = getattr(getattr(self.process, "_process", None), "_transport", None)
        if transport is not None:
            transport.close()
        log.info(
            "provider.process.exited",
            provider=self.provider_id,
            pid=self.pid,
            returncode=self.process.returncode,
        )
