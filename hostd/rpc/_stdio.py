"""The stdio wire's byte stream: stdin and the reserved stdout descriptor, async.

``hostd serve --stdio`` and ``hostd mcp`` read their wire from descriptor 0 and write
it to the descriptor ``reserve_stdout`` kept. It lives here, beside
``reserve_stdout``, rather than with the daemon's listeners: ``hostd mcp --connect``
serves stdio without a daemon of its own, and must not import the daemon (the
engine, the composition library, the pipeline) to get its byte stream.
"""

from __future__ import annotations

import asyncio
import os
import stat

import anyio

__all__ = ["Stdio", "open_stdio"]


def _pollable(fd: int) -> bool:
    """Whether the event loop can wait on ``fd``: a pipe, a socket or a terminal."""
    mode = os.fstat(fd).st_mode
    return stat.S_ISFIFO(mode) or stat.S_ISSOCK(mode) or os.isatty(fd)


class Stdio:
    """Async byte I/O on the stdin fd and the reserved wire fd."""

    def __init__(self, in_fd: int, out_fd: int) -> None:
        self._in_fd = in_fd
        self._out_fd = out_fd
        self._reader: asyncio.StreamReader | None = None
        self._writer: asyncio.StreamWriter | None = None
        self._transports: list[asyncio.BaseTransport] = []

    async def start(self) -> None:
        loop = asyncio.get_running_loop()
        # The event loop polls pipes, sockets and terminals; anything else (a regular
        # file, /dev/null: epoll refuses it, and its end would never be seen) is read
        # in a worker thread and written with plain writes.
        if _pollable(self._in_fd):
            infile = os.fdopen(self._in_fd, "rb", buffering=0, closefd=False)
            reader = asyncio.StreamReader(limit=1 << 16)
            transport, _ = await loop.connect_read_pipe(
                lambda: asyncio.StreamReaderProtocol(reader), infile
            )
            self._reader = reader
            self._transports.append(transport)
        if _pollable(self._out_fd):
            outfile = os.fdopen(self._out_fd, "wb", buffering=0, closefd=False)
            wtransport, wprotocol = await loop.connect_write_pipe(
                asyncio.streams.FlowControlMixin, outfile
            )
            self._writer = asyncio.StreamWriter(wtransport, wprotocol, None, loop)
            self._transports.append(wtransport)

    async def receive(self) -> bytes:
        if self._reader is not None:
            return await self._reader.read(1 << 16)
        return await anyio.to_thread.run_sync(os.read, self._in_fd, 1 << 16, abandon_on_cancel=True)

    async def send(self, data: bytes) -> None:
        if self._writer is not None:
            if self._writer.transport.is_closing():
                raise anyio.BrokenResourceError
            self._writer.write(data)
            await self._writer.drain()
            return
        view = memoryview(data)
        while view:
            n = os.write(self._out_fd, view)
            view = view[n:]

    def close(self) -> None:
        for transport in self._transports:
            transport.close()


async def open_stdio(in_fd: int, out_fd: int) -> Stdio:
    """The daemon's stdio wire on descriptors ``in_fd``/``out_fd``, started."""
    stdio = Stdio(in_fd, out_fd)
    await stdio.start()
    return stdio
