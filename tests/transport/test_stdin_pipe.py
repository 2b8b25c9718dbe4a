"""Writing a provider's stdin: whole lines, at once or waiting for room, never interleaved.

Real child processes over real pipes. The child waits for SIGUSR1 before it reads
its input, so the test can fill the pipe first; then it answers one line per
input line: the length of that line and whether it parsed as the JSON we sent.
"""

from __future__ import annotations

import json
import signal
import sys

import anyio
import anyio.lowlevel
import pytest

from hostd.errors import ProviderCrashed
from hostd.transport import ChildProcess
from hostd.transport.process._process import ATOMIC_PIPE_WRITE
from tests.fixtures.lines import Lines, read_stdout
from tests.fixtures.procs import marked_env

pytestmark = pytest.mark.anyio

_CHILD = r"""
import json, signal, sys
go = []
signal.signal(signal.SIGUSR1, lambda *a: go.append(1))
sys.stdout.write("ready\n"); sys.stdout.flush()
while not go:
    signal.pause()
for line in sys.stdin.buffer:
    try:
        ok = isinstance(json.loads(line), dict)
    except ValueError:
        ok = False
    sys.stdout.write(f"{len(line)} {int(ok)}\n"); sys.stdout.flush()
"""


def _line(i: int, size: int = 100) -> bytes:
    """One JSON line of exactly ``size`` bytes, newline included."""
    head = json.dumps({"i": i, "pad": ""})
    return json.dumps({"i": i, "pad": "x" * (size - len(head) - 1)}).encode() + b"\n"


async def _spawn(tg: anyio.abc.TaskGroup) -> tuple[ChildProcess, Lines]:
    child = await ChildProcess.spawn("pipe", [sys.executable, "-c", _CHILD], env=marked_env())
    child.start_pumps(tg)
    reader = await read_stdout(child)
    assert await reader.next() == b"ready"
    return child, reader


async def _answers(reader: Lines, n: int) -> list[tuple[int, bool]]:
    out = []
    for _ in range(n):
        size, ok = (await reader.next()).split()
        out.append((int(size), ok == b"1"))
    return out


async def _until_sending(child: ChildProcess) -> None:
    """Until a ``send`` is under way. A send takes its lock and writes without yielding,
    so once the lock is seen held from here, that send is waiting for room."""
    while not child._write_lock.locked():
        await anyio.lowlevel.checkpoint()


def _fill(child: ChildProcess) -> int:
    """send_nowait until the pipe refuses a line; the count of lines it took."""
    n = 0
    while child.send_nowait(_line(n)):
        n += 1
        assert n < 100_000, "the pipe never filled"
    return n


async def test_send_nowait_writes_whole_lines_and_refuses_without_writing_when_full() -> None:
    async with anyio.create_task_group() as tg:
        child, reader = await _spawn(tg)
        taken = _fill(child)
        assert taken * 100 >= 4096  # at least one page went in before the refusal
        assert not child.send_nowait(_line(0))  # still full: refused again, nothing written
        child.process.send_signal(signal.SIGUSR1)
        # Exactly the lines it took, each whole: no refused line left a fragment behind.
        assert await _answers(reader, taken) == [(100, True)] * taken
        await child.aclose(grace=5)


async def test_send_nowait_leaves_lines_past_the_atomic_bound_to_send() -> None:
    async with anyio.create_task_group() as tg:
        child, reader = await _spawn(tg)
        big = _line(1, ATOMIC_PIPE_WRITE + 1)
        assert not child.send_nowait(big)
        await child.send(big)
        child.process.send_signal(signal.SIGUSR1)
        assert await _answers(reader, 1) == [(len(big), True)]
        await child.aclose(grace=5)


async def test_send_waits_for_room_and_then_writes_the_line_whole() -> None:
    async with anyio.create_task_group() as tg:
        child, reader = await _spawn(tg)
        taken = _fill(child)
        big = _line(-1, 200_000)  # more than the whole pipe holds
        done = anyio.Event()

        async def writer() -> None:
            await child.send(big)
            done.set()

        tg.start_soon(writer)
        await _until_sending(child)
        assert not done.is_set()  # nobody reads yet: the send waits, it does not drop
        assert not child.send_nowait(_line(0))  # a send under way: no line may cut in
        child.process.send_signal(signal.SIGUSR1)
        await done.wait()
        answers = await _answers(reader, taken + 1)
        assert answers == [(100, True)] * taken + [(len(big), True)]
        await child.aclose(grace=5)


async def test_a_send_cancelled_mid_line_makes_the_stream_unusable() -> None:
    async with anyio.create_task_group() as tg:
        child, _ = await _spawn(tg)
        with anyio.move_on_after(0.3):  # the pipe takes 64 KiB of it, then the wait is cut
            await child.send(_line(0, 200_000))
        with pytest.raises(ProviderCrashed, match="cut short"):
            await child.send(_line(1))
        with pytest.raises(ProviderCrashed, match="cut short"):
            child.send_nowait(_line(2))
        await child.aclose(grace=0.3)


async def test_teardown_wakes_a_send_waiting_for_room() -> None:
    async with anyio.create_task_group() as tg:
        child, _ = await _spawn(tg)
        _fill(child)
        failed: list[BaseException] = []
        woken = anyio.Event()

        async def writer() -> None:
            try:
                await child.send(_line(0))
            except ProviderCrashed as exc:
                failed.append(exc)
            woken.set()

        tg.start_soon(writer)
        await _until_sending(child)
        await child.aclose(grace=0.3)
        with anyio.fail_after(5):
            await woken.wait()
        assert failed and "closed" in str(failed[0])


async def test_a_provider_gone_is_a_crash_on_either_path() -> None:
    async with anyio.create_task_group() as tg:
        child = await ChildProcess.spawn("gone", [sys.executable, "-c", "pass"], env=marked_env())
        child.start_pumps(tg)
        await child.exited.wait()
        with pytest.raises(ProviderCrashed):
            child.send_nowait(_line(0))
        with pytest.raises(ProviderCrashed):
            await child.send(_line(0))
        await child.aclose(grace=1)
