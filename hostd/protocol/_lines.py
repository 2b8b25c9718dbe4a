"""Line framing read from a pipe, shared by both ends of the stdio bindings.

protocol.md §1–2: one JSON value per ``\\n``-terminated line, bounded in length.
``LineSplitter`` turns chunks of bytes into whole lines (or ``OVERLONG`` for a
line past the bound, skipped up to its newline without ever holding more than
the bound). Pure: the pipes that run it in asyncio's read callback are
``hostd.rpc.LinePipeProtocol`` (the provider runtime's stdin) and the transport's
``StdoutFeed`` (a child's stdout).
"""

from __future__ import annotations

from typing import Final

__all__ = [
    "DEFAULT_MAX_LINE_BYTES",
    "EOF",
    "OVERLONG",
    "TRUNCATED",
    "LineItem",
    "LineSplitter",
    "OverlongLine",
]

#: protocol.md framing: the default bound on one line, 8 MiB.
DEFAULT_MAX_LINE_BYTES: Final = 8 * 1024 * 1024


class _Marker:
    __slots__ = ("name",)

    def __init__(self, name: str) -> None:
        self.name = name

    def __repr__(self) -> str:
        return f"<{self.name}>"


#: A line longer than the bound (one per such line; reading resumes after it).
OVERLONG: Final = _Marker("overlong line")
#: The stream ended with an unterminated line (a peer that stopped mid-write).
TRUNCATED: Final = _Marker("truncated line")
#: The end of the stream (delivered once; later items are not delivered).
EOF: Final = _Marker("end of stream")


class OverlongLine:
    """A line longer than the bound, whole (its newline came), with its first and last
    bytes (``LineSplitter(keep_ends=N)``): where an answering end reads the request's
    id from (``hostd.rpc.id_in_line``), the line itself never parsed."""

    __slots__ = ("head", "tail")

    def __init__(self, head: bytes, tail: bytes) -> None:
        self.head = head
        self.tail = tail

    def __repr__(self) -> str:
        return f"<overlong line, ends of {len(self.head)} and {len(self.tail)} bytes>"


#: What a reader hands on: a line (without its newline) or a marker.
LineItem = bytes | _Marker | OverlongLine


class LineSplitter:
    """Bytes in, bounded lines out. ``feed`` returns the lines (without their newline)
    that a chunk completes, in order, with ``OVERLONG`` in place of each line longer
    than ``max_line_bytes``; memory stays within the bound whatever the peer sends.

    With ``keep_ends=N``, each such line is instead an ``OverlongLine`` with its first and
    last ``N`` bytes, handed on at its newline (not as soon as it is too long: its last
    bytes come then), so an unterminated over-long line gives no item; memory stays
    within the bound and ``2 * N``."""

    __slots__ = ("_buf", "_discarding", "_head", "_tail", "keep_ends", "max_line_bytes")

    def __init__(self, max_line_bytes: int = DEFAULT_MAX_LINE_BYTES, keep_ends: int = 0) -> None:
        if max_line_bytes < 1:
            raise ValueError("max_line_bytes must be positive")
        self.max_line_bytes = max_line_bytes
        self.keep_ends = keep_ends
        self._buf = bytearray()
        self._discarding = False  # inside an over-long line: drop bytes up to its newline
        #: The over-long line being skipped (``keep_ends``): its first and last bytes.
        self._head = b""
        self._tail = b""

    def _ends(self, rest: memoryview) -> OverlongLine:
        """The over-long line held in the buffer and then ``rest``, with its ends."""
        n = self.keep_ends
        head = bytes(self._buf[:n])
        if len(head) < n:
            head += bytes(rest[: n - len(head)])
        return OverlongLine(head, (bytes(self._buf[-n:]) + bytes(rest[-n:]))[-n:])

    def feed(self, chunk: bytes) -> list[LineItem]:
        items: list[LineItem] = []
        start = 0
        while (nl := chunk.find(b"\n", start)) != -1:
            if self._discarding:
                self._discarding = False
                if self.keep_ends:  # the skipped line's end: now its last bytes are known
                    rest = bytes(memoryview(chunk)[max(start, nl - self.keep_ends) : nl])
                    tail = (self._tail + rest)[-self.keep_ends :]
                    items.append(OverlongLine(self._head, tail))
            elif len(self._buf) + nl - start > self.max_line_bytes:
                items.append(
                    self._ends(memoryview(chunk)[start:nl]) if self.keep_ends else OVERLONG
                )
            elif self._buf:  # the line began in an earlier chunk
                self._buf += memoryview(chunk)[start:nl]
                items.append(bytes(self._buf))
            else:  # the line lies whole in this chunk: one copy, never through the buffer
                items.append(chunk[start:nl])
            self._buf.clear()
            start = nl + 1
        if not self._discarding:
            self._buf += memoryview(chunk)[start:]
            if len(self._buf) > self.max_line_bytes:  # memory stays bounded
                if self.keep_ends:  # told at its newline, with its last bytes
                    ends = self._ends(memoryview(b""))
                    self._head, self._tail = ends.head, ends.tail
                else:
                    items.append(OVERLONG)
                self._buf.clear()
                self._discarding = True
        elif self.keep_ends:  # still inside the skipped line: its last bytes so far
            self._tail = (self._tail + chunk[max(start, len(chunk) - self.keep_ends) :])[
                -self.keep_ends :
            ]
        return items

    def skip(self, chunk: bytes) -> int:
        """``len(self.feed(chunk))``, leaving the splitter in the same state, without
        making the lines: for lines that will only be counted (a stderr flood; not with
        ``keep_ends``)."""
        newlines = chunk.count(b"\n")
        if not newlines:
            return len(self.feed(chunk))  # at most the one OVERLONG of a growing line
        # The first newline ends the line under way: an over-long one gave its item already.
        items = newlines - (1 if self._discarding else 0)
        self._discarding = False
        self._buf.clear()
        self._buf += memoryview(chunk)[chunk.rfind(b"\n") + 1 :]
        if len(self._buf) > self.max_line_bytes:  # the unfinished last line is too long
            items += 1
            self._buf.clear()
            self._discarding = True
        return items

    @property
    def skipping(self) -> bool:
        """Inside a line already known to be over-long (with ``keep_ends``: not told yet)."""
        return self._discarding

    @property
    def partial(self) -> bytearray:
        """The unfinished line held so far (never more than the bound); read it only."""
        return self._buf

    def end(self) -> bytes | None:
        """The unterminated last line at the end of the stream, if any (not one being
        skipped as over-long)."""
        tail = bytes(self._buf) if self._buf and not self._discarding else None
        self._buf.clear()
        return tail
