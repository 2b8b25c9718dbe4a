"""check-provider's driver: a provider child spoken to over its pipes, through its binding's codec.

Owns the bytes: it sends the requests the binding's codec builds (the same codec
the daemon's pipe client and HTTPS endpoint drive, so a provider is asked
exactly as the daemon asks it, verify identities under the handshake name
included) and malformed bytes on purpose, reads what the provider writes line by
line through the same codec, passes over what answers nothing it waits for (the
answers to deliberate garbage, a late reply, noting a result to a request that should
have been refused), ends the output at a reply to no request sent, as the daemon's
pipe client does (H4), and times each call. A call that missed its deadline is kept
(``overdue``) until its late reply is read (``catch_up``): a provider still busy with
it would fail the next calls for the same cause. After a handshake that got no reply it
can write the CGP envelope handshake and tell, once the output has ended, whether the
provider answered that one instead (``probe_cgp``, ``speaks_cgp``). The child is the daemon's
own (``_checks`` spawns it as the transport does: ``Child``); the driver is its
stdout's sink (``on_line``/``on_end``, as a binding client is), so the lines, the
bound on them and the end of the output (with the daemon's words for it) are the
daemon's too. It judges nothing: what a reply means is ``_checks``'s (and the
daemon's leg audit's); it never imports the engine. A step that cannot go on
raises ``Failed``.

A remote provider has no pipes to own: ``RemoteDriver`` asks it through the
transport's own connection (``_checks`` opens it as the daemon's engine does), one
HTTP exchange per call, each held to the same deadline; it tells an error reply
(the provider's answer, X1/X2) from an exchange that broke (no connection, TLS, a
refused credential, a body that is not one reply), as ``Driver`` tells a refusal
from a crash.
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, TypeVar

import anyio

import hostd
from hostd.errors import (
    HostdError,
    MalformedReply,
    ProtocolFault,
    ProviderTimeout,
    ProviderUnauthorized,
    RemoteTransport,
    RemoteWire,
)
from hostd.protocol import (
    PROGRESS_METHOD,
    ContextQuery,
    ContextQueryResult,
    FrameIdentity,
    HandshakeAck,
    HostInfo,
    VerifyResponse,
)
from hostd.transport.bindings import (
    UNKEYED,
    CgpCodec,
    Codec,
    Fault,
    Notice,
    Refusal,
    Reply,
    Request,
)

__all__ = ["HOST", "QUERY_DOC", "Child", "Driver", "Failed", "Link", "RemoteDriver"]

#: Who check-provider says it is in the handshake (and, to a remote provider, its
#: HTTP user agent).
HOST = HostInfo(name="hostd-check-provider", version=hostd.__version__)
#: Lines read and not yet waited for, at most: a provider writing what nobody asked for
#: without end is cut off rather than held in memory.
_MAX_QUEUED = 10_000

T = TypeVar("T")


class Child(Protocol):
    """The provider process as the driver uses it (the transport's ``ChildProcess``)."""

    exited: anyio.Event

    @property
    def returncode(self) -> int | None: ...

    async def send(self, data: bytes) -> None: ...


@dataclass(frozen=True, slots=True)
class Overdue:
    """A call that missed its deadline, its reply not read yet."""

    #: The key its reply carries (``UNKEYED``: the next lock-step reply is its).
    key: Any
    #: When it was sent (``time.monotonic()``).
    sent_at: float
    #: Its lock-step error replies are passed over (``Driver.call``'s ``skip_errors``).
    skip_errors: bool = False


class Failed(Exception):
    """A check's verdict, raised to end that check (control flow inside check-provider)."""

    def __init__(self, detail: str, rules: Sequence[str] = ()) -> None:
        super().__init__(detail)
        self.rules = tuple(rules)


#: What a provider whose reply answers no request sent (H4) is told to do.
_H4_FIX = (
    "a reply carries the id of the request it answers exactly as sent, "
    "of the same JSON type (hostd sends JSON-RPC ids as integers)"
)
#: Where the query's wire (what is asked, what is answered) is written down for authors.
QUERY_DOC = 'docs/providers.md, "2. Query"'
#: What a query's result holds, said where one is malformed.
_RESULT_SHAPE = f'a query\'s result is {{"frames": [...], "truncated": false}} ({QUERY_DOC})'


class Misshapen(Failed):
    """A reply to the request sent, whose payload is not of its method's shape: the
    provider answered (it still serves), wrongly."""


def _malformed(exc: ProtocolFault, hint: str = "") -> Misshapen:
    """A reply of the wrong shape as a check's failure: ``malformed reply:`` and what is
    wrong, said once (a ``MalformedReply``'s problem, without its own ``malformed``);
    ``hint``: what the payload should have been."""
    problem = exc.problem if isinstance(exc, MalformedReply) else exc.message
    return Misshapen(f"malformed reply: {problem}" + (f"; {hint}" if hint else ""))


def _read(read: Callable[[Any], T], payload: Any, hint: str = "") -> T:
    """A reply's payload as the model of what was asked; a bad shape fails the check."""
    try:
        return read(payload)
    except ProtocolFault as exc:
        raise _malformed(exc, hint) from None


@dataclass
class Driver:
    """One provider child, the codec of its binding and what has been read from it."""

    child: Child
    codec: Codec
    #: A call's deadline (the daemon's ``timeout_ms``), in seconds.
    timeout_s: float
    lines: deque[bytes] = field(default_factory=deque)
    #: How its output ended (the transport's error: a crash, an over-long line, an exec
    #: that failed), or how its input broke; ``None`` while it is read.
    ended: HostdError | None = None
    #: Set once the provider's output ended: later checks cannot run (deterministically).
    dead: bool = False
    #: The handshake said ``"ready": false``: queries wait for its ``context/progress``.
    warming: bool = False
    #: Progress notifications read while waiting for a reply, not yet counted.
    notes: list[Notice] = field(default_factory=list)
    #: How long the last call took to be answered, in milliseconds.
    last_ms: float = 0.0
    #: The last query's result as read: which members it sent (``model_fields_set``).
    last_result: ContextQueryResult | None = None
    #: The call that missed its deadline and whose reply has not been read: until it is
    #: (``catch_up``), a lock-step provider's next reply would be its, and a keyed one is
    #: most likely still busy with it.
    overdue: Overdue | None = None
    #: A request that should have been refused (``call``'s ``refused``) got a result.
    answered_refused: bool = False
    #: The keys of the requests sent: a reply to one of them that nobody waits for any
    #: more is passed over (a late reply); a reply to none of them breaks the wire (H4).
    sent: set[Any] = field(default_factory=set)
    _more: anyio.Event | None = None

    # -- the sink of the child's stdout (called from the pipe's read callback) ---------

    def on_line(self, line: bytes) -> bool:
        if len(self.lines) >= _MAX_QUEUED:
            self.on_end(ProtocolFault(f"provider wrote over {_MAX_QUEUED} lines nobody asked for"))
            return False
        self.lines.append(line)
        self._wake()
        return True

    def on_end(self, error: HostdError) -> None:
        if self.ended is None:
            self.ended = error
        self._wake()

    def _wake(self) -> None:
        if self._more is not None:
            self._more.set()

    # -- the bytes ---------------------------------------------------------------------

    def _gone(self) -> Failed:
        self.dead = True
        assert self.ended is not None
        return Failed(self.ended.message)

    async def send_raw(self, data: bytes) -> None:
        try:
            await self.child.send(data)
        except HostdError as exc:  # its input closed: it exited (or never started)
            self.on_end(exc)
            raise self._gone() from None

    async def send(self, request: Request) -> None:
        if request.key is not None and request.key is not UNKEYED:
            self.sent.add(request.key)
        await self.send_raw(request.line)

    def unmatched(self, msg: Reply | Refusal) -> bool:
        """Whether ``msg`` answers no request sent, as the daemon's pipe client finds it
        (H4): a reply keyed by an id never sent, or by one the codec cannot read as an id
        (a string for JSON-RPC's integer). A lock-step reply answers the request in
        flight, and an error reply with a null id answers a line that was not a request
        (the deliberate garbage): neither is one."""
        key = msg.key
        if key is UNKEYED:
            return False
        if key is None:
            return isinstance(msg, Reply) or msg.raw_key is not None
        return key not in self.sent

    async def read_message(self) -> Reply | Refusal | Notice:
        """The next message the provider wrote; one that breaks the wire fails the step."""
        while True:
            while self.lines:
                message = self.codec.read(self.lines.popleft())
                if message is None:
                    continue
                if isinstance(message, Fault):
                    raise Failed(f"provider broke the wire: {message.error.message}")
                return message
            if self.ended is not None:
                raise self._gone()
            self._more = anyio.Event()
            await self._more.wait()

    async def call(
        self,
        request: Request,
        *,
        timeout_s: float | None = None,
        skip_errors: bool = False,
        refused: Any = None,
    ) -> Reply | Refusal:
        """Send ``request`` and return its reply, within ``timeout_s`` (default: a call's
        deadline, ``TimeoutError`` past it), the time it took in ``last_ms``. What answers
        another key is passed over: an error reply to deliberate garbage, a progress note
        (kept in ``notes``). ``skip_errors``: lock-step error replies are passed over too
        (after garbage, a lock-step provider's errors cannot be told from the query's
        own). ``refused``: the key of a request that should be refused; a result for it
        is passed over too, and noted in ``answered_refused``."""
        started = time.monotonic()
        try:
            with anyio.fail_after(self.timeout_s if timeout_s is None else timeout_s):
                await self.send(request)
                msg = await self._reply_to(request.key, skip_errors=skip_errors, refused=refused)
        except TimeoutError:
            self.overdue = Overdue(request.key, started, skip_errors)
            raise
        self.last_ms = (time.monotonic() - started) * 1000
        return msg

    async def catch_up(self, timeout_s: float) -> float | None:
        """Wait up to ``timeout_s`` for the late reply of the ``overdue`` call; how long
        after it was sent it came, in milliseconds, or ``None`` when it did not (it stays
        overdue). A reply that breaks the wire fails as ``call``'s would."""
        overdue = self.overdue
        if overdue is None:
            return None
        with anyio.move_on_after(timeout_s):
            await self._reply_to(overdue.key, skip_errors=overdue.skip_errors)
            self.overdue = None
            return (time.monotonic() - overdue.sent_at) * 1000
        return None

    async def _reply_to(
        self, key: Any, *, skip_errors: bool = False, refused: Any = None
    ) -> Reply | Refusal:
        """Read until the reply keyed ``key``, passing over what answers another (``call``)."""
        while True:
            msg = await self.read_message()
            if isinstance(msg, Notice):
                self.notes.append(msg)
                continue
            if refused is not None and msg.key == refused and isinstance(msg, Reply):
                self.answered_refused = True
            if msg.key != key:
                if self.unmatched(msg):
                    # The daemon ends the stream here (and restarts the provider):
                    # every later reply would be as unmatched.
                    self.on_end(self.codec.unmatched(msg))
                    raise Failed(f"{self._gone()}; {_H4_FIX}")
                continue
            if skip_errors and isinstance(msg, Refusal) and key is UNKEYED:
                continue
            return msg

    async def exchange(self, request: Request, what: str) -> Any:
        """Send ``request`` and return its reply's payload; an error reply fails the step."""
        msg = await self.call(request)
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
                    if note.method != PROGRESS_METHOD:
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

    async def handshake(self, timeout_s: float) -> HandshakeAck:
        """The handshake, within ``timeout_s`` (the daemon's start deadline)."""
        msg = await self.call(self.codec.handshake(HOST), timeout_s=timeout_s)
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
        msg = await self.call(request, skip_errors=skip_errors, refused=refused)
        if isinstance(msg, Refusal):
            return None, msg.error
        self.last_result = _read(self.codec.query_result, msg.payload, _RESULT_SHAPE)
        return list(self.last_result.frames), None

    async def probe_cgp(self) -> bool:
        """After a handshake that got no reply: write the CGP envelope handshake, within a
        call's deadline; whether it was written. Its answer is read once the output has
        ended (``speaks_cgp``)."""
        line = CgpCodec().handshake(HOST).line
        try:
            with anyio.fail_after(self.timeout_s):
                await self.send_raw(line)
        except (Failed, TimeoutError):  # its input closed, or a pipe with no room for it
            return False
        return True

    def speaks_cgp(self) -> bool:
        """Whether a line it wrote (and nothing read) is a CGP envelope ``handshake_ack``:
        it answered ``probe_cgp``'s handshake."""
        codec = CgpCodec()
        return any(codec.answers_handshake(line) for line in self.lines)

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


class Link(Protocol):
    """A handshaken remote provider as the driver uses it (the transport's
    ``RemoteConnection``)."""

    @property
    def ack(self) -> HandshakeAck | None: ...

    async def query(self, query: ContextQuery) -> ContextQueryResult: ...

    async def verify(self, frames: list[FrameIdentity]) -> VerifyResponse: ...


#: The errors of an exchange that broke rather than was answered: the connection or
#: TLS failed or the status was not 2xx (``RemoteTransport``), the body was not one reply
#: (``RemoteWire``), the credential was refused or could not be read. Anything else an
#: exchange raises is the provider's own error reply (X1, X2).
_BROKEN = (RemoteTransport, RemoteWire, ProviderUnauthorized)


def _misshapen(exc: RemoteWire, hint: str = "") -> Failed | None:
    """A body that was one reply to the request but whose payload has the wrong shape
    (the transport's ``RemoteWire`` chained from a ``MalformedReply``) as a pipe's row
    says it, ``malformed reply: …``; ``None`` for a body broken otherwise."""
    cause = exc.__cause__
    return _malformed(cause, hint) if isinstance(cause, MalformedReply) else None


@dataclass
class RemoteDriver:
    """One remote provider, asked through the transport's connection: ``opener`` makes
    it (the handshake, within the deadline it is given, by the daemon's own path)."""

    opener: Callable[[float], Awaitable[Link]]
    #: A call's deadline (the daemon's ``timeout_ms``), in seconds.
    timeout_s: float
    link: Link | None = None
    #: How long the last call took to be answered, in milliseconds.
    last_ms: float = 0.0
    #: The last query's result as read: which members it sent (``model_fields_set``).
    last_result: ContextQueryResult | None = None
    # Each exchange stands alone: no output ends, no late reply is read (an exchange
    # past its deadline is dropped), and HTTP carries no ``context/progress`` (a remote
    # provider still warming says so per query).
    dead: bool = False
    ended: HostdError | None = None
    warming: bool = False
    #: Where the handshake stalled when it missed its deadline (``hostd.transport``'s
    #: stages: ``tls``, ``head``, …), for its row.
    stalled: str | None = None

    def _link(self) -> Link:
        if self.link is None:
            raise Failed("not handshaken")
        return self.link

    async def handshake(self, timeout_s: float) -> HandshakeAck:
        """The handshake, within ``timeout_s`` (the daemon's start deadline): its rules
        (H1–H3, H2, C5) judged by the transport as the daemon's are."""
        try:
            self.link = await self.opener(timeout_s)
        except ProviderTimeout as exc:
            self.stalled = exc.data.get("stalled")
            raise TimeoutError from None  # the step names the deadline it missed
        except RemoteWire as exc:
            if (failed := _misshapen(exc)) is None:
                raise
            raise failed from None
        ack = self.link.ack
        if ack is None:
            raise Failed("the connection holds no handshake ack")
        return ack

    async def query(self, query: ContextQuery) -> tuple[list[Any] | None, HostdError | None]:
        """Returns (raw frames, None) or (None, the error reply as its typed error); an
        exchange that broke raises its error (the step's row names it)."""
        link = self._link()
        started = time.monotonic()
        try:
            with anyio.fail_after(self.timeout_s):
                result = await link.query(query)
        except RemoteWire as exc:
            if (failed := _misshapen(exc, _RESULT_SHAPE)) is None:
                raise
            raise failed from None
        except _BROKEN:
            raise
        except HostdError as exc:
            self.last_ms = (time.monotonic() - started) * 1000
            return None, exc
        self.last_ms = (time.monotonic() - started) * 1000
        self.last_result = result
        return list(result.frames), None

    async def verify(self, identities: list[FrameIdentity]) -> VerifyResponse:
        link = self._link()
        try:
            with anyio.fail_after(self.timeout_s):
                return await link.verify(identities)
        except RemoteWire as exc:
            if (failed := _misshapen(exc)) is None:
                raise
            raise failed from None
        except _BROKEN:
            raise
        except HostdError as exc:
            raise Failed(f"verify answered an error: {exc.message}") from None
