"""Bounded newline framing for client connections.

Owns splitting a byte stream into lines with a hard maximum length: an
over-long line is reported once as a ``LineFault`` and its bytes are discarded
up to the next newline, so memory stays bounded and the connection keeps
serving (protocol.md, framing). Knows nothing about JSON-RPC.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass

__all__ = ["LineFault", "read_lines"]


@dataclass(slots=True, frozen=True)
class LineFault:
    """A line longer than the limit; ``size`` is how many bytes were discarded (at least)."""

    size: int


async def read_lines(
    receive: Callable[[], Awaitable[bytes]], max_line_bytes: int
) -> AsyncIterator[bytes | LineFault]:
    """Yield each complete line (without ``\\n``) or a ``LineFault``; stop at EOF.

    ``receive`` returns the next chunk, or ``b""`` at end of stream. A trailing
    partial line at EOF is dropped (a half line then disconnect is not a request).
    """
    buf = bytearray()
    discarding = 0  # > 0 while skipping the rest of an over-long line
    while True:
        chunk = await receive()
        if not chunk:
            return
        start = 0
        if discarding:
            nl = chunk.find(b"\n")
            if nl < 0:
                discarding += len(chunk)
                continue
            yield LineFault(discarding + nl)
            discarding = 0
            start = nl + 1
        while True:
            nl = chunk.find(b"\n", start)
            if nl < 0:
                buf += chunk[start:]
                if len(buf) > max_line_bytes:
                    discarding = len(buf)
                    buf.clear()
                break
            if buf:
                buf += chunk[start:nl]
                line = bytes(buf)
                buf.clear()
            else:
                line = chunk[start:nl]
            start = nl + 1
            if len(line) > max_line_bytes:
                yield LineFault(len(line))
            else:
                yield line
