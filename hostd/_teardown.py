"""The teardown ladder's signal steps, shared by every child hostd starts.

Owns ``stop_process``: once a process was asked to exit (stdin closed, a shutdown
message sent), wait → SIGTERM → wait → SIGKILL, and for a provider (its own
session) the whole process group and every descendant, waiting until they are
gone (a pidfd turns readable at a process's exit, whoever its parent is). The one
ladder: used by the provider transport (``ChildProcess.aclose``), by
``hostd.client``'s ``spawn`` and by ``hostd check-provider``. It sits beside the
packages, not in ``hostd.transport``, so the client library never loads the host
transport; it imports nothing of hostd but the ``_reaper`` shim's ``/proc`` walk.
"""

from __future__ import annotations

import os
import signal
from collections.abc import Callable, Sequence

import anyio
from anyio.abc import Process

from hostd._reaper import group_members, kill_tree

__all__ = ["stop_process", "wait_exited"]


async def _exited_within(process: Process, within: float | None) -> bool:
    """Whether ``process`` exited within ``within`` seconds (``None``: wait for it)."""
    if process.returncode is not None:
        return True
    with anyio.move_on_after(within):
        await process.wait()
    return process.returncode is not None


def _signal(process: Process, sig: signal.Signals, group: bool) -> None:
    try:
        if group:
            os.killpg(process.pid, sig)
        elif process.returncode is None:
            process.send_signal(sig)
    except (ProcessLookupError, PermissionError):
        pass  # already gone (or the group emptied and its id was reused elsewhere)


async def wait_exited(pids: Sequence[int]) -> None:
    """Until each of ``pids`` has exited: its pidfd turns readable then, whoever its
    parent is (a zombie has exited)."""
    for pid in pids:
        try:
            fd = os.pidfd_open(pid)
        except ProcessLookupError:
            continue
        try:
            await anyio.wait_readable(fd)
        finally:
            os.close(fd)


async def _gone(pids: Sequence[int], within: float) -> None:
    with anyio.move_on_after(within):  # a process stuck in the kernel does not hang teardown
        await wait_exited(pids)


async def _kill_descendants(root: int, within: float = 5.0) -> None:
    """SIGKILL every descendant of ``root`` (``_reaper``: the tree stays whole below a
    live shim) and wait until they are gone, again for any forked meanwhile."""
    for _ in range(10):  # bounded: a fork bomb outruns any number of rounds
        killed = kill_tree(root)
        if not killed:
            return
        await _gone(killed, within)


async def _kill_group(pgid: int, within: float = 5.0) -> None:
    """SIGKILL process group ``pgid`` and wait until its members (as ``/proc`` lists
    them) are gone."""
    members = group_members(pgid)
    try:
        os.killpg(pgid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        return
    await _gone(members, within)


async def stop_process(
    process: Process,
    grace: float,
    *,
    term_grace: float | None = None,
    group: bool = False,
    on_signal: Callable[[signal.Signals], None] | None = None,
) -> int:
    """The signal steps of every teardown ladder, once its process was asked to exit
    (its stdin closed, a shutdown message sent): wait ``grace`` seconds → SIGTERM →
    wait ``term_grace`` (default ``grace``) → SIGKILL → wait for the exit; returns
    the exit code. ``group``: signal the process group (a child started in its own
    session), kill every descendant before the process itself (where ``/proc`` shows
    the tree), and kill the group even after a clean exit, for the grandchildren it
    left. ``on_signal`` hears each signal before it is sent (for the log)."""
    if not await _exited_within(process, grace):
        if on_signal is not None:
            on_signal(signal.SIGTERM)
        _signal(process, signal.SIGTERM, group)
        if not await _exited_within(process, grace if term_grace is None else term_grace):
            if on_signal is not None:
                on_signal(signal.SIGKILL)
            if group and process.returncode is None:
                await _kill_descendants(process.pid)  # not reaped yet: its pid is still its
            _signal(process, signal.SIGKILL, group)
    if group:
        await _kill_group(process.pid)
    await process.wait()
    return process.returncode if process.returncode is not None else -signal.SIGKILL
