"""Line framing for every downstream stream: one JSON value per ``\\n``-terminated line.

Owns the bounded line reader over an anyio byte stream (the line encoder is
``hostd.rpc.encode_line``, every end's).
A line longer than the bound is a fault of that peer (``LineTooLong``); the
reader skips to the next newline without ever holding more than the bound
in memory. Nothing here knows JSON-RPC or CGP envelopes.
"""

from __future__ import annotations

from collections import deque

import anyio
from anyio.abc import ByteReceiveStream

from hostd.errors import LineTooLong
from hostd.protocol import DEFAULT_MAX_LINE_BYTES, OVERLONG, LineItem, LineSplitter

__all__ = ["DEFAULT_MAX_LINE_BYTES", "LineReader", "line_too_long"]


def line_too_long(max_line_bytes: int) -> LineTooLong:
    """The fault of a peer whose line passed the bound."""
    return LineTooLong(f"line longer than {max_line_bytes} bytes", max_line_bytes=max_line_bytes)


class LineReader:
    """Reads bounded lines from ``stream`` (a ``LineSplitter`` over its chunks).

    ``receive_line()`` returns one line without its newline, raises
    ``LineTooLong`` once per over-long line (the reader then resumes at the
    following line) and ``anyio.EndOfStream`` at the end. A final line without
    a newline is returned before the end when ``keep_unterminated``; otherwise
    it is dropped and ``truncated`` is set (a peer that died mid-write).
    """

    def __init__(
        self,
        stream: ByteReceiveStream,
        max_line_bytes: int = DEFAULT_MAX_LINE_BYTES,
        *,
        keep_unterminated: bool = False,
    ):
        self._splitter = LineSplitter(max_line_bytes)
        self.keep_unterminated = keep_unterminated
        self.truncated = False
        self._stream = stream
        self.max_line_bytes = max_line_bytes
        #: Lines (and ``OVERLONG`` markers) split from the last chunk, not yet returned.
        self._ready: deque[LineItem] = deque()
        self._eof = False

    @property
    def buffered(self) -> int:
        """Bytes of the unfinished line held so far (never much more than the bound)."""
        return len(self._splitter.partial)

    def __repr__(self) -> str:
        return (
            f"<LineReader buffered={self.buffered} ready={len(self._ready)} "
            f"max={self.max_line_bytes} eof={self._eof}>"
        )

    async def receive_line(self) -> bytes:
        while True:
            if self._ready:
                item = self._ready.popleft()
                if item is OVERLONG:
                    raise line_too_long(self.max_line_bytes)
                assert isinstance(item, bytes)
                return item
            if self._eof:
                raise anyio.EndOfStream
            try:
                chunk = await self._stream.receive(65536)
            except (anyio.EndOfStream, anyio.ClosedResourceError, anyio.BrokenResourceError):
                self._eof = True
                tail = self._splitter.end()
                if tail is not None:
                    if self.keep_unterminated:
                        self._ready.append(tail)
                    else:
                        self.truncated = True
                continue
            self._ready.extend(self._splitter.feed(chunk))
