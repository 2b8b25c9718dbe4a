"""In-memory byte streams and a scripted peer, for driving the bindings without a process."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import anyio
from anyio.abc import ByteReceiveStream
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream


class ChunkStream(ByteReceiveStream):
    """A ByteReceiveStream fed chunk by chunk (chunks may split or join lines)."""

    def __init__(self, receive: MemoryObjectReceiveStream[bytes]) -> None:
        self._receive = receive

    async def receive(self, max_bytes: int = 65536) -> bytes:
        try:
            return await self._receive.receive()
        except anyio.EndOfStream:
            raise
        except anyio.ClosedResourceError:
            raise anyio.EndOfStream from None

    async def aclose(self) -> None:
        await self._receive.aclose()


def byte_pipe() -> tuple[MemoryObjectSendStream[bytes], ChunkStream]:
    send, receive = anyio.create_memory_object_stream[bytes](1000)
    return send, ChunkStream(receive)


class ScriptedPeer:
    """Answers each request line the client sends with ``respond(msg) -> list[bytes]``."""

    def __init__(self, respond: Callable[[dict[str, Any]], list[bytes]]) -> None:
        self.respond = respond
        self.received: list[dict[str, Any]] = []
        self.refuse = False
        self.to_client, self.client_reads = byte_pipe()

    async def send(self, data: bytes) -> None:
        """The client's ``send``: each line is answered in order."""
        for line in data.splitlines():
            msg = json.loads(line)
            self.received.append(msg)
            for out in self.respond(msg):
                await self.to_client.send(out)

    def send_nowait(self, data: bytes) -> bool:
        """The client's ``send_nowait``: like ``send``, or ``False`` (nothing taken) while
        ``refuse`` is set, as a full pipe would."""
        if self.refuse:
            return False
        for line in data.splitlines():
            msg = json.loads(line)
            self.received.append(msg)
            for out in self.respond(msg):
                self.to_client.send_nowait(out)
        return True
