"""A provider's stderr into the structured log, rate-limited so a flood costs little.

Owns the stderr pump: the pipe is read in large chunks; while the token bucket
(``StderrPolicy``: ``burst`` lines, refilled at ``rate`` lines a second) has
tokens, lines are split and logged as ``provider.stderr``, tagged with the
provider id; past it they are only counted (``bytes.count``, nothing split,
decoded or buffered beyond the one line under way), and the count is logged as
``provider.stderr.suppressed`` at most every ``summary_s`` seconds and at the end.
The pipe is always drained, so a flooding provider never blocks on its stderr.
Every line logged passes the provider's ``Redactor`` first (C8). The first and the
last bytes of the stream, logged or not, are kept (``HEAD_BYTES``, ``TAIL_BYTES``):
``tail()`` is what a failed start or a crash reports as its reason (bounded, one
line, scrubbed); ``last_lines()`` its last lines as they came, which the failure
carries as its own field (``stderr_tail``: bounded, one line, scrubbed). A Python
traceback ends with its error, but Node, Go, Rust and Java print the error first and
the stack after it, so the reason is the last lines *and* the last line that reads as
an error (``SyntaxError: …``, ``panic: …``, ``sh: 1: x: not found``), wherever it is
in what was kept, with the lines that say where in the author's code it was raised,
never the runtime's own frames first (``failure_reason``).

A logged line is at info, unless it belongs to an error report (``_ErrorReport``: a
Python traceback, an error line and the stack after it, a logger's line at warning or
worse): that is at warning, so a provider's failure shows in a log at warning (``hostd
mcp``'s, by default). The text alone decides, line by line: the failed reply that points
at the log is read from stdout, in no set order with the stderr read here.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Literal

import anyio
from anyio.abc import ByteReceiveStream

from hostd._log import get_logger
from hostd.errors import MAX_STDERR_TAIL_CHARS
from hostd.protocol import LineItem, LineSplitter

from .._redact import Redactor, printable

__all__ = [
    "HEAD_BYTES",
    "TAIL_BYTES",
    "TAIL_LINES",
    "TAIL_SHOWN_BYTES",
    "StderrPolicy",
    "StderrPump",
    "TokenBucket",
    "failure_reason",
    "last_lines",
]

log = get_logger("hostd.transport")

#: How much is read from the pipe at once: a flood costs a wake-up per chunk, not per line.
_CHUNK = 1 << 20

#: The start and the end of a provider's stderr kept for its failure report, and the
#: most of it a report quotes, in UTF-8 bytes (its error line and its last lines, as
#: one line). The start holds the error of a provider that dies as it starts and
#: prints a long stack or goroutine dump after it.
HEAD_BYTES = 2048
TAIL_BYTES = 4096
TAIL_SHOWN_BYTES = 300
_TAIL_LINES = 4
#: The most lines a failure's ``stderr_tail`` holds (``last_lines``), within
#: ``MAX_STDERR_TAIL_CHARS`` characters.
TAIL_LINES = 20
_TRACEBACK_HEAD = "Traceback (most recent call last)"
_LEFT_OUT = "…"

#: A line that states an error: ``SyntaxError: …`` (Node, Python), ``java.lang.X: …``,
#: ``error: …``, ``fatal error: …`` (Go), ``panic: …`` (Go), ``thread 'main' panicked
#: at …`` (Rust), ``sh: 1: foo: not found``, ``… No such file or directory``.
_ERROR_LINE = re.compile(
    r"(?:error|exception):|\bpanic:|\bpanicked at\b|\bfatal\b|\bnot found\b"
    r"|\bno such file or directory\b",
    re.IGNORECASE,
)
#: A line that states an error in a running provider's log (``_ErrorReport``), narrower
#: than ``_ERROR_LINE``: an informational sentence with "error" or "not found" in it
#: (``cache not found, building``) is no report. A named error: ``Error: …``,
#: ``error[E0425]: …``, ``fatal error: …``, ``fatal: …``, ``panic: …`` at the line's
#: start or after a ``prefix: `` (``provider: context/query failed: …``); an
#: exception's name anywhere, ``TypeError: …``, ``java.lang.IllegalStateException: …``
#: (``Caused by: …``); ``Exception in thread …`` (Java), ``thread 'main' panicked at …``
#: (Rust); or "not found", "no such file or directory" as what a ``name:`` says
#: (``sh: 1: x: not found``, ``…: [Errno 2] No such file or directory``).
_REPORT_LINE = re.compile(
    r"(?:^\s*|:\s+)(?i:error(?:\[\w+\])?|fatal(?: error)?|panic):(?:\s|$)"
    r"|\b(?:[a-z_$][\w$]*\.)*[A-Z]\w*(?:Error|Exception):"
    r"|^\s*Exception in thread\b|\bpanicked at\b"
    r"|[:\]]\s*(?i:(?:command )?not found|no such file or directory)\b"
)
#: A line of a stack, matched at its start: ``    at f (file:1:2)`` (Node, Java, a Rust
#: backtrace's file), ``  File "x.py", line 3`` (Python), ``goroutine 1 [running]:``,
#: ``main.main()``, ``\t/src/main.go:5 +0x1d``, ``created by …`` (Go), ``   0: f``
#: (Rust), ``\t... 5 more`` (Java); and the ``^^^^`` under a line of source (Python,
#: Node), which says nothing without it.
_FRAME_LINE = re.compile(
    r"\s+at\s|\s*File \"|goroutine \d+ \[|created by \S|[\w./*()\[\]-]+\(.*\)$"
    r"|\s+\S+:\d+ \+0x[0-9a-f]+$|\s+\d+: \S|\s*\.\.\. \d+ more$|\s*[\^~]+$"
)

#: A stack frame that names a file and a line of it: ``at f (/src/x.js:10:5)`` (Node),
#: ``at a.B.c(B.java:41)`` (Java), ``\t/src/main.go:5 +0x1d`` (Go), ``File "x.py", line
#: 3`` (Python). Only such a frame can say where in the author's code an error is.
_LOCATED = re.compile(r"[\w.-]\.\w+:\d+|File \".*\", line \d+")
#: A frame or location inside the runtime itself, never the author's code: Node's
#: ``node:internal/…``, ``node:events:524:28``; Python's ``<frozen importlib._bootstrap>``.
_RUNTIME = re.compile(r"\(?node:|<frozen ")
#: Node's first line of an uncaught error, the file and line it was thrown at
#: (``/src/facts.js:10``), printed above the line of source and the ``^`` under it.
_NODE_WHERE = re.compile(r"\S.*\.\w+:\d+$")
#: The ``^`` under a quoted line of source (Node, Python).
_CARET = re.compile(r"\s*\^+\s*$")

#: Where a Python traceback starts; an exception group's is drawn indented, under
#: ``+`` and ``|`` (``  + Exception Group Traceback (most recent call last):``).
_TRACEBACK_START = re.compile(r"[ |+]*(?:Exception Group )?Traceback \(most recent call last\):")
#: The line between two tracebacks of a chain (``raise … from``, or an error in ``except``).
_CHAIN_LINE = re.compile(
    r"During handling of the above exception|The above exception was the direct cause"
)
#: A logger's line at warning or worse, by its level at the start, after a timestamp or
#: in brackets: ``ERROR:name:msg`` (Python ``logging``'s default format), ``2026-01-01
#: 12:00:00,000 ERROR …``, ``[ERROR] …``, ``[2026-01-01T12:00:00Z WARN app] …``
#: (Rust), ``SEVERE: …`` (Java); or anywhere as a field: ``level=error`` (logfmt),
#: ``"level": "error"`` (JSON lines). A level followed by a space is a logger's column
#: only in capitals: ``error handling: strict`` is a sentence.
_LEVEL_LINE = re.compile(
    r"[ \[(]*(?:\d[\d:./,T+-]*Z?[ \])]+)*\[?"
    r"(?:(?i:warn|warning|error|fatal|critical|severe|panic)(?:[\]:]|$)"
    r"|(?:WARN|WARNING|ERROR|FATAL|CRITICAL|SEVERE|PANIC) )"
    r"|(?i:.*\blevel=\"?(?:warn|warning|error|fatal|critical|panic)\b)"
    r"|(?i:.*\"level\": *\"(?:warn|warning|error|fatal|critical|panic)\")"
)


@dataclass(slots=True, frozen=True)
class StderrPolicy:
    """How much of a child's stderr reaches the log: a bucket of ``burst`` lines refilled
    at ``rate`` lines a second; the rest is counted and summarised at most every
    ``summary_s`` seconds. A line is cut to ``max_line_bytes`` before it is logged."""

    burst: int = 200
    rate: float = 20.0
    summary_s: float = 10.0
    max_line_bytes: int = 64 * 1024


class TokenBucket:
    """``capacity`` tokens, refilled at ``rate`` a second up to ``capacity``; the clock is
    the caller's (``now``, in seconds), so the arithmetic is testable on its own."""

    __slots__ = ("capacity", "rate", "stamp", "tokens")

    def __init__(self, capacity: int, rate: float, now: float) -> None:
        self.capacity = capacity
        self.rate = rate
        self.tokens = float(capacity)
        self.stamp = now

    def available(self, now: float) -> int:
        """Whole tokens at ``now`` (after refilling for the time since the last call)."""
        if now > self.stamp:
            self.tokens = min(self.capacity, self.tokens + (now - self.stamp) * self.rate)
            self.stamp = now
        return int(self.tokens)

    def take(self, n: int) -> None:
        self.tokens -= n


