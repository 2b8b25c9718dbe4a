"""``hostd mcp``'s stdio edge: every request read is answered once.

The SDK's server reads ``SessionMessage`` values and answers what it can parse;
what it cannot (a line that is not JSON, an invalid envelope, ``params: []``, a
batch, a line past the bound) it drops, and at the end of its input it cancels the
requests still running. This edge stands in front of it:

- ``screen`` (pure) reads each line once: what the SDK can serve is handed on; the
  rest is answered here with the JSON-RPC error that fits (−32700 parse error,
  −32600 invalid request, −32602 for ``params`` that are not an object, as MCP
  requires), in the daemon's words (``hostd.rpc.request_problem``: the member that is
  wrong, in ``data.field`` too), with the request's id when it can be read, else
  ``null`` (JSON-RPC 2.0 §5); a notification is never answered, a response never
  replied to;
- every request handed on is counted until its answer is written (or its client
  cancels it: MCP's cancellation asks for no answer), and an answer for a request
  already settled is dropped, so no request is answered twice;
- a progress notification of a request already settled is dropped too (MCP
  basic/utilities/progress: progress notifications "MUST only reference tokens
  that" were "provided in an active request"): the cancel is read here before the
  SDK cancels the handler, and what the handler queued meanwhile (or behind a
  client slow to read) would otherwise reach the client after its cancel;
- a batch is served member by member to a client whose ``initialize`` asked for
  2024-11-05 or 2025-03-26 (the SDK agrees to both; 2025-03-26: implementations
  "MUST support receiving JSON-RPC batches"; 2025-06-18 removed them, and later
  sessions get one ``-32600`` per request in it): each member is screened as a
  line of its own and handed on, and the members' answers are written as one array
  once every request in it is answered or cancelled (JSON-RPC 2.0 §6: none for its
  notifications, no array when nothing in it is answered);
- when stdin ends, the requests already read are still served: the edge waits for
  their answers (up to ``drain_s``), answers the rest ``shutting_down`` itself, and
  only then lets the SDK see the end of its input.

Lines are read and written on the event loop's own pipes (not the SDK's
``stdio_server``, which moves every line through a worker thread); a line past
``max_line_bytes`` is refused, never buffered, under the id its ends name when that
can be read for certain (``hostd.rpc.id_in_line``, as the daemon's socket answers).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

import anyio
import mcp_types as types
from mcp.shared.dispatcher import coerce_request_id
from mcp.shared.message import ServerMessageMetadata, SessionMessage
from pydantic import ValidationError

from hostd._log import get_logger
from hostd._param_words import given
from hostd.errors import (
    EmptyBatch,
    HostdError,
    InvalidParam,
    InvalidRequest,
    ParseError,
    RequestLineTooLong,
    ShuttingDown,
)
from hostd.protocol import DEFAULT_MAX_LINE_BYTES, LineSplitter, OverlongLine
from hostd.rpc import (
    HEAD_BYTES,
    decode,
    encode_line,
    error_reply,
    id_in_line,
    is_mcp_id,
    request_problem,
)

__all__ = ["DRAIN_S", "Screened", "screen", "serve_stdio"]

log = get_logger("hostd.mcp")

#: How long requests read before stdin closed may still take to be answered.
DRAIN_S = 30.0

RequestId = int | str


#: The revisions whose clients may send batches: 2025-03-26 says implementations "MUST
#: support receiving JSON-RPC batches", 2024-11-05 speaks plain JSON-RPC 2.0 (batches
#: included), and 2025-06-18 removed them.
BATCH_REVISIONS = frozenset({"2024-11-05", "2025-03-26"})


@dataclass(slots=True, frozen=True)
class Screened:
    """What one line asks: a message for the SDK, a reply to write now, or neither; for
    a batch served member by member, each member's own ``Screened``."""

    message: SessionMessage | None = None
    reply: Any = None  # the JSON-RPC answer (an object, or a batch's array) to write now
    request: RequestId | None = None  # the id the SDK now owes an answer
    cancels: RequestId | None = None  # a request the client cancelled (no answer due)
    members: tuple[Screened, ...] = ()


def _refuse(exc: HostdError, id_: Any = None) -> Screened:
    return Screened(reply=error_reply(exc, id_ if is_mcp_id(id_) else None))


