"""A pipe read in the event loop's own read callback, split into bounded lines.

``LinePipeProtocol`` runs ``hostd.protocol.LineSplitter`` inside asyncio's read
callback, so a line is handed over the moment its last byte is read: no reader
task, no event-loop turn between the pipe and the line's consumer. The provider
runtime reads its stdin with it, the provider transport a child's stdout.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable

from hostd.protocol import EOF, TRUNCATED, LineItem, LineSplitter

__all__ = ["LinePipeProtocol"]


class LinePipeProtocol(asyncio.Protocol):
    """A pipe read in the event loop's own callback: each line goes to ``deliver`` as it
    completes, then at the end an unterminated last line (as a line when
    ``keep_unterminated``, else ``TRUNCATED``) and ``EOF``. ``deliver`` may see
    ``EOF`` twice (end of file, then the pipe closing) and should ignore the second."""

    def __init__(
        self,
        splitter: LineSplitter,
        deliver: Callable[[LineItem], None],
        *,
        keep_unterminated: bool = False,
    ) -> None:
        self.splitter = splitter
        self.deliver = deliver
        self.keep_unterminated = keep_unterminated
        self.transport: asyncio.ReadTransport | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.ReadTransport)  # connect_read_pipe gives one
        self.transport = transport

    def data_received(self, data: bytes) -> None:
        for item in self.splitter.feed(data):
            self.deliver(item)

    def eof_received(self) -> bool:
        tail = self.splitter.end()
        if tail is not None:
            self.deliver(tail if self.keep_unterminated else TRUNCATED)
        self.deliver(EOF)
        return False

    def connection_lost(self, exc: Exception | None) -> None:
        self.deliver(EOF)
