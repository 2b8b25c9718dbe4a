"""The provider runtime's stdio loop: ``serve_stdio`` and ``run_stdio``.

Each request runs in its own task, started straight from the pipe's read
callback; replies are written whole by one synchronous write each; reading
pauses under back-pressure. ``run_stdio`` owns the wire: the replies go out on a
private copy of descriptor 1, and descriptor 1 itself leads to stderr. Kept apart from
``_runtime`` (the classes and helpers a provider author reads) as ``_http`` is for HTTPS.
"""

from __future__ import annotations

import asyncio
import os
import stat
import sys
import threading
from collections.abc import Callable
from functools import partial
from typing import Any, BinaryIO

import anyio

from hostd.errors import RequestLineTooLong
from hostd.protocol import DEFAULT_MAX_LINE_BYTES, EOF, OVERLONG, LineItem, LineSplitter
from hostd.rpc import LinePipeProtocol, encode_reply, error_reply, reserve_stdout

from ._runtime import Provider, ProviderServer

__all__ = ["run_stdio", "serve_stdio"]


def _watchable(loop: asyncio.AbstractEventLoop, fd: int) -> bool:
    """Whether the event loop can watch ``fd`` for input: a pipe, a socket or a terminal.

    Not a regular file nor ``/dev/null``: epoll refuses both (EPERM), and
    ``connect_read_pipe`` takes ``/dev/null`` (a character device) only to fail later
    in a callback, so its end of input would never be seen. Probed once, with the loop.
    """
    try:
        mode = os.fstat(fd).st_mode
        if not (stat.S_ISFIFO(mode) or stat.S_ISSOCK(mode) or stat.S_ISCHR(mode)):
            return False
        loop.add_reader(fd, _ignore)
    except (OSError, ValueError):
        return False
    loop.remove_reader(fd)
    return True


def _ignore() -> None:
    pass


def _read_in_thread(fd: int, splitter: LineSplitter, deliver: Callable[[LineItem], None]) -> None:
    """For a stdin the event loop cannot watch (a regular file, ``/dev/null``): a daemon
    reader thread on the raw descriptor, read to its end, so shutdown never waits for it."""
    while True:
        try:
            chunk = os.read(fd, 65536)
        except OSError:
            chunk = b""
        if chunk:
            items = splitter.feed(chunk)
        else:
            tail = splitter.end()  # a final line without its newline still counts
            items = [EOF] if tail is None else [tail, EOF]
        try:
            for item in items:
                deliver(item)
        except RuntimeError:  # the event loop is closed: the provider is exiting
            return
        if not chunk:
            return


