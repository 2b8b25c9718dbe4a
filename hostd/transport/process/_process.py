"""Provider child processes: start, stderr capture, exit watch, teardown ladder.

Owns the OS side of a provider: ``anyio.open_process`` in a new session (its
own process group, so teardown reaches grandchildren too), under the ``_reaper``
shim where that works (``_shim``: so no descendant outlives the provider or the host), its
stdin and stdout pipes (stdout lines handed over from the read callback by
``_stdout``; the process's exit is watched apart from them), a scrubbed environment (an
allow-list plus what the config names), stderr drained into the structured log
tagged with the provider id (``_stderr``: rate-limited, so a flood neither
blocks the child nor floods the log; each line scrubbed of the provider's secrets by
its ``Redactor``), what a failed provider says about itself (``failure_report``:
its exit status and the tail of its stderr; ``stderr_tail``: its last lines), and the
teardown ladder (``stop_process``): the binding's shutdown message → grace → SIGTERM
to the group → grace → SIGKILL to every descendant and the group. Teardown is shielded from
cancellation, so a host cancelled mid-query still leaves no orphan.
"""

from __future__ import annotations

import asyncio
import os
import select
import signal
import subprocess
from collections.abc import Awaitable, Callable, Mapping, Sequence
from pathlib import Path

import anyio
from anyio.abc import Process, TaskGroup

from hostd._hints import stderr_said
from hostd._log import get_logger
from hostd._teardown import stop_process
from hostd.errors import HostdError, ProviderCrashed, ShuttingDown
from hostd.protocol import DEFAULT_MAX_LINE_BYTES

from .._redact import Redactor
from ._shim import Start
from ._stderr import StderrPolicy, StderrPump
from ._stdout import LineSink, StdoutFeed

__all__ = [
    "ENV_ALLOW_LIST",
    "ChildProcess",
    "StderrPolicy",
    "scrubbed_env",
]


#: The largest write a pipe takes whole or not at all (POSIX: atomic up to PIPE_BUF).
ATOMIC_PIPE_WRITE = select.PIPE_BUF

log = get_logger("hostd.transport")

#: How long a failure report waits, once the process is gone, for the end of its stderr.
STDERR_DRAIN_S = 1.0

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
    # Where the bundled providers persist their indexes and databases: a daemon run
    # with other dirs (a fresh cache, a test's state) has its providers follow.
    "XDG_CACHE_HOME",
    "XDG_STATE_HOME",
    # Where a toolchain lives when not at its default: a provider run through its
    # toolchain (`cargo run`, `go run`, a JVM, node's extra module dirs) finds it.
    "CARGO_HOME",
    "RUSTUP_HOME",
    "GOPATH",
    "GOROOT",
    "GOMODCACHE",
    "GOCACHE",
    "JAVA_HOME",
    "NODE_PATH",
    # How many threads a provider's numeric libraries start (torch, numpy's BLAS): a
    # daemon confined to fewer cores than the machine has (a container, a shared host)
    # has its model-running providers follow, instead of each starting one per core.
    "OMP_NUM_THREADS",
    "MKL_NUM_THREADS",
    "OPENBLAS_NUM_THREADS",
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


