"""A provider's stderr into the structured log, rate-limited so a flood costs little.

Owns the stderr pump: the pipe is read in large chunks; while the token bucket
(``StderrPolicy``: ``burst`` lines, refilled at ``rate`` lines a second) has
tokens, lines are split and logged as ``provider.stderr``, tagged with the
provider id; past it they are only counted (``bytes.count``, nothing split,
decoded or buffered beyond the one line under way), and the count is logged as
``provider.stderr.suppressed`` at most every ``summary_s`` seconds and at the end.
The pipe is always drained, so a flooding provider never blocks on its stderr.
Every line logged passes the provider's ``Redactor`` first (C8). The last bytes
of the stream, logged or not, are kept (``TAIL_BYTES``): ``tail()`` is what a
failed start or a crash reports as its reason (bounded, one line, scrubbed).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

import anyio
from anyio.abc import ByteReceiveStream

from hostd._log import get_logger
from hostd.protocol import LineItem, LineSplitter

from .._redact import Redactor, printable

__all__ = ["TAIL_BYTES", "TAIL_SHOWN_BYTES", "StderrPolicy", "StderrPump", "TokenBucket"]

log = get_logger("hostd.transport")

#: How much is read from the pipe at once: a flood costs a wake-up per chunk, not per line.
_CHUNK = 1 << 20

#: The end of a provider's stderr kept for its failure report, and the most of it a
#: report quotes, in UTF-8 bytes (the last lines, as one line: a traceback's last frame
#: and its error).
TAIL_BYTES = 4096
TAIL_SHOWN_BYTES = 300
_TAIL_LINES = 4
_TRACEBACK_HEAD = "Traceback (most recent call last)"


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
        #: The stream's last ``TAIL_BYTES``; ``_cut``: its start is mid-line.
        self._tail = b""
        self._cut = False
        #: Set once the stream has ended (end of file, or closed by the teardown).
        self.ended = anyio.Event()
        self._splitter = LineSplitter(policy.max_line_bytes)
        self._bucket = TokenBucket(policy.burst, policy.rate, clock())
        self._summarised = 0  # ``suppressed`` at the last summary
        self._summary_at = clock()
        self.lines = 0
        self.suppressed = 0

    async def run(self, stream: ByteReceiveStream) -> None:
        while True:
            try:
                chunk = await stream.receive(_CHUNK)
            except (anyio.EndOfStream, anyio.ClosedResourceError, anyio.BrokenResourceError):
                break
            self.feed(chunk)
        self.end()

    def _keep_tail(self, chunk: bytes) -> None:
        if len(chunk) >= TAIL_BYTES:
            self._tail, self._cut = chunk[-TAIL_BYTES:], True
        else:
            tail = self._tail + chunk
            if len(tail) > TAIL_BYTES:
                tail, self._cut = tail[-TAIL_BYTES:], True
            self._tail = tail

    def tail(self) -> str:
        """The last lines the provider wrote (at most ``TAIL_SHOWN_BYTES`` bytes), as one line: its
        secrets scrubbed, control characters neutralised; ``""`` when it wrote none."""
        raw = self._tail
        if self._cut and b"\n" in raw:  # the first line is a fragment (a secret's end?)
            raw = raw[raw.index(b"\n") + 1 :]
        text = self.redactor.text(raw.decode("utf-8", "replace"))
        # A Python traceback's header says nothing its frames and error do not, and
        # quoted in hostd's own report it reads as if hostd had crashed: left out.
        lines = [
            line.rstrip()
            for line in text.splitlines()
            if line.strip() and not line.startswith(_TRACEBACK_HEAD)
        ]
        shown = printable("\n".join(lines[-_TAIL_LINES:]))
        data = shown.encode()
        if len(data) > TAIL_SHOWN_BYTES:  # bounded in bytes: its end, whole characters only
            shown = "…" + data[-(TAIL_SHOWN_BYTES - 3) :].decode("utf-8", "ignore")
        return shown

    def feed(self, chunk: bytes) -> None:
        self._keep_tail(chunk)
        now = self._clock()
        allowed = self._bucket.available(now)
        cut = _after_newlines(chunk, allowed) if allowed else 0
        if cut:
            self._log(self._splitter.feed(chunk[:cut]))
        if cut < len(chunk):
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
            else:
                line = "<over-long stderr line>"
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