_BATCH = (
    "batches are served only to MCP 2024-11-05 and 2025-03-26 sessions (2025-06-18 "
    "removed them): send each request alone"
)


def _batch(items: list[Any], *, served: bool) -> Screened:
    """JSON-RPC 2.0 §6: one answer per request in the batch, in one array; none for
    notifications and responses. ``served``: each member screened as a line of its own
    (``members``), else each request in it refused."""
    if not items:
        return _refuse(EmptyBatch("empty batch"))
    if served:
        return Screened(members=tuple(_member(item) for item in items))
    replies = []
    for item in items:
        id_ = None
        if isinstance(item, dict):
            if "method" in item and "id" not in item:
                continue  # a notification: never answered
            if "method" not in item and ("result" in item or "error" in item):
                continue  # a response: never replied to
            id_ = item.get("id")
        replies.append(error_reply(InvalidRequest(_BATCH), id_ if is_mcp_id(id_) else None))
    if not replies:
        return Screened()
    return Screened(reply=replies)


def _member(item: Any) -> Screened:
    if isinstance(item, dict) and item.get("method") == "initialize":
        # 2025-03-26: "The initialization request MUST NOT be part of a JSON-RPC batch".
        return _refuse(InvalidRequest("initialize must not be part of a batch"), item.get("id"))
    return _one(item)


def _one(value: Any) -> Screened:
    if (
        isinstance(value, dict)
        and "method" not in value
        and ("result" in value or "error" in value)
    ):
        return _hand_on(value, respond=False)  # a response: never replied to
    # In the daemon's words (``request_problem``): the member that is wrong, and what it
    # must be, in ``data.field`` too; MCP's ids and other members as MCP has them.
    problem = request_problem(value, mcp=True)
    if problem is not None:
        if problem.data.get("field") == "params" and "id" not in value:
            log.warning("mcp.notification.refused", reason="params_not_object")
            return Screened()  # a notification is never answered
        return _refuse(problem, value.get("id") if isinstance(value, dict) else None)
    id_ = value.get("id")
    if isinstance(value.get("params"), list):
        if "id" not in value:
            log.warning("mcp.notification.refused", reason="params_not_object")
            return Screened()  # a notification is never answered
        # JSON-RPC allows positional params; MCP's every method takes an object.
        params = value["params"]
        return _refuse(
            InvalidParam(
                f"invalid params: params: got {given(params)}; expected an object (MCP)",
                field="params",
            ),
            id_,
        )
    return _hand_on(value, respond="id" in value)


def _hand_on(value: dict[str, Any], *, respond: bool) -> Screened:
    try:
        message = types.jsonrpc_message_adapter.validate_python(value, by_name=False)
    except ValidationError:
        if respond:
            return _refuse(InvalidRequest("not a valid MCP request"), value.get("id"))
        log.warning("mcp.message.refused", reason="invalid_message")
        return Screened()
    cancels = None
    if isinstance(message, types.JSONRPCNotification) and message.method == (
        "notifications/cancelled"
    ):
        target = (message.params or {}).get("requestId")
        cancels = coerce_request_id(target) if is_mcp_id(target) else None
    request = message.id if isinstance(message, types.JSONRPCRequest) else None
    return Screened(message=SessionMessage(message), request=request, cancels=cancels)


def screen(line: bytes, *, batches: bool = False) -> Screened:
    """One inbound line: handed on to the SDK, or answered here (pure). ``batches``: the
    session's revision receives batches (``BATCH_REVISIONS``)."""
    try:
        value = decode(line)
    except ParseError as exc:
        return _refuse(exc)
    if isinstance(value, list):
        return _batch(value, served=batches)
    return _one(value)


class _Batch:
    """One served batch: its answers in the order of its members, written as one array
    once the last member handed on is answered or cancelled (and not before every
    member was read)."""

    __slots__ = ("answers", "open", "owed")

    def __init__(self) -> None:
        self.answers: list[Any] = []  # an answer, or None while owed (dropped if cancelled)
        self.owed: dict[RequestId, int] = {}  # coerced id -> its place in ``answers``
        self.open = True  # members still being read

    def expect(self, key: RequestId) -> None:
        self.owed[key] = len(self.answers)
        self.answers.append(None)

    def settle(self, key: RequestId, answer: Any) -> bool:
        """``answer`` (None: cancelled) in ``key``'s place; True when the batch is done."""
        self.answers[self.owed.pop(key)] = answer
        return self.done

    @property
    def done(self) -> bool:
        return not self.open and not self.owed

    def array(self) -> list[Any]:
        return [answer for answer in self.answers if answer is not None]


