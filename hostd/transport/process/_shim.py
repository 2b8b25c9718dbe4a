"""A provider's start: its command under the ``_reaper`` shim, and why a start failed.

Owns the command line a provider is spawned with (under the shim where that works,
so no descendant outlives the provider or the host; as it is elsewhere) and the
shim's exec status pipe: under the shim the exec happens in the shim, which reports
on that pipe the provider's own pid (``provider_pid``: read as the start is logged,
so the log names the process an operator sees and kills, not the shim) or a failed
exec (command not found, not executable, a bad interpreter) before it exits. The
report is read once, at the start or when an end of the provider's input or output
puts the start in doubt, and kept: whichever end notices first, both say the
same one line naming the provider and the command, and saying what to fix
(``_start_reason``). Spawning, pipes and teardown are ``_process``'s.
"""

from __future__ import annotations

import os
import shlex
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path

import anyio

from hostd._reaper import REAPER, read_exec_status, read_status
from hostd._reaper import supported as reaper_supported
from hostd.errors import ProviderCrashed

from ._start_reason import shown_command, start_reason

__all__ = ["Start", "under_reaper"]

#: A hang guard on the shim's report of its child's pid, which it writes as soon as the
#: provider's exec is done (past it, the pid is not known and logged as null).
PID_REPORT_S = 10.0


def under_reaper(command: Sequence[str], status_fd: int | None = None) -> list[str]:
    """``command`` run under the ``_reaper`` shim where it works (no orphans, even when
    the host is killed), else as it is. ``status_fd``: where the shim reports an exec
    that failed."""
    if not reaper_supported():
        return list(command)
    status = [f"--status-fd={status_fd}"] if status_fd is not None else []
    return [sys.executable, "-I", "-S", REAPER, str(os.getpid()), *status, *command]


class Start:
    """One provider's start: ``argv`` to spawn (passing ``pass_fds`` to the child), then
    ``spawned()``; ``failure()`` is why the exec failed, if it did; ``close()`` drops
    the status pipe (the teardown). ``env``: the provider's environment, whose PATH
    the exec searched (the reason of a failure shows that, and no other value)."""

    __slots__ = (
        "_error",
        "_read",
        "_write",
        "argv",
        "command",
        "cwd",
        "env",
        "pass_fds",
        "provider_id",
        "shimmed",
    )

    def __init__(
        self,
        provider_id: str,
        command: Sequence[str],
        cwd: str | Path | None = None,
        env: Mapping[str, str] | None = None,
    ) -> None:
        self.provider_id = provider_id
        self.command = list(command)
        self.cwd = cwd
        self.env = env
        shim = reaper_supported()
        #: Whether the command runs under the shim (whose pid is not the provider's).
        self.shimmed = shim
        # Both ends non-inheritable (PEP 446): only the shim gets the write end, by pass_fds.
        self._read, self._write = os.pipe() if shim else (-1, -1)
        self.argv = under_reaper(self.command, self._write if shim else None)
        self.pass_fds: tuple[int, ...] = (self._write,) if shim else ()
        self._error: ProviderCrashed | None = None

    def __repr__(self) -> str:
        return f"<Start {self.provider_id} {shlex.join(self.command)!r} status_fd={self._read}>"

    def spawned(self) -> None:
        """The child holds the write end now (or never will): drop ours, so the pipe ends
        when the shim does."""
        if self._write >= 0:
            os.close(self._write)
            self._write = -1
        if self._read >= 0:
            os.set_blocking(self._read, False)

    def cannot_start(self, exc: OSError) -> ProviderCrashed:
        """One line: the provider, the command, what kept it from running and what to do
        (``start_reason``)."""
        why = start_reason(self.command, exc, cwd=self.cwd, env=self.env)
        return ProviderCrashed(
            f"provider {self.provider_id!r} cannot start {shown_command(self.command)}: {why}",
            stage="start",
        )

    async def provider_pid(self) -> int | None:
        """The provider's own pid, once the shim reports it (it writes it as soon as the
        provider's exec is done; waited for, shielded: the shim is running and its
        report comes at once, ``PID_REPORT_S`` a hang guard). ``None`` after a failed
        exec (``failure()`` says why), without the shim (the process is the provider),
        or past the guard."""
        if self._read < 0:
            return None
        with anyio.CancelScope(shield=True), anyio.move_on_after(PID_REPORT_S) as waited:
            await anyio.wait_readable(self._read)
        if waited.cancelled_caught:  # kept for failure(): the report may come later
            return None
        fd, self._read = self._read, -1
        status = read_status(fd)  # closes fd
        if isinstance(status, OSError):
            self._error = self.cannot_start(status)
            return None
        return status

    def failure(self) -> ProviderCrashed | None:
        """Why the shim could not start the provider, if that is what happened (read once,
        kept)."""
        if self._read >= 0:
            fd, self._read = self._read, -1
            exc = read_exec_status(fd)  # closes fd
            if exc is not None:
                self._error = self.cannot_start(exc)
        return self._error

    def close(self) -> None:
        """Drop both ends of the status pipe still held (idempotent)."""
        for fd in (self._read, self._write):
            if fd >= 0:
                os.close(fd)
        self._read = self._write = -1