def _decoded(raw: bytes) -> str:
    return raw.decode("utf-8", "replace")


def _is_error(line: str) -> bool:
    return _ERROR_LINE.search(line) is not None and _FRAME_LINE.match(line) is None


def _starts_report(line: str) -> bool:
    """Whether ``line`` states an error that starts a report in the log. A crash's
    reason looks wider (``_is_error``): there the process died, and its likeliest last
    words are wanted; a provider still serving writes ordinary sentences with such
    words in them, which belong at info."""
    return _REPORT_LINE.search(line) is not None and _FRAME_LINE.match(line) is None


class _ErrorReport:
    """Which of one stream's lines belong to an error report, read line by line (a
    state per stream): those the log puts at warning.

    A report starts at a Python traceback's first line and takes the indented lines
    after it up to its first line at the margin, its error (an exception group's is all
    indented: the first line at the margin is past it), and the lines that chain two
    tracebacks; or at a line that states an error (``_starts_report``: Node's ``Error:
    x``, ``panic: …``, ``java.lang.X: …``) or a logger's line at warning or worse
    (``_LEVEL_LINE``), and takes the stack lines after it (``_FRAME_LINE``), and the one
    line after an error line that ends with ``:`` (Rust's message). A blank line ends
    nothing: Go's dump and Python's chain have them inside."""

    __slots__ = ("_in",)

    def __init__(self) -> None:
        #: None (outside a report), or what it is in: ``traceback``, ``group`` (an
        #: exception group's traceback), ``stack``, ``message`` (the line after an error
        #: line that ends with ``:``).
        self._in: Literal["traceback", "group", "stack", "message"] | None = None

    def warns(self, line: str) -> bool:
        """Whether ``line``, the stream's next, belongs to an error report."""
        if not line.strip():
            return False
        if _TRACEBACK_START.match(line):
            self._in = "traceback" if line.startswith("Traceback") else "group"
            return True
        if _CHAIN_LINE.match(line):
            self._in = None
            return True
        if self._in in ("traceback", "group") and line[0].isspace():
            return True
        if self._in == "traceback":  # its first line at the margin is its error, its end
            self._in = None
            return True
        if self._in == "message":
            self._in = "stack"
            return True
        if self._in == "stack" and _FRAME_LINE.match(line):
            return True
        self._in = None
        if _starts_report(line):
            self._in = "message" if line.rstrip().endswith(":") else "stack"
            return True
        if _LEVEL_LINE.match(line):
            self._in = "stack"
            return True
        return False

    def lost(self) -> bool:
        """A line was not read (past the bucket, or over-long): whether the report under
        way, if any, is left, as no line can tell where it ends."""
        within = self._in is not None
        self._in = None
        return within


