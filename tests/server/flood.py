"""A bounded flooder: connections held open and re-opened as the daemon closes them."""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable

import anyio
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
    ``closed`` counts the daemon's closes, ``replies`` the lines it sent before them."""

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

    async def run(self) -> None:
        """Flood until cancelled (connections still held are closed then)."""
        async with anyio.create_task_group() as tg:
            for _ in range(self.width):
                tg.start_soon(self._one)

    async def _one(self) -> None:
        while self.closed < self.target:
            try:
                stream = await self._open()
            except OSError:  # refused by the kernel: try again, it is a flood
                continue
            self.opened += 1
            async with stream:
                got = b""
                try:
                    if self.first:
                        await stream.send(self.first)
                    while True:
                        got += await stream.receive()
                except _GONE:
                    pass
            self.replies.extend(line for line in got.split(b"\n") if line)
            self.closed += 1
            self._closing.set()
            self._closing = anyio.Event()
            if self.closed >= self.target:
                self.done.set()
        await anyio.sleep_forever()  # hold what is held until the flood is called off

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