class ChildProcess:
    """One running provider process. Create with ``await ChildProcess.spawn(...)``.

    The host writes the child's stdin through a pipe of its own, non-blocking on
    this side: ``send_nowait`` puts a short line in the pipe at once, without
    an event-loop turn, or says it cannot; ``send`` waits for room. A line is
    always written whole and never interleaved with another. Its stdout is a pipe
    of the host's too, read by ``start_reading`` in the event loop's own read
    callback, a line at a time, to a ``LineSink`` (``process.stdout`` is ``None``).
    """

    def __init__(
        self,
        provider_id: str,
        process: Process,
        policy: StderrPolicy,
        stdin_fd: int,
        stdout_fd: int,
        start: Start | None = None,
        redactor: Redactor | None = None,
        provider_pid: int | None = None,
    ) -> None:
        self.provider_id = provider_id
        self.process = process
        #: The provider's own process: ``process`` itself, or the one the ``_reaper``
        #: shim (``process``) runs, as it reported it (``None``: its exec failed, or it
        #: did not report it in time). What the log's ``pid`` names: what ``ps`` shows
        #: running the provider's command, and what an operator kills.
        self.provider_pid = provider_pid if start is not None and start.shimmed else process.pid
        self.policy = policy
        #: Our (non-blocking) end of the child's stdin pipe; -1 once closed.
        self._stdin_fd = stdin_fd
        #: Our end of the child's stdout pipe, until ``start_reading`` hands it to the loop.
        self._stdout_fd = stdout_fd
        #: What reads stdout (and to which sink), once ``start_reading`` ran.
        self._stdout: StdoutFeed | None = None
        #: Set when reading stdout has ended: end of file, a fault, or the teardown.
        self.output_ended = anyio.Event()
        self._write_lock = anyio.Lock(fast_acquire=True)
        #: Sends holding or awaiting ``_write_lock``: non-zero exactly while it is held
        #: (a released lock passes straight to its next waiter), read without a call.
        self._writers = 0
        #: A cancelled ``send`` left part of a line in the pipe: the stream is unusable.
        self._cut_line = False
        self.redactor = redactor if redactor is not None else Redactor()
        self._stderr = StderrPump(provider_id, policy, redactor=self.redactor)
        #: Its stderr is being read (``drain_stderr``): started once.
        self._draining = False
        self.exited = anyio.Event()
        #: The exit code, once the exit watcher (or the teardown) saw the process end;
        #: ``None`` while it runs.
        self.returncode: int | None = None
        #: Told once the process is seen to end (its connection's ``alive`` falls then).
        self.on_exit: Callable[[], None] | None = None
        self._closing = False
        #: Torn down as a start the host gave up (``aclose``): SIGTERM is no surprise.
        self._abandoned = False
        #: The process ended before the host began to stop it: its status is its own.
        self.exited_on_its_own = False
        #: The command and the shim's exec status, for the error of a start that failed.
        self._start = start

    def __repr__(self) -> str:
        return (
            f"<ChildProcess {self.provider_id} pid={self.pid} "
            f"returncode={self.process.returncode} stderr_lines={self.stderr_lines}>"
        )

    @property
    def stderr_lines(self) -> int:
        """Lines read from the child's stderr so far (logged or not)."""
        return self._stderr.lines

    @property
    def stderr_suppressed(self) -> int:
        """Of those, the lines the rate limit kept out of the log."""
        return self._stderr.suppressed

    @property
    def pid(self) -> int:
        """The process hostd spawned and tears down: the ``_reaper`` shim's where it is
        used (``provider_pid`` is the provider's own)."""
        return self.process.pid

    def log_pids(self) -> dict[str, int | None]:
        """The log's pids: ``pid`` the provider's own, ``reaper_pid`` the shim's above it
        (only where one runs)."""
        if self._start is not None and self._start.shimmed:
            return {"pid": self.provider_pid, "reaper_pid": self.process.pid}
        return {"pid": self.process.pid}

    @classmethod
    async def spawn(
        cls,
        provider_id: str,
        command: Sequence[str],
        *,
        env: Mapping[str, str] | None = None,
        cwd: str | Path | None = None,
        policy: StderrPolicy | None = None,
        redactor: Redactor | None = None,
    ) -> ChildProcess:
        """Spawn ``command`` in its own process group; then run ``start_pumps``.

        Raises ``ProviderCrashed`` when the command cannot be started: one line
        naming the provider and the command, and saying what to fix.
        """
        child_env = scrubbed_env(env)
        start = Start(provider_id, command, cwd, child_env)
        # stdin is a pipe of our own (both ends non-inheritable, PEP 446, so no later
        # child holds it open): the write end is made non-blocking for send_nowait.
        # So is stdout: its read end is read in the event loop's own callback once
        # ``start_reading`` is called (until then the child's output waits in the pipe).
        read_end, write_end = os.pipe()
        out_read, out_write = os.pipe()
        try:
            process = await anyio.open_process(
                start.argv,
                stdin=read_end,
                stdout=out_write,
                stderr=subprocess.PIPE,
                env=child_env,
                cwd=cwd,
                start_new_session=True,
                pass_fds=start.pass_fds,
            )
        except BaseException as exc:
            for fd in (write_end, out_read):
                os.close(fd)
            start.close()
            if isinstance(exc, OSError):  # the cwd, or (without the shim) the command
                raise start.cannot_start(exc) from exc
            raise
        finally:
            for fd in (read_end, out_write):
                os.close(fd)
            start.spawned()
        os.set_blocking(write_end, False)
        child = cls(
            provider_id,
            process,
            policy or StderrPolicy(),
            write_end,
            out_read,
            start,
            redactor,
            provider_pid=await start.provider_pid(),
        )
        log.info("provider.process.started", provider=provider_id, **child.log_pids())
        return child

    def start_pumps(self, task_group: TaskGroup) -> None:
        """Drain stderr into the log (unless ``drain_stderr`` began it) and watch for
        exit, in ``task_group``."""
        self.drain_stderr(task_group)
        task_group.start_soon(self._watch_exit)

    def drain_stderr(self, task_group: TaskGroup) -> None:
        """Drain stderr into the log from now on, in ``task_group`` (once: nothing when it
        is drained already). A child that writes more than an unread pipe takes (its 64
        KiB on Linux, and the 128 KiB the event loop buffers) would block there: a
        connection drains it as soon as the process exists, before its binding's module
        is imported. The pump ends at the end of the stream, or when the teardown
        closes it (``aclose``)."""
        if self._draining:
            return
        self._draining = True
        assert self.process.stderr is not None
        task_group.start_soon(self._stderr.run, self.process.stderr)

    async def _watch_exit(self) -> None:
        await self.process.wait()
        self._ended()
        self.exited_on_its_own = not self._closing
        self.exited.set()
        if self._stdout is not None:
            self._stdout.drain_after_exit(self.returncode)

    async def start_reading(
        self, sink: LineSink, max_line_bytes: int = DEFAULT_MAX_LINE_BYTES
    ) -> None:
        """Read the child's stdout in the event loop's read callback: each line goes to
        ``sink.on_line`` the moment it is complete (no reader task, no loop turn in
        between); reading stops when that returns ``False``. The end comes to
        ``sink.on_end`` once, as ``ProviderCrashed`` (end of output, or mid-line),
        ``ShuttingDown`` (the teardown closed it) or ``LineTooLong`` (a line past
        ``max_line_bytes``, a fault of the provider); memory stays within the bound
        (``_stdout``). Needs the asyncio event loop. Called once."""
        if self._stdout is not None or self._stdout_fd < 0:
            raise RuntimeError("stdout is already being read (or closed)")
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            raise RuntimeError("reading a provider's output needs the asyncio event loop") from None
        feed = StdoutFeed(
            self.provider_id,
            sink,
            max_line_bytes,
            why_closed=self._why_closed,
            on_stop=self.output_ended.set,
        )
        fd, self._stdout_fd = self._stdout_fd, -1
        await feed.connect(loop, fd)
        self._stdout = feed
        if self.exited.is_set():  # it exited before its output was read
            feed.drain_after_exit(self.returncode)

    def exit_status(self) -> str | None:
        """How the process ended, when it ended on its own: ``exited with status 1``,
        ``killed by SIGSEGV``; ``None`` while it runs or when the host stopped it."""
        code = self.process.returncode
        if code is None or not self.exited_on_its_own:
            return None
        if code < 0:
            try:
                return f"killed by {signal.Signals(-code).name}"
            except ValueError:
                return f"killed by signal {-code}"
        return f"exited with status {code}"

    async def failure_report(self, deadline: float, *, started: bool) -> str:
        """Why the process failed, in its own words: its exit status (when it ended on
        its own) and what its stderr says (its error line and last lines: bounded,
        scrubbed, one line), waiting for its exit and the end of its stderr no later
        than ``deadline`` (anyio time). Worded by whether it had ``started`` (answered
        its handshake, ``stderr_said``): after a good start its last lines may be its
        ready line, not the cause. ``""`` when it said nothing."""
        with anyio.move_on_at(deadline):
            await self.exited.wait()
        # Gone, so what it wrote is in the pipe; an end of file may never come should a
        # descendant it left hold its stderr, so the drain gets a short bound of its own.
        with anyio.move_on_at(min(deadline, anyio.current_time() + STDERR_DRAIN_S)):
            await self._stderr.ended.wait()
        parts = [self.exit_status() or "", stderr_said(self._stderr.tail(), started=started)]
        return "; ".join(p for p in parts if p)

    def stderr_reason(self) -> str:
        """What its stderr says of a failure as ``failure_report`` quotes it (its error
        line and last lines: bounded, scrubbed, one line), alone; ``""`` when it wrote
        nothing. Read after ``failure_report`` or the teardown, the end of it."""
        return self._stderr.tail()

    def stderr_tail(self) -> str:
        """The last lines of its stderr read so far, as they came (bounded, one line,
        scrubbed: ``StderrPump.last_lines``); ``""`` when it wrote nothing. Read after
        ``failure_report``, they are the last it wrote."""
        return self._stderr.last_lines()

    def _why_closed(self, how: str) -> HostdError | None:
        """Why the output ended, when not a crash: the host stopping it, a failed exec."""
        if self._closing:  # the host is stopping it: an end it asked for
            return ShuttingDown(f"provider closed {how} as the host stopped it")
        return self._exec_failure()

    def _exec_failure(self) -> ProviderCrashed | None:
        """Why the shim could not start the provider, when that is why its input or output
        ended (``_shim``: whichever end notices first, both say the same)."""
        return self._start.failure() if self._start is not None else None

    def _input_closed(self) -> ProviderCrashed:
        # The shim writes an exec failure before it exits, so by the time its end of
        # stdin is gone (EPIPE here) the reason is there to read.
        return self._exec_failure() or ProviderCrashed("provider closed its input")

    def _close_stdout(self) -> None:
        if self._start is not None:
            self._start.close()
        if self._stdout is not None:
            self._stdout.close()
        elif self._stdout_fd >= 0:
            os.close(self._stdout_fd)
        self._stdout_fd = -1
        self.output_ended.set()

    def _check_writable(self) -> int:
        if self._stdin_fd < 0:
            raise ProviderCrashed("provider input is closed")
        if self._cut_line:
            raise ProviderCrashed("provider input holds a line cut short by cancellation")
        return self._stdin_fd

    def send_nowait(self, data: bytes) -> bool:
        """Write ``data`` whole, now, with no event-loop turn; ``False`` when that is not
        possible (longer than the pipe's atomic bound, a ``send`` under way, a full
        pipe): nothing was written, use ``send``. Raises ``ProviderCrashed`` when the
        provider closed its input."""
        fd = self._check_writable()
        if len(data) > ATOMIC_PIPE_WRITE or self._writers:
            return False
        try:
            os.write(fd, data)  # atomic: all of it, or EAGAIN and none
        except BlockingIOError:
            return False
        except OSError as exc:  # EPIPE: the provider is gone
            raise self._input_closed() from exc
        return True

    async def send(self, data: bytes) -> None:
        """Write ``data`` whole to the child's stdin, waiting for room in the pipe as long
        as it takes (the caller's timeout bounds it). A closed pipe means the provider
        is gone (``ProviderCrashed``). Cancelled after part of a line went out, the
        stream is unusable and every later send raises ``ProviderCrashed``."""
        self._writers += 1
        try:
            await self._send_locked(data)
        finally:
            self._writers -= 1

    async def _send_locked(self, data: bytes) -> None:
        async with self._write_lock:
            view = memoryview(data)
            while view:
                fd = self._check_writable()
                try:
                    written = os.write(fd, view)
                except BlockingIOError:
                    written = 0
                except OSError as exc:
                    raise self._input_closed() from exc
                view = view[written:]
                if view:
                    try:
                        await anyio.wait_writable(fd)
                    except anyio.ClosedResourceError:  # closed by teardown while waiting
                        raise ProviderCrashed("provider input is closed") from None
                    except BaseException:  # cancelled: a started line cannot be taken back
                        if len(view) < len(data):
                            self._cut_line = True
                        raise

    def _close_stdin(self) -> None:
        fd, self._stdin_fd = self._stdin_fd, -1
        if fd >= 0:
            anyio.notify_closing(fd)  # wakes a send waiting for room, before the close
            os.close(fd)

    def _log_signal(self, sig: signal.Signals) -> None:
        event = "provider.process." + sig.name.lower()
        if self._abandoned and sig is signal.SIGTERM:  # the ladder's first step here
            log.info(event, provider=self.provider_id, **self.log_pids(), why="start_abandoned")
        else:
            log.warning(event, provider=self.provider_id, **self.log_pids())

    async def aclose(
        self,
        *,
        shutdown: Callable[[], Awaitable[None]] | None = None,
        grace: float = 2.0,
        abandoned: bool = False,
    ) -> int | None:
        """The teardown ladder; shielded, idempotent. Returns the exit code.
        ``abandoned``: a start the host gave up before the handshake (it is closing):
        nothing was asked of the process, so nothing is left for it to finish, and one
        still starting may not read its input yet; no shutdown message, no grace for
        the end of its input: SIGTERM at once, then the grace before SIGKILL."""
        with anyio.CancelScope(shield=True):
            if not self._closing:
                self._closing = True
                self._abandoned = abandoned
                await self._ladder(None if abandoned else shutdown, grace, abandoned)
            await self.process.wait()
        self._ended()
        return self.returncode

    def _ended(self) -> None:
        self.returncode = self.process.returncode
        if self.on_exit is not None:
            self.on_exit()

    async def _ladder(
        self, shutdown: Callable[[], Awaitable[None]] | None, grace: float, abandoned: bool
    ) -> None:
        if self.process.returncode is None and shutdown is not None:
            try:
                with anyio.fail_after(grace):
                    await shutdown()
            except Exception:  # a dead or stuck pipe: go on down the ladder
                pass
        self._close_stdin()  # R2: EOF also tells a provider to exit
        # group: also after a clean exit, the group may hold grandchildren it left.
        await stop_process(
            self.process,
            0.0 if abandoned else grace,
            term_grace=grace,
            group=True,
            on_signal=self._log_signal,
        )
        self._close_stdout()
        # What it wrote last is its reason (``failure_report``): read to the end before
        # the pipe is closed, bounded should a descendant it left still hold it open;
        # not waited for once its reader stopped (cancelled with the host): no end comes.
        with anyio.move_on_after(grace):
            await self._stderr.stopped.wait()
        if self.process.stderr is not None:
            try:
                await self.process.stderr.aclose()
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
            **self.log_pids(),
            returncode=self.process.returncode,
        )
