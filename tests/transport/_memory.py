"""A scripted peer for driving the bindings without a process, over the production feed.

What the peer writes reaches the client the way a child's stdout does: chunk by chunk
through ``StdoutFeed`` (the pipe's protocol, over ``LineSplitter``) into the client's
``on_line``, and its end of file as the same ``on_end`` error the pipe gives.
"""

from __future__ import annotations

import json
import weakref
from collections.abc import Callable
from typing import Any, TypeVar

import anyio

from hostd.protocol import DEFAULT_MAX_LINE_BYTES
from hostd.transport.process._stdout import LineSink, StdoutFeed

C = TypeVar("C")

#: The peer each client was wired to (``ScriptedPeer.client``).
_PEERS: weakref.WeakKeyDictionary[Any, ScriptedPeer] = weakref.WeakKeyDictionary()


def peer_of(client: Any) -> ScriptedPeer:
    """The peer ``client`` was built against."""
    return _PEERS[client]


def holding(held: list[dict[str, Any]]) -> Callable[[dict[str, Any]], list[bytes]]:
    """A ``respond`` that keeps every request in ``held`` and answers none."""

    def respond(msg: dict[str, Any]) -> list[bytes]:
        held.append(msg)
        return []

    return respond


class ScriptedPeer:
    """Answers each request line the client sends with ``respond(msg) -> list[bytes]``."""

    def __init__(
        self,
        respond: Callable[[dict[str, Any]], list[bytes]],
        max_line_bytes: int = DEFAULT_MAX_LINE_BYTES,
    ) -> None:
        self.respond = respond
        self.max_line_bytes = max_line_bytes
        self.received: list[dict[str, Any]] = []
        self.refuse = False
        self.to_client, self._chunks = anyio.create_memory_object_stream[bytes](1000)

    def client(self, cls: Callable[..., C], *, nowait: bool = False, provider_id: str = "p") -> C:
        """A binding client of ``cls`` writing to this peer, built as a connection builds
        one; with ``nowait`` it may write without waiting (``send_nowait``)."""
        client = cls(
            self.send, provider_id=provider_id, send_nowait=self.send_nowait if nowait else None
        )
        _PEERS[client] = self
        return client

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

    async def pipe(self, sink: LineSink, provider_id: str = "p") -> None:
        """Hand what this peer writes to ``sink`` as a child's stdout pipe would, until the
        feed stops (a fault, or the sink's own ``False``) or the peer closes its end."""
        feed = StdoutFeed(provider_id, sink, self.max_line_bytes)
        while not feed.ended:
            try:
                chunk = await self._chunks.receive()
            except (anyio.EndOfStream, anyio.ClosedResourceError):
                feed.eof_received()
                feed.connection_lost(None)  # a second EOF, as the pipe gives
                return
            feed.data_received(chunk)

    def close(self) -> None:
        self.to_client.close()
        self._chunks.close()