class _Owed:
    """The requests handed on whose answers are not written yet (by coerced id, as the
    SDK correlates them, keeping the ids as sent), and an event set when none is left."""

    def __init__(self) -> None:
        self.ids: dict[RequestId, list[RequestId]] = {}
        self.settled = anyio.Event()
        self.settled.set()

    def add(self, id_: RequestId) -> None:
        self.ids.setdefault(coerce_request_id(id_), []).append(id_)
        if self.settled.is_set():
            self.settled = anyio.Event()

    def settle(self, id_: RequestId) -> bool:
        """Count one answer (or cancellation) for ``id_``; False when none was owed."""
        key = coerce_request_id(id_)
        sent = self.ids.get(key)
        if not sent:
            return False
        sent.pop(0)
        if not sent:
            del self.ids[key]
        if not self.ids:
            self.settled.set()
        return True

    def remaining(self) -> list[RequestId]:
        return [id_ for sent in self.ids.values() for id_ in sent]


def _overlong_id(line: object) -> RequestId | None:
    """The id to refuse a line too long to parse under: the request's, read from its ends
    (``hostd.rpc.id_in_line``, as the daemon's socket reads it) when it is an MCP id;
    else null (JSON-RPC 2.0: an id that cannot be determined)."""
    said = id_in_line(line.head, line.tail) if isinstance(line, OverlongLine) else None
    return said if is_mcp_id(said) else None


def _progress_of_settled(item: SessionMessage, owed: _Owed) -> bool:
    """Whether ``item`` is a progress notification of a request no longer owed an
    answer (answered, cancelled by its client, or answered ``shutting_down`` here)."""
    if not isinstance(item.message, types.JSONRPCNotification):
        return False
    if item.message.method != "notifications/progress":
        return False
    # The SDK relates each notification a handler sends to the request it serves.
    metadata = item.metadata
    if not isinstance(metadata, ServerMessageMetadata) or metadata.related_request_id is None:
        return False
    return coerce_request_id(metadata.related_request_id) not in owed.ids


