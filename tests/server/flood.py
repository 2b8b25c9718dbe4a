"""A bounded flooder: connections held open and re-opened as the daemon closes them."""

from __future__ import annotations

import contextlib
import json
import socket
from collections.abc import Awaitable, Callable

import anyio
import anyio.abc
from anyio.abc import ByteStream

#: What a TCP client that knows the token sends at once: the token, then a request.
TOKEN = "s3cret-token"
AUTH_AND_STATUS = (
    b'{"jsonrpc":"2.0","id":1,"method":"$/authenticate","params":{"token":"%s"}}\n'
    b'{"jsonrpc":"2.0","id":2,"method":"host/status"}\n' % TOKEN.encode()
)
_GONE = (anyio.EndOfStream, anyio.BrokenResourceError, anyio.ClosedResourceError, OSError)


class Flooder:
    """``width`` connections, each re-opened when the daemon closes it, until the daemon
    has closed ``target`` of them (``done``); each sends ``first`` on opening, if given.
    ``closed`` counts the daemon's closes, ``replies`` the lines it sent before them.

    ``stop()`` ends the flood by shutting down what is held, never by cancelling (or
    closing under) a task that waits on a socket: on asyncio, anyio's raw UNIX streams
    (receive, connect) answer a cancellation that meets a ready socket in the same loop
    pass with an ``InvalidStateError`` in a loop callback, which anyio's test runner
    re-raises."""

    def __init__(
        self,
        open_stream: Callable[[], Awaitable[ByteStream]],
        width: int,
        target: int,
        first: bytes = b"",
    ) -> None:
        self._open = open_stream
        self.width = width
        self.target = target
        self.first = first
        self.opened = 0
        self.closed = 0
        self.replies: list[bytes] = []
        self.done = anyio.Event()
        self._closing = anyio.Event()
        self._stopped = anyio.Event()
        self._held: set[ByteStream] = set()

    async def run(self) -> None:
        """Flood until ``stop()``; returns once every connection is closed."""
        async with anyio.create_task_group() as tg:
            for _ in range(self.width):
                tg.start_soon(self._one)

    async def stop(self) -> None:
        """Call the flood off: no connection is re-opened, those held are shut down (each
        reader then sees its end and closes its own stream: an ``aclose`` under a pending
        ``receive`` on a UNIX stream is the same trap as cancelling it)."""
        self._stopped.set()
        for stream in list(self._held):
            sock = stream.extra(anyio.abc.SocketAttribute.raw_socket, None)
            if sock is None:
                await stream.aclose()
                continue
            with contextlib.suppress(OSError):  # already closed by the daemon
                sock.shutdown(socket.SHUT_RDWR)

    async def _one(self) -> None:
        while self.closed < self.target and not self._stopped.is_set():
            try:
                stream = await self._open()
            except OSError:  # refused by the kernel: try again, it is a flood
                continue
            self.opened += 1
            self._held.add(stream)
            got = b""
            try:
                if not self._stopped.is_set():
                    if self.first:
                        await stream.send(self.first)
                    while True:
                        got += await stream.receive()
            except _GONE:
                pass
            finally:
                self._held.discard(stream)
                await stream.aclose()
            if self._stopped.is_set():  # closed by stop(), not by the daemon
                break
            self.replies.extend(line for line in got.split(b"\n") if line)
            self.closed += 1
            self._closing.set()
            self._closing = anyio.Event()
            if self.closed >= self.target:
                self.done.set()
        await self._stopped.wait()  # hold what is held until the flood is called off

    async def closes(self, n: int) -> None:
        """Return once the daemon has closed ``n`` of the flood's connections."""
        while self.closed < n:
            await self._closing.wait()


async def authenticated_status(host: str, port: int) -> bool:
    """A TCP client that sends the right token at once: did its request get through?"""
    try:
        async with await anyio.connect_tcp(host, port) as stream:
            await stream.send(AUTH_AND_STATUS)
            buf = b""
            with anyio.fail_after(60):  # hang guard only
                while buf.count(b"\n") < 2:
                    buf += await stream.receive()
    except _GONE:
        return False
    first, second = (json.loads(line) for line in buf.split(b"\n")[:2])
    return first.get("result") == {"authenticated": True} and (
        second.get("result", {}).get("state") == "serving"
    )
