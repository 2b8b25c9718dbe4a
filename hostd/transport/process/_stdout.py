"""A provider's stdout, read in the event loop's read callback, handed to its sink.

Owns the glue between a child's stdout pipe and the binding client that reads it:
``StdoutFeed`` is the pipe's asyncio protocol, its read callback splitting what it
reads with ``hostd.protocol.LineSplitter`` (the splitter every end reads pipes with;
the provider runtime's stdin is read the same way by ``hostd.rpc.LinePipeProtocol``),
each whole line to ``sink.on_line`` the moment it is complete, with no call out of the
transport between the pipe and the sink, and the one end told to ``sink.on_end``:
``LineTooLong`` past the bound, ``ProviderCrashed`` at the end of the output or
mid-line (unless the process says why it ended, ``why_closed``), a failing sink as an
error instead of a hang. Also the drain of what a process wrote before it exited. The
process itself (its pipes' descriptors, exit, teardown) is ``_process``'s; nothing here
knows a binding's wire.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Callable
from typing import Protocol

from hostd._log import get_logger
from hostd.errors import HostdError, LineTooLong, ProviderCrashed
from hostd.protocol import (
    DEFAULT_MAX_LINE_BYTES,
    EOF,
    OVERLONG,
    TRUNCATED,
    LineItem,
    LineSplitter,
)

__all__ = ["LineSink", "StdoutFeed", "line_too_long"]

log = get_logger("hostd.transport")


class LineSink(Protocol):
    """Where a child's stdout lines go (a binding client is one)."""

    def on_line(self, line: bytes) -> bool: ...
    def on_end(self, error: HostdError) -> None: ...


def line_too_long(max_line_bytes: int) -> LineTooLong:
    """The fault of a peer whose line passed the bound."""
    return LineTooLong(f"line longer than {max_line_bytes} bytes", max_line_bytes=max_line_bytes)


class StdoutFeed(asyncio.Protocol):
    """One stdout stream to ``sink``, and the protocol its pipe is read with (asyncio
    calls it in its read callback; ``connect`` wires a pipe to it). Reading stops when
    ``sink.on_line`` returns ``False`` or at the first end; ``on_stop`` is told then,
    once. An unterminated last line is ``TRUNCATED`` (a crash mid-line), then ``EOF``.

    ``why_closed(how)``, with ``how`` "mid-line" or "its output", may name the reason
    the output ended (the host stopping the process, a failed exec); ``None`` means a
    crash."""

    def __init__(
        self,
        provider_id: str,
        sink: LineSink,
        max_line_bytes: int = DEFAULT_MAX_LINE_BYTES,
        *,
        why_closed: Callable[[str], HostdError | None] | None = None,
        on_stop: Callable[[], None] | None = None,
    ) -> None:
        self.provider_id = provider_id
        self.sink = sink
        self.max_line_bytes = max_line_bytes
        self._why_closed = why_closed
        self._on_stop = on_stop
        #: Reading has stopped: what comes after is never delivered.
        self.ended = False
        self.splitter = LineSplitter(max_line_bytes)
        #: The pipe's transport, set before the first byte is delivered.
        self.transport: asyncio.ReadTransport | None = None

    def __repr__(self) -> str:
        return f"<StdoutFeed {self.provider_id} ended={self.ended} max={self.max_line_bytes}>"

    # asyncio's protocol: the pipe read in the event loop's own callback, no reader task.
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.ReadTransport)  # connect_read_pipe gives one
        self.transport = transport

    def data_received(self, data: bytes) -> None:
        for item in self.splitter.feed(data):
            self._deliver(item)

    def eof_received(self) -> bool:
        if self.splitter.end() is not None:
            self._deliver(TRUNCATED)
        self._deliver(EOF)
        return False

    def connection_lost(self, exc: Exception | None) -> None:
        self._deliver(EOF)  # after an end of file: ignored (``ended``)

    def stop(self, error: HostdError | None) -> None:
        """Stop reading; tell the sink ``error`` (``None``: the sink stopped it itself)."""
        self.ended = True
        transport = self.transport  # set before the first byte is delivered
        if transport is not None and not transport.is_closing():
            transport.pause_reading()  # what follows a fault is never read
        if self._on_stop is not None:
            self._on_stop()
        if error is not None:
            self.sink.on_end(error)

    def _deliver(self, item: LineItem) -> None:
        if self.ended:
            return
        if type(item) is bytes:
            try:
                if self.sink.on_line(item):
                    return
            except Exception as exc:  # a bug of ours: log it, never strand a waiter
                log.exception("provider.stdout.dispatch_failed", provider=self.provider_id)
                self.stop(HostdError(f"reading the provider's reply failed: {exc!r}"))
                return
            self.stop(None)
        elif item is OVERLONG:
            self.stop(line_too_long(self.max_line_bytes))
        else:
            how = "mid-line" if item is TRUNCATED else "its output"
            why = self._why_closed(how) if self._why_closed is not None else None
            self.stop(why or ProviderCrashed(f"provider closed {how}"))

    async def connect(self, loop: asyncio.AbstractEventLoop, fd: int) -> None:
        """Read the pipe ``fd`` (owned from here on) in ``loop``'s read callback."""
        pipe = os.fdopen(fd, "rb", buffering=0)  # the transport owns it from here
        try:
            await loop.connect_read_pipe(lambda: self, pipe)
        except BaseException:
            pipe.close()
            raise

    def drain_after_exit(self, returncode: int | None) -> None:
        """The process is gone, so all it wrote is in the pipe already: read that now,
        and if its output is still open (a descendant it left holds it), end the stream
        as a crash rather than wait for an end of file that may never come."""
        transport = self.transport
        if self.ended or transport is None or transport.is_closing():
            return
        fd = transport.get_extra_info("pipe").fileno()  # non-blocking (asyncio's)
        while not self.ended:
            try:
                data = os.read(fd, 65536)
            except OSError:  # BlockingIOError: nothing more was written
                break
            if not data:
                self.eof_received()
                return
            self.data_received(data)
        if not self.ended:
            self.stop(
                ProviderCrashed(f"provider exited (code {returncode}) while its output stayed open")
            )

    def close(self) -> None:
        """Close the pipe (the teardown); its end still reaches the sink, once."""
        if self.transport is not None:
            self.transport.close()