def failure_reason(lines: Sequence[str | None], fragment: str | None = None) -> str:
    """What a failure report quotes of a stream's kept ``lines`` (``None``: lines lost
    between its start and its end), as one line of at most ``TAIL_SHOWN_BYTES`` bytes.

    It is the last error line (the error of the last crash, whether its language prints
    it before its stack or after it), with the line after it when it ends with ``:``
    (Rust puts the message there), and the last ``_TAIL_LINES`` lines, in their order,
    joined by `` | ``, with ``…`` where lines are left out; and what locates the error
    in the author's code (``_where``): Node's ``file:line`` above it and its first
    frame outside the runtime, a Python traceback's first such frame. When that is too
    long, the runtime's own frames (``node:internal/…``, ``<frozen …>``) go first, then
    other stack frames, then other lines, earliest first, then the lines locating the
    error; the error lines stay, cut at their end if they must be. Without an error
    line, the last line stays, cut at its start: its end is a crash's last words.
    ``fragment``: the end of the stream, part of a line (its start lost), never taken
    for an error line."""
    items = list(lines)
    whole = len(items)  # items past it are the fragment
    if fragment is not None and fragment.strip():
        items.append(fragment.rstrip())
    errors = [i for i in range(whole) if (line := items[i]) is not None and _is_error(line)]
    block = errors[-1:]
    if block and _text(items, block[0]).endswith(":") and block[0] + 1 < whole:
        after = items[block[0] + 1]
        if after is not None and _FRAME_LINE.match(after) is None:
            block.append(block[0] + 1)
    end = range(max(0, len(items) - _TAIL_LINES), len(items))
    where = _where(items[:whole], block)
    keep = sorted({*block, *where, *(i for i in end if items[i] is not None)})
    rest = [i for i in keep if i not in block and i not in where]
    frames = [i for i in rest if _FRAME_LINE.match(_text(items, i))]
    runtime = [i for i in frames if _RUNTIME.search(_text(items, i))]
    others = [i for i in rest if i not in frames]
    dropping = runtime + [i for i in frames if i not in runtime] + others + where
    shown = _joined(items, keep)
    while len(shown.encode()) > TAIL_SHOWN_BYTES and dropping and len(keep) > 1:
        keep.remove(dropping.pop(0))
        shown = _joined(items, keep)
    data = shown.encode()
    if len(data) <= TAIL_SHOWN_BYTES:
        return shown
    # Bounded in bytes, whole characters only: an error line by its start (its kind and
    # message), any other line by its end.
    cut = TAIL_SHOWN_BYTES - len(_LEFT_OUT.encode())
    if block:
        return data[:cut].decode("utf-8", "ignore") + _LEFT_OUT
    return _LEFT_OUT + data[-cut:].decode("utf-8", "ignore")