async def serve_stdio(
    provider: Provider,
    *,
    stdin: int | None = None,
    stdout: Any = None,
    max_line_bytes: int = DEFAULT_MAX_LINE_BYTES,
) -> None:
    """Serve ``provider`` on the ``stdin`` descriptor and binary ``stdout`` until shutdown or EOF.

    Each request runs in its own task, started straight from the pipe's read
    callback, so pipelined requests are answered as they finish. A reply is
    written whole, one per line, by one synchronous write (no two can
    interleave). At EOF the replies in flight are still written before the
    provider exits (R2); ``context/shutdown`` cancels them. Reading pauses
    while 64 requests are in flight and resumes below 16 (back-pressure on the
    host). A ``stdin`` the event loop cannot watch (a regular file, ``/dev/null``) is
    read in a thread to its end instead. A provider's ``recheck``, if it defines one,
    runs on its schedule meanwhile (``ProviderServer.run_rechecks``). ``stdout`` defaults
    to ``sys.stdout.buffer`` as it stands (``run_stdio`` passes the wire it took over).
    Needs the asyncio backend (jsonrpcserver gathers batches with asyncio).
    """
    server = ProviderServer(provider)
    fd = stdin if stdin is not None else sys.stdin.fileno()
    dst = stdout if stdout is not None else sys.stdout.buffer
    loop = asyncio.get_running_loop()
    splitter = LineSplitter(max_line_bytes)
    eof = anyio.Event()
    pipe: LinePipeProtocol | None = None
    in_flight = 0
    paused = False
    ended = False  # EOF seen, or serving is over: late input is dropped

    def write(data: bytes) -> None:
        try:
            dst.write(data)
            dst.flush()
        except (BrokenPipeError, ConnectionResetError, ValueError):
            # The host stopped reading (or closed our stdout): nobody is left to
            # answer. Stop quietly (R2) and point the descriptor at /dev/null so the
            # interpreter's final flush cannot fail loudly either.
            _silence(dst)
            server.shutdown_requested.set()

    def finished() -> None:
        nonlocal in_flight, paused
        in_flight -= 1
        if paused and in_flight < 16 and pipe is not None and pipe.transport is not None:
            paused = False
            pipe.transport.resume_reading()

    async def answer(line: bytes) -> None:
        try:
            reply = await server.handle_line(line)
            if reply is not None:
                write(reply)
        finally:
            finished()

    async def too_long() -> None:
        # R1: an over-long line is bad input, answered and skipped, never buffered whole.
        finished()
        fault = RequestLineTooLong(
            f"line longer than {max_line_bytes} bytes", max_line_bytes=max_line_bytes
        )
        write(encode_reply(error_reply(fault)))

    async def stop_on_shutdown(scope: anyio.CancelScope) -> None:
        await server.shutdown_requested.wait()
        scope.cancel()

    # Answers are plain asyncio tasks, started straight from the pipe's read callback:
    # an anyio task group's per-task bookkeeping (a cancel scope, an event, backend
    # look-ups) costs about 0.1 ms of a provider's CPU per request here, and this
    # runtime needs the asyncio backend anyway. The set holds them; EOF awaits them
    # (R2), a shutdown cancels them, and an exception escaping one (a bug: provider
    # errors are already answered as errors) ends the provider loudly, as before.
    answers: set[asyncio.Task[None]] = set()
    crashed: list[BaseException] = []

    def answer_done(task: asyncio.Task[None]) -> None:
        answers.discard(task)
        if not task.cancelled() and task.exception() is not None:
            crashed.append(task.exception())  # type: ignore[arg-type]
            server.shutdown_requested.set()

    def deliver(item: LineItem) -> None:
        nonlocal in_flight, paused, ended
        if ended:
            return
        if item is EOF:
            ended = True
            eof.set()
            return
        in_flight += 1
        if item is OVERLONG:
            task = loop.create_task(too_long())
        else:
            assert isinstance(item, bytes)
            task = loop.create_task(answer(item))
        answers.add(task)
        task.add_done_callback(answer_done)
        if in_flight >= 64 and not paused and pipe is not None and pipe.transport:
            paused = True
            pipe.transport.pause_reading()

    # Progress lines come from the warm-up thread; every write happens in the loop.
    def notify(line: bytes) -> None:
        try:
            loop.call_soon_threadsafe(write, line)
        except RuntimeError:  # the loop is closed: the provider is exiting
            pass

    server.start_warming(notify)
    transport: asyncio.BaseTransport | None = None
    stdin_file: BinaryIO | None = None
    try:
        async with anyio.create_task_group() as serving:
            serving.start_soon(stop_on_shutdown, serving.cancel_scope)
            serving.start_soon(server.run_rechecks)  # cancelled with the serving
            if _watchable(loop, fd):
                stdin_file = os.fdopen(fd, "rb", buffering=0, closefd=False)
                transport, pipe = await loop.connect_read_pipe(
                    lambda: LinePipeProtocol(splitter, deliver, keep_unterminated=True),
                    stdin_file,
                )
            else:
                threading.Thread(
                    target=_read_in_thread,
                    args=(fd, splitter, lambda item: loop.call_soon_threadsafe(deliver, item)),
                    name="provider-stdin",
                    daemon=True,
                ).start()
            await eof.wait()
            while answers:  # EOF: the replies in flight are still written (R2)
                await asyncio.wait(set(answers))
            serving.cancel_scope.cancel()  # every answer written: stop the watcher
    finally:
        # Nothing more starts; a shutdown (or a failure) cancels what is in flight. The
        # pipe's last callbacks (its closing included) find ``ended`` set.
        ended = True
        for task in answers:
            task.cancel()
        with anyio.CancelScope(shield=True):
            while answers:
                await asyncio.wait(set(answers))
        if transport is not None:
            transport.close()
        if stdin_file is not None:
            stdin_file.close()
    if crashed:
        raise crashed[0]


def _silence(stream: Any) -> None:
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        try:
            os.dup2(devnull, stream.fileno())
        finally:
            os.close(devnull)
    except (OSError, ValueError, AttributeError):  # not a real descriptor (tests' buffers)
        pass


def run_stdio(provider: Provider, *, max_line_bytes: int = DEFAULT_MAX_LINE_BYTES) -> None:
    """Run ``provider`` on the JSON-RPC binding over stdin/stdout; returns on shutdown or EOF.

    It takes stdout over first: replies alone go out on it, and anything else written
    to stdout goes to stderr (``hostd.rpc.reserve_stdout``). stdin may be a pipe, a
    regular file or ``/dev/null`` (at once the end of input)."""
    wire = os.fdopen(reserve_stdout(), "wb")
    anyio.run(
        partial(serve_stdio, provider, stdout=wire, max_line_bytes=max_line_bytes),
        backend="asyncio",
    )