async def serve_stdio(
    run: Callable[[Any, Any], Awaitable[None]],
    receive: Callable[[], Awaitable[bytes]],
    send: Callable[[bytes], Awaitable[None]],
    *,
    max_line_bytes: int = DEFAULT_MAX_LINE_BYTES,
    drain_s: float = DRAIN_S,
) -> None:
    """Run ``run(inbox, outbox)`` (the SDK server's loop) behind the edge until stdin
    ends and every request read has been answered (or ``drain_s`` has passed)."""
    inbox_send, inbox = anyio.create_memory_object_stream[SessionMessage | Exception](16)
    outbox, outbox_receive = anyio.create_memory_object_stream[SessionMessage](16)
    owed = _Owed()
    write_lock = anyio.Lock()
    gone = anyio.Event()  # the client stopped reading: nothing more can be answered
    in_batch: dict[RequestId, _Batch] = {}  # a served batch's requests, by coerced id
    # The revision the client's ``initialize`` asked for. The SDK answers with the one
    # asked for when it knows it, as it knows every one of ``BATCH_REVISIONS``; read
    # from the request, not the answer, so a client that sends on without waiting for
    # the answer is served the same.
    revision: list[Any] = []

    async def write(data: bytes) -> None:
        if gone.is_set():
            return
        async with write_lock:
            try:
                await send(data)
            except (anyio.BrokenResourceError, anyio.ClosedResourceError, OSError):
                gone.set()

    async def answer(id_: RequestId, reply: Any) -> None:
        """Write the answer to ``id_`` (owed and now settled): alone, or in its batch."""
        key = coerce_request_id(id_)
        batch = in_batch.pop(key, None)
        if batch is None:
            await write(encode_line(reply, strict=False))
        elif batch.settle(key, reply):
            await flush(batch)

    async def cancel(id_: RequestId) -> None:
        if owed.settle(id_):
            key = coerce_request_id(id_)
            batch = in_batch.pop(key, None)
            if batch is not None and batch.settle(key, None):
                await flush(batch)

    async def flush(batch: _Batch) -> None:
        array = batch.array()
        if array:  # every request in it cancelled: nothing to answer
            await write(encode_line(array, strict=False))

    async def hand_on(screened: Screened, batch: _Batch | None = None) -> None:
        assert screened.message is not None
        message = screened.message.message
        if isinstance(message, types.JSONRPCRequest) and message.method == "initialize":
            revision.append((message.params or {}).get("protocolVersion"))
        if screened.request is not None:
            owed.add(screened.request)
            if batch is not None:
                key = coerce_request_id(screened.request)
                batch.expect(key)
                in_batch[key] = batch
        await inbox_send.send(screened.message)

    async def serve_batch(members: tuple[Screened, ...]) -> None:
        batch = _Batch()
        for member in members:
            if member.reply is not None:
                batch.answers.append(member.reply)
            if member.cancels is not None:
                await cancel(member.cancels)
            if member.message is None:
                continue
            if member.request is not None and coerce_request_id(member.request) in owed.ids:
                # Its answer could not be told from the other's (MCP: ids are not reused).
                used = InvalidRequest("id already in use by a request not answered yet")
                batch.answers.append(error_reply(used, member.request))
                continue
            await hand_on(member, batch)
        batch.open = False
        if batch.done:
            await flush(batch)

    async def handle(line: bytes) -> None:
        screened = screen(line, batches=bool(revision) and revision[-1] in BATCH_REVISIONS)
        if screened.members:
            await serve_batch(screened.members)
            return
        if screened.reply is not None:
            await write(encode_line(screened.reply, strict=False))
        if screened.cancels is not None:
            await cancel(screened.cancels)
        if screened.message is not None:
            await hand_on(screened)

    async def take(line: bytes | object) -> None:
        if isinstance(line, bytes):
            if line.strip():
                await handle(line)
            return
        log.warning("mcp.line_too_long", max_line_bytes=max_line_bytes)
        refused = RequestLineTooLong("line too long", max_line_bytes=max_line_bytes)
        await write(encode_line(error_reply(refused, _overlong_id(line))))

    async def read_in() -> None:
        # The ends of an over-long line are kept, to answer it under its request's id
        # (JSON-RPC 2.0: null only when the id cannot be determined), as the socket does.
        splitter = LineSplitter(max_line_bytes, keep_ends=HEAD_BYTES)
        async with inbox_send:
            while chunk := await receive():
                for line in splitter.feed(chunk):
                    await take(line)
            if splitter.skipping:  # an over-long last line without its newline: ended here
                for line in splitter.feed(b"\n"):
                    await take(line)
            tail = splitter.end()  # a last line without its newline is still a message
            if tail is not None and tail.strip():
                await handle(tail)
            with anyio.move_on_after(drain_s):
                await owed.settled.wait()
            await abandon()

    async def abandon() -> None:
        """Answer what is still owed ourselves; the SDK's own late answers are dropped."""
        remaining = owed.remaining()
        if remaining:
            log.warning("mcp.requests.abandoned", count=len(remaining), drain_s=drain_s)
        stop = ShuttingDown(f"hostd mcp: stdin closed; not answered within {drain_s:g} s")
        for id_ in remaining:
            owed.settle(id_)
            await answer(id_, error_reply(stop, id_))

    async def write_out() -> None:
        async with outbox_receive:
            async for item in outbox_receive:
                message = item.message
                if isinstance(message, types.JSONRPCResponse | types.JSONRPCError):
                    if message.id is not None and not owed.settle(message.id):
                        # Settled already: cancelled by the client, or answered at the end.
                        log.info("mcp.reply.dropped")
                        continue
                    if message.id is not None and coerce_request_id(message.id) in in_batch:
                        reply = message.model_dump(mode="json", by_alias=True, exclude_unset=True)
                        await answer(message.id, reply)
                        continue
                elif _progress_of_settled(item, owed):
                    log.info("mcp.progress.dropped")
                    continue
                data = message.model_dump_json(by_alias=True, exclude_unset=True)
                await write(data.encode() + b"\n")

    async with anyio.create_task_group() as tg:
        tg.start_soon(read_in)
        tg.start_soon(write_out)
        async with outbox:
            await run(inbox, outbox)