def last_lines(lines: Sequence[str], *, cut: bool = False) -> str:
    """The last of ``lines`` (a stream's, scrubbed) as they came, as one line: at most
    ``TAIL_LINES`` whole lines and ``MAX_STDERR_TAIL_CHARS`` characters, joined by
    `` | ``, ``…`` first when earlier lines are left out (or ``cut``: the stream held
    more than ``lines``); a last line longer than that alone is shown by its end, behind
    ``…``. Control characters neutralised; ``""`` for no lines."""
    if not lines:
        return ""
    mark = f"{_LEFT_OUT}{_JOIN}"
    room = MAX_STDERR_TAIL_CHARS - len(mark)  # kept for the mark, should lines go
    last = printable(lines[-1])
    if len(last) > (room if cut or len(lines) > 1 else MAX_STDERR_TAIL_CHARS):
        # Alone, by its end (a crash's last words); its ``…`` says something went.
        return _LEFT_OUT + last[-(MAX_STDERR_TAIL_CHARS - len(_LEFT_OUT)) :]
    shown = [last]
    size = len(last)
    for line in reversed(lines[:-1]):
        line = printable(line)
        size += len(_JOIN) + len(line)
        if len(shown) == TAIL_LINES or size > room:
            break
        shown.append(line)
    text = _JOIN.join(reversed(shown))
    return f"{mark}{text}" if cut or len(shown) < len(lines) else text


#: How ``last_lines`` joins lines (as ``printable`` does the newlines of one text).
_JOIN = " | "


