"""A pipe read in the event loop's own read callback, split into bounded lines.

``LinePipeProtocol`` runs ``hostd.protocol.LineSplitter`` inside asyncio's read
callback, so a line is handed over the moment its last byte is read: no reader
task, no event-loop turn between the pipe and the line's consumer. The provider
runtime reads its stdin with it (the provider transport reads a child's stdout the
same way in its own protocol, ``StdoutFeed``, so a reply's line reaches its waiter
with no call out of the transport).

``reserve_stdout`` keeps descriptor 1 for an end whose stdout is its wire (``hostd
serve --stdio``, ``hostd mcp``, a provider's ``run_stdio``).
"""

from __future__ import annotations

import asyncio
import os
import sys
from collections.abc import Callable

from hostd.protocol import EOF, TRUNCATED, LineItem, LineSplitter

__all__ = ["LinePipeProtocol", "reserve_stdout"]


def reserve_stdout() -> int:
    """Keep a private copy of descriptor 1 for the wire; point descriptor 1 and
    ``sys.stdout`` at stderr. Returns the wire's descriptor (not inherited by
    subprocesses).

    Whatever the process prints from then on (``print``, a library, a C library or a
    subprocess writing to descriptor 1) lands on its stderr, never between two
    messages on the wire; what it printed before, still in ``sys.stdout``'s buffer,
    goes there too.
    """
    wire = os.dup(1)  # non-inheritable, as every descriptor Python makes
    os.dup2(2, 1)
    if sys.stdout is not None:
        sys.stdout.flush()  # printed earlier, not yet written: now to stderr
    sys.stdout = sys.stderr
    return wire


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
