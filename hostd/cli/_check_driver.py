"""check-provider's driver: a provider child spoken to over raw pipes, through its binding's codec.

Owns the bytes: it sends the requests the binding's codec builds (the same codec
the daemon's pipe client and HTTPS endpoint drive, so a provider is asked
exactly as the daemon asks it, verify identities under the handshake name
included) and malformed bytes on purpose (it writes its own pipes for that),
reads what the provider writes line by line through the same codec, passes over
what answers nothing it waits for (the answers to deliberate garbage), and reaps
the child by the one teardown ladder. It judges nothing: what a reply means is
``_checks``'s (and the daemon's leg audit's); it never imports the engine. A step
that cannot go on raises ``Failed``.
"""

from __future__ import annotations

import contextlib
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

import anyio
from anyio.abc import Process

import hostd
from hostd._teardown import stop_process
from hostd.errors import HostdError, ProtocolFault
from hostd.protocol import (
    ContextQuery,
    FrameIdentity,
    HandshakeAck,
    HostInfo,
    LineItem,
    LineSplitter,
    VerifyResponse,
)
from hostd.transport.bindings import UNKEYED, Codec, Fault, Notice, Refusal, Reply, Request

__all__ = ["Driver", "Failed", "reap"]

_MAX_LINE = 16 * 1024 * 1024
_HOST = HostInfo(name="hostd-check-provider", version=hostd.__version__)
_PROGRESS = "context/progress"

T = TypeVar("T")


class Failed(Exception):
    """A check's verdict, raised to end that check (control flow inside check-provider)."""

    def __init__(self, detail: str, rules: Sequence[str] = ()) -> None:
        super().__init__(detail)
        self.rules = tuple(rules)


def _read(read: Callable[[Any], T], payload: Any) -> T:
    """A reply's payload as the model of what was asked; a bad shape fails the check."""
    try:
        return read(payload)
    except ProtocolFault as exc:
        raise Failed(f"malformed reply: {exc.message}") from None


@dataclass
class Driver:
    """One provider child, the codec of its binding and what has been read from it."""

    process: Process
    codec: Codec
    timeout_s: float
    splitter: LineSplitter = field(default_factory=lambda: LineSplitter(_MAX_LINE))
    lines: deque[LineItem] = field(default_factory=deque)
    #: Set once the provider's stdout ended: later checks cannot run (deterministically).
    dead: bool = False
    #: The handshake said ``"ready": false``: queries wait for its ``context/progress``.
    warming: bool = False
    #: Progress notifications read while waiting for a reply, not yet counted.
    notes: list[Notice] = field(default_factory=list)

    async def send_raw(self, data: bytes) -> None:
        assert self.process.stdin is not None
        await self.process.stdin.send(data)

    async def send(self, request: Request) -> None:
        await self.send_raw(request.line)

    async def read_message(self) -> Reply | Refusal | Notice:
        """The next message the provider wrote; one that breaks the wire fails the step."""
        assert self.process.stdout is not None
        while True:
            while self.lines:
                line = self.lines.popleft()
                if not isinstance(line, bytes):  # OVERLONG
                    raise Failed("provider wrote an over-long line")
                message = self.codec.read(line)
                if message is None:
                    continue
                if isinstance(message, Fault):
                    raise Failed(f"provider broke the wire: {message.error.message}")
                return message
            try:
                self.lines.extend(self.splitter.feed(await self.process.stdout.receive(1 << 16)))
            except anyio.EndOfStream:
                self.dead = True
                raise Failed("provider closed stdout (it exited)") from None

    async def answer(
        self, request: Request, *, skip_errors: bool = False, refused: Any = None
    ) -> Reply | Refusal:
        """The reply to ``request`` (already sent). What answers another key is passed
        over: an error reply to deliberate garbage, a progress note (kept in ``notes``).
        ``skip_errors``: lock-step error replies are passed over too (after garbage, a
        lock-step provider's errors cannot be told from the query's own). ``refused``:
        the key of a request that must be refused; a result for it fails the step."""
        with anyio.fail_after(self.timeout_s):
            while True:
                msg = await self.read_message()
                if isinstance(msg, Notice):
                    self.notes.append(msg)
                    continue
                key = msg.key
                if refused is not None and key == refused and isinstance(msg, Reply):
                    raise Failed("a malformed query was answered with a result, not an error")
                if key != request.key:
                    continue
                if skip_errors and isinstance(msg, Refusal) and key is UNKEYED:
                    continue
                return msg

    async def exchange(self, request: Request, what: str) -> Any:
        """Send ``request`` and return its reply's payload; an error reply fails the step."""
        await self.send(request)
        msg = await self.answer(request)
        if isinstance(msg, Refusal):
            raise Failed(f"{what} answered an error: {msg.error.message}")
        return msg.payload

    async def wait_ready(self, timeout_s: float) -> int:
        """Read ``context/progress`` notifications until one says ready (or failed);
        the number of progress notes seen."""
        count = 0
        with anyio.fail_after(timeout_s):
            while True:
                while self.notes:
                    note = self.notes.pop(0)
                    if note.method != _PROGRESS:
                        continue
                    count += 1
                    params = note.params if isinstance(note.params, dict) else {}
                    if params.get("state") == "ready":
                        self.warming = False
                        return count
                    if params.get("state") == "failed":
                        raise Failed(f"warm-up failed: {params.get('message')}")
                msg = await self.read_message()
                if isinstance(msg, Notice):
                    self.notes.append(msg)

    # -- the protocol's operations, in the binding's codec -------------------------------

    async def handshake(self) -> HandshakeAck:
        request = self.codec.handshake(_HOST)
        await self.send(request)
        msg = await self.answer(request)
        if isinstance(msg, Refusal):
            raise Failed(f"handshake refused: {msg.error.message}")
        self.warming = isinstance(msg.payload, dict) and msg.payload.get("ready") is False
        return _read(self.codec.handshake_ack, msg.payload)

    async def query(
        self,
        query: ContextQuery | dict[str, Any],
        *,
        skip_errors: bool = False,
        refused: Any = None,
    ) -> tuple[list[Any] | None, HostdError | None]:
        """Returns (raw frames, None) or (None, the error reply as its typed error)."""
        request = self.codec.query(query)
        await self.send(request)
        msg = await self.answer(request, skip_errors=skip_errors, refused=refused)
        if isinstance(msg, Refusal):
            return None, msg.error
        return list(_read(self.codec.query_result, msg.payload).frames), None

    async def send_query(self, query: ContextQuery | dict[str, Any]) -> Request:
        """Send a query and do not wait: its answer is read (or passed over) later."""
        request = self.codec.query(query)
        await self.send(request)
        return request

    async def verify(self, identities: list[FrameIdentity]) -> VerifyResponse:
        payload = await self.exchange(self.codec.verify(identities), "verify")
        return _read(self.codec.verify_response, payload)

    async def shutdown(self) -> None:
        await self.send(self.codec.shutdown())


async def reap(process: Process) -> None:
    """Stdin closed, then the one teardown ladder over the provider's own session: its
    group and every descendant go with it, even after a clean exit."""
    with contextlib.suppress(Exception):
        if process.stdin is not None:
            await process.stdin.aclose()
    await stop_process(process, 2.0, group=True)
    for stream in (process.stdout, process.stderr):
        if stream is not None:
            with contextlib.suppress(Exception):
                await stream.aclose()