def _where(items: Sequence[str | None], block: Sequence[int]) -> list[int]:
    """The lines that say where in the author's code the error of ``block`` (its error
    line, and the message after it) was raised: Node's ``file:line`` printed above it
    (over the line of source and its ``^``), the first frame after it that names a file
    and line outside the runtime (Node, Java, Go: the stack follows the error) and the
    first such frame of the Python traceback that ends at it. Lost lines (``None``) end
    a search: what is past them is another part of the stream."""
    if not block:
        return []
    error, last = block[0], block[-1]
    found = []
    above = items[max(0, error - 4) : error]
    if any(line is not None and _CARET.match(line) for line in above):
        for i in range(error - len(above), error):
            line = items[i]
            if line is not None and _NODE_WHERE.match(line) and not _RUNTIME.search(line):
                found.append(i)
                break
    after = last + 1
    while after < len(items) and (line := items[after]) is not None and _FRAME_LINE.match(line):
        if _LOCATED.search(line) and not _RUNTIME.search(line):
            found.append(after)
            break
        after += 1
    # A Python traceback is indented up to its error (its header is left out of ``items``).
    start = error
    while start > 0 and (line := items[start - 1]) is not None and line[:1].isspace():
        start -= 1
    for i in range(start, error):
        line = _text(items, i)
        if line.lstrip().startswith('File "') and not _RUNTIME.search(line):
            found.append(i)
            break
    return sorted(set(found))


def _text(items: Sequence[str | None], i: int) -> str:
    line = items[i]
    assert line is not None  # only lines are kept, never the mark of lost ones
    return line


def _joined(items: list[str | None], keep: list[int]) -> str:
    """The ``keep`` lines of ``items`` as one printable line, ``…`` where lines are left
    out (``""`` for none)."""
    if not keep:
        return ""
    parts: list[str] = []
    after = 0  # the index just past the last line shown
    for i in keep:
        if i > after:
            parts.append(_LEFT_OUT)
        parts.append(_text(items, i))
        after = i + 1
    if after < len(items):
        parts.append(_LEFT_OUT)
    return printable("\n".join(parts))


def _after_newlines(chunk: bytes, n: int) -> int:
    """The offset just past the ``n``-th newline of ``chunk`` (its length if fewer)."""
    pos = -1
    for _ in range(n):
        pos = chunk.find(b"\n", pos + 1)
        if pos < 0:
            return len(chunk)
    return pos + 1


