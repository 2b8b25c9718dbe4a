"""No orphans: a provider and every process it starts die with their host.

On Linux every provider runs under this shim, a file run by path that imports only
the standard library (so it starts fast whatever the provider's environment says)::

    python -I -S .../hostd/_reaper.py HOST_PID [--status-fd=FD] COMMAND...

The shim

- makes itself a child subreaper (``PR_SET_CHILD_SUBREAPER``): a descendant whose
  parent exits is reparented to the shim, so the whole tree stays below it, even a
  process that called ``setsid()`` (that leaves the process group, not the tree);
- asks for SIGTERM when its parent dies (``PR_SET_PDEATHSIG``, which is neither
  inherited nor kept across fork, so the shim is what carries it), then checks that
  its parent is still ``HOST_PID`` (the host may have died before the request);
- starts the provider on the standard streams it was given, with
  ``PR_SET_PDEATHSIG=SIGKILL`` against the shim, and lets go of its own stdin and
  stdout (the provider's end of output is the host's to see); an exec that fails
  (command not found, not executable, a bad interpreter) is written on ``FD`` as
  ``errno NUL strerror NUL filename`` before the shim exits (and only there: the
  host's error says it); after an exec that worked the shim writes ``P`` and the
  provider's pid on ``FD`` and closes it (the host logs that pid: the process an
  operator sees in ``ps`` running the provider's command, and kills);
- reaps: once the provider exits, or the host dies, it kills every descendant
  (``kill_tree``), reaps them, and exits as the provider did (by the same signal,
  when a signal ended it).

The host's teardown walks the same tree (``descendants``) and kills it before the
shim, so no descendant survives a shim that is itself killed. The death signal is
tied to the host *thread* that started the shim: a shim started from a thread that
ends before the host process does is not told of the host's later death (the
daemon starts providers from its main thread). Where this cannot work (not Linux,
no ``/proc``, no ``prctl``) providers run directly in their own process group, and
teardown reaches that group only (``supported``).
"""

from __future__ import annotations

import ctypes
import os
import resource
import signal
import subprocess
import sys
from collections.abc import Sequence
from functools import cache

__all__ = [
    "REAPER",
    "descendants",
    "group_members",
    "kill_tree",
    "read_exec_status",
    "read_status",
    "supported",
]

#: This file: the host runs it by path (``python -I -S REAPER HOST_PID COMMAND...``).
REAPER = os.path.abspath(__file__)

_PR_SET_PDEATHSIG = 1
_PR_SET_CHILD_SUBREAPER = 36


def _prctl(option: int, value: int) -> bool:
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        return int(libc.prctl(option, value, 0, 0, 0)) == 0
    except (OSError, AttributeError):  # no libc prctl here
        return False


@cache
def supported() -> bool:
    """Whether providers run under the shim here (Linux with ``/proc`` and ``prctl``)."""
    if not sys.platform.startswith("linux") or not os.path.isdir("/proc/self/task"):
        return False
    try:
        return hasattr(ctypes.CDLL(None), "prctl")
    except OSError:
        return False


def _live_processes() -> dict[int, tuple[int, int]]:
    """pid → (parent pid, process group) of every live (not zombie) process, read from
    ``/proc``; empty where there is no ``/proc``."""
    found: dict[int, tuple[int, int]] = {}
    try:
        names = os.listdir("/proc")
    except OSError:
        return found
    for name in names:
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat", "rb") as fh:
                stat = fh.read()
        except OSError:  # gone meanwhile
            continue
        fields = stat.rsplit(b")", 1)[1].split()  # the command name may hold anything
        if fields[0] not in (b"Z", b"X"):
            found[int(name)] = (int(fields[1]), int(fields[2]))
    return found


def group_members(pgid: int) -> list[int]:
    """Every live process of process group ``pgid`` (none known without ``/proc``)."""
    return [pid for pid, (_, group) in _live_processes().items() if group == pgid]


def descendants(root: int) -> list[int]:
    """Every live descendant of ``root`` (children first), by parent links: a process
    that left its session or process group is still found. None without ``/proc``."""
    children: dict[int, list[int]] = {}
    for pid, (ppid, _) in _live_processes().items():
        children.setdefault(ppid, []).append(pid)
    found: list[int] = []
    todo = [root]
    while todo:
        for child in children.get(todo.pop(), ()):
            found.append(child)
            todo.append(child)
    return found