class StderrPump:
    """Drains one stderr stream into the log (see the module text); ``lines`` and
    ``suppressed`` count what it read and what it did not log."""

    def __init__(
        self,
        provider_id: str,
        policy: StderrPolicy,
        clock: Callable[[], float] = time.monotonic,
        redactor: Redactor | None = None,
    ) -> None:
        self.provider_id = provider_id
        self.policy = policy
        self.redactor = redactor if redactor is not None else Redactor()
        self._clock = clock
        #: The stream's first ``HEAD_BYTES`` and last ``TAIL_BYTES``, and its length.
        self._head = b""
        self._tail = b""
        self._seen = 0
        #: Set once the stream has ended (end of file, or closed by the teardown).
        self.ended = anyio.Event()
        #: Set once ``run`` stopped reading: the stream ended, or it was cancelled.
        self.stopped = anyio.Event()
        self._splitter = LineSplitter(policy.max_line_bytes)
        self._bucket = TokenBucket(policy.burst, policy.rate, clock())
        self._report = _ErrorReport()
        self._summarised = 0  # ``suppressed`` at the last summary
        self._summary_at = clock()
        self.lines = 0
        self.suppressed = 0

    async def run(self, stream: ByteReceiveStream) -> None:
        try:
            while True:
                try:
                    chunk = await stream.receive(_CHUNK)
                except (anyio.EndOfStream, anyio.ClosedResourceError, anyio.BrokenResourceError):
                    break
                self.feed(chunk)
            self.end()
        finally:
            self.stopped.set()

    def _keep(self, chunk: bytes) -> None:
        self._seen += len(chunk)
        if len(self._head) < HEAD_BYTES:
            self._head += chunk[: HEAD_BYTES - len(self._head)]
        if len(chunk) >= TAIL_BYTES:
            self._tail = chunk[-TAIL_BYTES:]
        else:
            self._tail = (self._tail + chunk)[-TAIL_BYTES:]

    def tail(self) -> str:
        """Why the provider said it failed, as one line of at most ``TAIL_SHOWN_BYTES``
        bytes: its error line and its last lines (``failure_reason``), its secrets scrubbed,
        control characters neutralised; ``""`` when it wrote nothing."""
        head, tail = self._head, self._tail
        start = self._seen - len(tail)  # where the kept end starts in the stream
        if start <= len(head):  # they meet: the whole stream, once
            return failure_reason(self._lines(head[:start] + tail))
        # A part cut mid-line loses the fragment (a secret's start or end?); a kept end
        # that is one fragment is shown only by its end, as it always was.
        head = head[: head.rfind(b"\n") + 1]
        if b"\n" in tail:
            return failure_reason(
                [*self._lines(head), None, *self._lines(tail[tail.index(b"\n") + 1 :])]
            )
        return failure_reason(
            [*self._lines(head), None], fragment=self.redactor.text(_decoded(tail))
        )

    def last_lines(self) -> str:
        """The last lines it read, as they came (``last_lines``: bounded, one line), its
        secrets scrubbed; ``""`` when it wrote nothing. From the kept end of the stream:
        a line cut at its start there is left out (a secret's end?), unless that end is
        all one line, shown by its end as ``tail()`` shows it."""
        head, tail = self._head, self._tail
        start = self._seen - len(tail)  # where the kept end starts in the stream
        if start <= len(head):  # the whole stream
            return last_lines(self._lines(head[:start] + tail))
        if b"\n" in tail:
            return last_lines(self._lines(tail[tail.index(b"\n") + 1 :]), cut=True)
        fragment = self.redactor.text(_decoded(tail)).strip()
        return last_lines([fragment], cut=True) if fragment else ""

    def _lines(self, raw: bytes) -> list[str]:
        """The lines of whole lines of the stream, scrubbed; blank ones and a Python
        traceback's header left out (it says nothing its frames and error do not, and
        quoted in hostd's own report it reads as if hostd had crashed)."""
        text = self.redactor.text(_decoded(raw))
        return [
            line.rstrip()
            for line in text.splitlines()
            if line.strip() and not line.startswith(_TRACEBACK_HEAD)
        ]

    def feed(self, chunk: bytes) -> None:
        self._keep(chunk)
        now = self._clock()
        allowed = self._bucket.available(now)
        cut = _after_newlines(chunk, allowed) if allowed else 0
        if cut:
            self._log(self._splitter.feed(chunk[:cut]))
        if cut < len(chunk):
            self._report.lost()
            skipped = self._splitter.skip(chunk[cut:])
            self.lines += skipped
            self.suppressed += skipped
        if self.suppressed > self._summarised and now - self._summary_at >= self.policy.summary_s:
            self._summarise(now)

    def end(self) -> None:
        """The stream ended: its unterminated last line, and the last summary."""
        tail = self._splitter.end()
        if tail is not None:
            if self._bucket.available(self._clock()):
                self._log([tail])
            else:
                self.lines += 1
                self.suppressed += 1
        if self.suppressed > self._summarised:
            self._summarise(self._clock())
        self.ended.set()

    def _log(self, items: list[LineItem]) -> None:
        self._bucket.take(len(items))
        self.lines += len(items)
        for item in items:  # bytes, or OVERLONG for a line past ``max_line_bytes``
            if isinstance(item, bytes):  # scrubbed before it is cut: no half a secret
                line = self.redactor.text(item.decode("utf-8", "replace"))[:2000]
                warns = self._report.warns(line)
            else:
                line = "<over-long stderr line>"
                warns = self._report.lost()
            if warns:  # a provider's error where a user looks when its query failed
                log.warning("provider.stderr", provider=self.provider_id, line=line)
            else:
                log.info("provider.stderr", provider=self.provider_id, line=line)

    def _summarise(self, now: float) -> None:
        log.warning(
            "provider.stderr.suppressed",
            provider=self.provider_id,
            suppressed=self.suppressed,
            since_last=self.suppressed - self._summarised,
        )
        self._summarised = self.suppressed
        self._summary_at = now