def kill_tree(root: int) -> list[int]:
    """SIGKILL every live descendant of ``root`` (not ``root``); the pids signalled. One
    round: a process forked meanwhile is found by the next call."""
    killed = []
    for pid in descendants(root):
        try:
            os.kill(pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            continue
        killed.append(pid)
    return killed


def read_exec_status(fd: int) -> OSError | None:
    """The exec error the shim wrote on its status pipe (read end ``fd``, non-blocking;
    closed here), or ``None``: the shim writes it before it exits, so before the
    provider's output ends, and writes the provider's pid instead after an exec that
    worked."""
    status = read_status(fd)
    return status if isinstance(status, OSError) else None


def read_status(fd: int) -> int | OSError | None:
    """What the shim wrote on its status pipe (read end ``fd``; closed here): the
    provider's pid after an exec that worked, the exec's error after one that failed;
    ``None`` when nothing is there (a shim that is still before its exec, when ``fd`` is
    non-blocking, or one that ended before it: its host was gone)."""
    try:
        data = os.read(fd, 4096)
    except OSError:  # BlockingIOError: the shim has not written yet
        data = b""
    finally:
        os.close(fd)
    text = data.decode("utf-8", "replace")
    if text.startswith("P") and text[1:].isdigit():
        return int(text[1:])
    code, _, rest = text.partition("\0")
    strerror, _, filename = rest.partition("\0")
    return OSError(int(code), strerror, filename or None) if code.isdigit() else None


# -- the shim -----------------------------------------------------------------------------


def _reap_all() -> None:
    """Kill and reap every descendant: as a subreaper the shim inherits each orphan, so
    no children left means no descendants left."""
    me = os.getpid()
    while True:
        kill_tree(me)
        try:
            os.wait()
        except ChildProcessError:
            return


def _exit_as(status: int) -> int:
    """Exit as the provider did: its exit code, or killed by the signal that killed it."""
    if os.WIFSIGNALED(status):
        sig = os.WTERMSIG(status)
        resource.setrlimit(resource.RLIMIT_CORE, (0, 0))  # the shim's core is nobody's
        if sig not in (signal.SIGKILL, signal.SIGSTOP):  # those two have no handler to reset
            signal.signal(sig, signal.SIG_DFL)
        os.kill(os.getpid(), sig)
    return os.waitstatus_to_exitcode(status)


#: Passed on to the provider, so the shim is transparent to whoever signals it. Not
#: SIGTERM: the teardown sends that to the whole process group, the provider included.
_FORWARDED = (
    signal.SIGHUP,
    signal.SIGINT,
    signal.SIGQUIT,
    signal.SIGUSR1,
    signal.SIGUSR2,
    signal.SIGWINCH,
)


def main(argv: Sequence[str]) -> int:
    host = int(argv[0])
    command = list(argv[1:])
    status: int | None = None
    if command and command[0].startswith("--status-fd="):
        status = int(command.pop(0).partition("=")[2])
    provider: subprocess.Popen[bytes] | None = None

    def on_term(signum: int, frame: object) -> None:
        # The teardown's SIGTERM to the process group reached the provider too: wait for
        # it. Without a host, though, nothing of the tree may stay.
        if os.getppid() != host:
            _reap_all()
            os._exit(1)

    def forward(signum: int, frame: object) -> None:
        if provider is not None and provider.returncode is None:
            os.kill(provider.pid, signum)

    signal.signal(signal.SIGTERM, on_term)
    for sig in _FORWARDED:
        signal.signal(sig, forward)
    _prctl(_PR_SET_CHILD_SUBREAPER, 1)
    _prctl(_PR_SET_PDEATHSIG, signal.SIGTERM)
    if os.getppid() != host:  # the host died before the death signal was asked for
        return 1
    try:
        provider = subprocess.Popen(
            command, preexec_fn=lambda: _prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)
        )
    except OSError as exc:
        if status is None:  # no host reads a report: stderr is the only place to say it
            sys.stderr.write(f"cannot start provider: {exc}\n")
        else:  # the host says it, once, with what to fix: not again on stderr
            name = "" if exc.filename is None else os.fsdecode(exc.filename)
            report = f"{exc.errno}\0{exc.strerror or ''}\0{name}"
            os.write(status, report.encode("utf-8", "surrogateescape"))
        return 127
    if status is not None:  # the provider's own pid: the host logs it (one atomic write)
        os.write(status, f"P{provider.pid}".encode())
        os.close(status)
    null = os.open(os.devnull, os.O_RDWR)
    os.dup2(null, 0)
    os.dup2(null, 1)
    os.close(null)
    while True:
        try:
            pid, status = os.wait()
        except ChildProcessError:  # cannot happen while the provider runs
            return 1
        if pid == provider.pid:
            provider.returncode = os.waitstatus_to_exitcode(status)
            break
    _reap_all()
    return _exit_as(status)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
