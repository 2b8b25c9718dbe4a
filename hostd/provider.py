"""The provider-side runtime: a Python CGP provider as a small class plus ``run_stdio``.

Owns the JSON-RPC provider binding (protocol.md §1) from the provider's side:
``context/handshake`` (H1/H3 version-family check), ``context/query``,
``context/verify`` and the ``context/shutdown`` notification, dispatched with
jsonrpcserver. Requests are served concurrently, so a host may pipeline them.
A malformed line or bad request gets a ``bad_request`` error and the provider
keeps serving (R1); it exits on ``context/shutdown`` or stdin EOF (R2).

It also offers the helpers a provider author needs to be honest on the wire:
``make_frame`` computes ``token_cost`` (B3) and ``content_digest`` (D1) from
the content, ``file_provenance`` digests exactly the bytes a range addresses
(F5, F17). This module imports only ``hostd.protocol``; it never touches the
host side (engine, transport, server).
"""

from __future__ import annotations

import asyncio
import gc
import logging
import os
import sys
import threading
import warnings
from collections.abc import Callable, Iterable
from typing import Any

import anyio
import anyio.abc
import orjson
from pydantic import ValidationError
from pydantic_core import from_json, to_json

from hostd.protocol import (
    DEFAULT_MAX_LINE_BYTES,
    EOF,
    INTERNAL_ERROR,
    INVALID_PARAMS,
    INVALID_REQUEST,
    METHOD_NOT_FOUND,
    OVERLONG,
    PARSE_ERROR,
    PROTOCOL_VERSION,
    Capabilities,
    CgpErrorCode,
    ContextFrame,
    ContextQuery,
    ContextQueryResult,
    FrameIdentity,
    FrameVerdict,
    HandshakeAck,
    HandshakeRequest,
    LineItem,
    LinePipeProtocol,
    LineSplitter,
    Provenance,
    ProviderInfo,
    VerifyRequest,
    address_line_range,
    canonical_token_cost,
    sha256_digest,
    versions_compatible,
)

with warnings.catch_warnings():
    # jsonrpcserver 5 reads its schema with the deprecated importlib.resources.read_text;
    # harmless, but it must not break hosts and tests that run with warnings as errors.
    warnings.simplefilter("ignore", DeprecationWarning)
    from jsonrpcserver import (
        Error,
        JsonRpcError,
        Result,
        Success,
        async_dispatch_to_serializable,
    )
    from jsonrpcserver.dispatcher import to_response as _to_response
    from jsonrpcserver.request import Request as _Request
    from jsonrpcserver.response import to_serializable_one as _serializable

#: jsonrpcserver's dispatcher logs a method's unexpected exception here; so does the hot path.
_dispatch_log = logging.getLogger("jsonrpcserver.async_dispatcher")

__all__ = [
    "DEFAULT_MAX_LINE_BYTES",
    "Provider",
    "ProviderRefusal",
    "ProviderServer",
    "file_provenance",
    "make_frame",
    "run_stdio",
    "serve_stdio",
]

_JSONRPC_BAD_INPUT = frozenset({PARSE_ERROR, INVALID_REQUEST, METHOD_NOT_FOUND, INVALID_PARAMS})


class ProviderRefusal(Exception):  # noqa: N818 - a refusal is the outcome, not a bug
    """Raise from ``query``/``verify`` to answer with a coded CGP error instead of frames."""

    def __init__(self, message: str, code: CgpErrorCode = CgpErrorCode.BAD_REQUEST) -> None:
        super().__init__(message)
        self.message = message
        self.code = code


class Provider:
    """Base class of a Python provider. Set ``info`` and ``capabilities``; implement ``query``.

    ``info``/``capabilities`` may be class attributes or set in ``__init__``.
    ``verify`` is optional: the default vouches for nothing (every verdict
    ``unknown``), so the host re-queries (V2).
    """

    info: ProviderInfo
    capabilities: Capabilities = Capabilities()

    async def query(self, query: ContextQuery) -> list[ContextFrame] | ContextQueryResult:
        raise NotImplementedError

    async def verify(self, frames: list[FrameIdentity]) -> list[FrameVerdict]:
        return [FrameVerdict(frame=f, status="unknown") for f in frames]


# --- helpers for provider authors ---------------------------------------------------


def make_frame(
    *,
    id: str,  # noqa: A002 - the wire name
    kind: str,
    title: str,
    content: str,
    citation_label: str,
    score: float = 0.5,
    uri: str | None = None,
    provenance: Iterable[Provenance] = (),
    **extra: Any,
) -> ContextFrame:
    """A full frame whose ``token_cost`` (B3) and ``content_digest`` (D1) are computed, not guessed.

    ``extra`` takes any other ``ContextFrame`` member (``valid_from``, ``relations``, …).
    """
    return ContextFrame(
        id=id,
        kind=kind,
        title=title,
        content=content,
        content_digest=sha256_digest(content.encode("utf-8")),
        uri=uri,
        score=score,
        token_cost=canonical_token_cost(content),
        provenance=list(provenance),
        citation_label=citation_label,
        **extra,
    )


def file_provenance(
    uri: str,
    data: bytes,
    range: str | None = None,  # noqa: A002 - the wire name
    *,
    method: str | None = None,
    by: str | None = None,
) -> Provenance:
    """``file`` provenance whose digest covers exactly the bytes ``range`` addresses (F5, F17).

    Raises ``UnverifiableRange`` when the range addresses nothing (rather than
    silently digesting the whole file).
    """
    digest = sha256_digest(address_line_range(data, range))
    return Provenance(type="file", uri=uri, range=range, digest=digest, method=method, by=by)


# --- the JSON-RPC dispatcher ---------------------------------------------------------


class _Refused(Exception):
    """A request answered with an error (its jsonrpcserver ``Result``)."""

    def __init__(self, code: CgpErrorCode, message: str) -> None:
        super().__init__(message)
        self.result = _error(code, message)


def _failure(exc: Exception) -> Result:
    """The error answering a request whose method raised ``exc``: a refusal's own, or
    what jsonrpcserver's ``call`` makes of an exception (and logs, when unexpected)."""
    if isinstance(exc, _Refused):
        return exc.result
    if isinstance(exc, JsonRpcError):
        return Error(exc.code, exc.message, exc.data)
    _dispatch_log.exception(exc)
    return Error(INTERNAL_ERROR, "Internal error", str(exc))


def _error(code: CgpErrorCode, message: str) -> Result:
    return Error(code.jsonrpc_code, message, {"cgp_code": code.value})


def _ensure_cgp_code(reply: dict[str, Any]) -> dict[str, Any]:
    """Every error reply carries ``data.cgp_code``: bad input is ``bad_request`` (R1)."""
    err = reply.get("error")
    if not isinstance(err, dict):
        return reply
    data = err.get("data")
    if isinstance(data, dict) and "cgp_code" in data:
        return reply
    code = err.get("code")
    cgp = CgpErrorCode.BAD_REQUEST if code in _JSONRPC_BAD_INPUT else CgpErrorCode.INTERNAL
    err["data"] = {"cgp_code": cgp.value, **({"detail": data} if data is not None else {})}
    return reply


class ProviderServer:
    """Dispatches JSON-RPC lines to a ``Provider``; transport-free so tests can drive it in memory.

    ``shutdown_requested`` is set by the ``context/shutdown`` notification.
    """

    def __init__(self, provider: Provider) -> None:
        self.provider = provider
        self.shutdown_requested = anyio.Event()
        self.methods = {
            "context/handshake": self._handshake,
            "context/query": self._query,
            "context/verify": self._verify,
            "context/shutdown": self._shutdown,
        }

    async def handle_line(self, line: bytes | str) -> bytes | None:
        """The reply line (UTF-8, no newline) to one input line; ``None`` for a notification."""
        reply: Any
        fast = _fast_query_request(line)
        if fast is not None:
            # The hot path: one well-formed context/query, answered with the reply dict
            # jsonrpcserver would serialise, without its per-request layers (JSON
            # re-parse, gather, signature binding, Either wrapping, named-tuple copies).
            # Its results stay plain dicts; an error takes jsonrpcserver's own mapping.
            key, params = fast
            try:
                reply = {"jsonrpc": "2.0", "result": await self._answer(params), "id": key}
            except Exception as exc:
                reply = _serializable(_to_response(_Request("", params, key), _failure(exc)))
        else:
            text = line.decode("utf-8", errors="replace") if isinstance(line, bytes) else line
            if not text.strip():
                return None
            reply = await async_dispatch_to_serializable(
                text, self.methods, validator=_validate_request
            )
        if reply is None:
            return None
        if isinstance(reply, list):
            reply = [_ensure_cgp_code(r) for r in reply]
        else:
            reply = _ensure_cgp_code(reply)
        try:
            return _encode(reply)
        except Exception as exc:  # a value the provider returned has no JSON form
            sys.stderr.write(f"provider reply not serialisable: {exc}\n")
            ids = [r.get("id") for r in reply] if isinstance(reply, list) else [reply.get("id")]
            errors = [
                {
                    "jsonrpc": "2.0",
                    "error": {
                        "code": CgpErrorCode.INTERNAL.jsonrpc_code,
                        "message": "reply could not be encoded",
                        "data": {"cgp_code": CgpErrorCode.INTERNAL.value},
                    },
                    "id": i,
                }
                for i in ids
            ]
            return to_json(errors if isinstance(reply, list) else errors[0])

    async def _handshake(self, **params: Any) -> Result:
        try:
            req = HandshakeRequest.model_validate(params)
        except ValidationError as exc:
            return _error(CgpErrorCode.BAD_REQUEST, f"bad handshake params: {exc.errors()[0]}")
        # H1/H3: a different major family is a named error, never a hang.
        if not versions_compatible(PROTOCOL_VERSION, req.protocol_version):
            return _error(
                CgpErrorCode.INCOMPATIBLE_VERSION,
                f"provider speaks {PROTOCOL_VERSION}, host asked for {req.protocol_version}",
            )
        ack = HandshakeAck(
            protocol_version=PROTOCOL_VERSION,
            provider=self.provider.info,
            capabilities=self.provider.capabilities,
        )
        return Success(ack.to_wire())

    async def _query(self, **params: Any) -> Result:
        try:
            return Success(await self._answer(params))
        except _Refused as refused:
            return refused.result

    async def _answer(self, params: dict[str, Any]) -> dict[str, Any]:
        """The ``context/query`` result; raises ``_Refused`` with the error to answer."""
        try:
            query = ContextQuery.model_validate(params.get("query"))
        except ValidationError as exc:
            raise _Refused(CgpErrorCode.BAD_REQUEST, f"bad query: {_first_error(exc)}") from None
        try:
            out = await self.provider.query(query)
        except ProviderRefusal as exc:
            raise _Refused(exc.code, exc.message) from None
        if isinstance(out, ContextQueryResult):
            # Frames are usually wire dicts already; a pydantic dump of list[Any] would
            # only copy them (it is the provider's hot path).
            result: dict[str, Any] = {
                "frames": _frames_to_wire(out.frames),
                "truncated": out.truncated,
            }
            if out.dropped_estimate is not None:
                result["dropped_estimate"] = out.dropped_estimate
            return result
        return {"frames": _frames_to_wire(out), "truncated": False}

    async def _verify(self, **params: Any) -> Result:
        try:
            req = VerifyRequest.model_validate(params)
        except ValidationError as exc:
            return _error(CgpErrorCode.BAD_REQUEST, f"bad verify request: {_first_error(exc)}")
        try:
            verdicts = await self.provider.verify(list(req.frames))
        except ProviderRefusal as exc:
            return _error(exc.code, exc.message)
        return Success({"verdicts": [v.to_wire() for v in verdicts]})

    async def _shutdown(self, **params: Any) -> Result:
        self.shutdown_requested.set()
        return Success(None)


def _fast_query_request(line: bytes | str) -> tuple[int | str, dict[str, Any]] | None:
    """``(id, params)`` of a line that is exactly one well-formed ``context/query`` request
    (an object with jsonrpc "2.0", an integer or string id, object params); ``None`` for
    anything else, which the full dispatcher handles (batches, notifications, bad input)."""
    if not isinstance(line, bytes) or b'"context/query"' not in line:
        return None
    try:
        msg = from_json(line)
    except ValueError:
        return None
    if type(msg) is not dict or msg.get("jsonrpc") != "2.0":
        return None
    if msg.get("method") != "context/query":
        return None
    key = msg.get("id")
    params = msg.get("params", {})
    if (type(key) is not int and type(key) is not str) or type(params) is not dict:
        return None
    return key, params


def _validate_request(request: Any) -> Any:
    """The JSON-RPC 2.0 request shape, checked by hand (jsonschema costs ~0.5 ms a call).

    Raising makes jsonrpcserver answer ``Invalid Request`` (then ``bad_request``, R1).
    """
    items = request if isinstance(request, list) else [request]
    if not items:
        raise ValueError("empty batch")
    for item in items:
        if not isinstance(item, dict) or item.get("jsonrpc") != "2.0":
            raise ValueError("not a JSON-RPC 2.0 request")
        if not isinstance(item.get("method"), str):
            raise ValueError("method must be a string")
        if "params" in item and not isinstance(item["params"], dict | list):
            raise ValueError("params must be an object or an array")
        if (
            "id" in item
            and not (item["id"] is None or isinstance(item["id"], str | int | float))
            or isinstance(item.get("id"), bool)
        ):
            raise ValueError("id must be a string, a number or null")
    return request


def _encode(value: Any) -> bytes:
    """A reply as compact UTF-8 JSON. orjson first: on a 50-frame reply it takes about a
    quarter of pydantic-core's time (12 against 47 µs here), and the bytes are the same.
    Whatever orjson refuses (an integer past 64 bits, a pydantic model, a non-string key)
    goes to pydantic-core's encoder, which knows more types; what neither can encode
    raises, and the caller answers ``internal``."""
    try:
        return orjson.dumps(value)
    except TypeError:  # orjson.JSONEncodeError is a TypeError
        return to_json(value)


def _frames_to_wire(frames: Iterable[ContextFrame | dict[str, Any]]) -> list[Any]:
    """Frames as wire dicts. Dicts pass as they are; when every frame is one (the usual
    case) the type check runs in C, with no Python call per frame."""
    frames = list(frames)
    if set(map(type, frames)) <= {dict}:
        return frames
    return [f if isinstance(f, dict) else f.to_wire() for f in frames]


def _first_error(exc: ValidationError) -> str:
    err = exc.errors()[0]
    loc = ".".join(str(p) for p in err["loc"]) or "<root>"
    return f"{loc}: {err['msg']}"


# --- stdio ---------------------------------------------------------------------------


def _read_in_thread(fd: int, splitter: LineSplitter, deliver: Callable[[LineItem], None]) -> None:
    """Fallback for a stdin that is not a pipe (a regular file): a daemon reader thread
    on the raw descriptor, so shutdown never waits for it."""
    while True:
        try:
            chunk = os.read(fd, 65536)
        except OSError:
            chunk = b""
        if chunk:
            items = splitter.feed(chunk)
        else:
            tail = splitter.end()  # a final line without its newline still counts
            items = [EOF] if tail is None else [tail, EOF]
        try:
            for item in items:
                deliver(item)
        except RuntimeError:  # the event loop is closed: the provider is exiting
            return
        if not chunk:
            return


async def serve_stdio(
    provider: Provider,
    *,
    stdin: int | None = None,
    stdout: Any = None,
    max_line_bytes: int = DEFAULT_MAX_LINE_BYTES,
) -> None:
    """Serve ``provider`` on the ``stdin`` descriptor and binary ``stdout`` until shutdown or EOF.

    Each request runs in its own task, started straight from the pipe's read
    callback, so pipelined requests are answered as they finish. A reply is
    written whole, one per line, by one synchronous write (no two can
    interleave). At EOF the replies in flight are still written before the
    provider exits (R2); ``context/shutdown`` cancels them. Reading pauses
    while 64 requests are in flight and resumes below 16 (back-pressure on the
    host). Needs the asyncio backend (jsonrpcserver gathers batches with asyncio).
    """
    server = ProviderServer(provider)
    fd = stdin if stdin is not None else sys.stdin.fileno()
    dst = stdout if stdout is not None else sys.stdout.buffer
    loop = asyncio.get_running_loop()
    splitter = LineSplitter(max_line_bytes)
    eof = anyio.Event()
    pipe: LinePipeProtocol | None = None
    in_flight = 0
    paused = False
    ended = False  # EOF seen, or serving is over: late input is dropped

    def write(data: bytes) -> None:
        try:
            dst.write(data + b"\n")
            dst.flush()
        except (BrokenPipeError, ConnectionResetError, ValueError):
            # The host stopped reading (or closed our stdout): nobody is left to
            # answer. Stop quietly (R2) and point the descriptor at /dev/null so the
            # interpreter's final flush cannot fail loudly either.
            _silence(dst)
            server.shutdown_requested.set()

    def finished() -> None:
        nonlocal in_flight, paused
        in_flight -= 1
        if paused and in_flight < 16 and pipe is not None and pipe.transport is not None:
            paused = False
            pipe.transport.resume_reading()

    async def answer(line: bytes) -> None:
        try:
            reply = await server.handle_line(line)
            if reply is not None:
                write(reply)
        finally:
            finished()

    async def too_long() -> None:
        # R1: an over-long line is bad input, answered and skipped, never buffered whole.
        finished()
        error = {
            "code": INVALID_REQUEST,
            "message": f"line longer than {max_line_bytes} bytes",
            "data": {"cgp_code": CgpErrorCode.BAD_REQUEST.value},
        }
        write(to_json({"jsonrpc": "2.0", "error": error, "id": None}))

    async def stop_on_shutdown(scope: anyio.CancelScope) -> None:
        await server.shutdown_requested.wait()
        scope.cancel()

    # Answers are plain asyncio tasks, started straight from the pipe's read callback:
    # an anyio task group's per-task bookkeeping (a cancel scope, an event, backend
    # look-ups) costs about 0.1 ms of a provider's CPU per request here, and this
    # runtime needs the asyncio backend anyway. The set holds them; EOF awaits them
    # (R2), a shutdown cancels them, and an exception escaping one (a bug: provider
    # errors are already answered as errors) ends the provider loudly, as before.
    answers: set[asyncio.Task[None]] = set()
    crashed: list[BaseException] = []

    def answer_done(task: asyncio.Task[None]) -> None:
        answers.discard(task)
        if not task.cancelled() and task.exception() is not None:
            crashed.append(task.exception())  # type: ignore[arg-type]
            server.shutdown_requested.set()

    def deliver(item: LineItem) -> None:
        nonlocal in_flight, paused, ended
        if ended:
            return
        if item is EOF:
            ended = True
            eof.set()
            return
        in_flight += 1
        if item is OVERLONG:
            task = loop.create_task(too_long())
        else:
            assert isinstance(item, bytes)
            task = loop.create_task(answer(item))
        answers.add(task)
        task.add_done_callback(answer_done)
        if in_flight >= 64 and not paused and pipe is not None and pipe.transport:
            paused = True
            pipe.transport.pause_reading()

    transport: asyncio.BaseTransport | None = None
    stdin_file = os.fdopen(fd, "rb", buffering=0, closefd=False)
    try:
        async with anyio.create_task_group() as serving:
            serving.start_soon(stop_on_shutdown, serving.cancel_scope)
            try:
                transport, pipe = await loop.connect_read_pipe(
                    lambda: LinePipeProtocol(splitter, deliver, keep_unterminated=True),
                    stdin_file,
                )
            except (ValueError, OSError):  # not a pipe, socket or character device
                threading.Thread(
                    target=_read_in_thread,
                    args=(fd, splitter, lambda item: loop.call_soon_threadsafe(deliver, item)),
                    name="provider-stdin",
                    daemon=True,
                ).start()
            await eof.wait()
            while answers:  # EOF: the replies in flight are still written (R2)
                await asyncio.wait(set(answers))
            serving.cancel_scope.cancel()  # every answer written: stop the watcher
    finally:
        # Nothing more starts; a shutdown (or a failure) cancels what is in flight. The
        # pipe's last callbacks (its closing included) find ``ended`` set.
        ended = True
        for task in answers:
            task.cancel()
        with anyio.CancelScope(shield=True):
            while answers:
                await asyncio.wait(set(answers))
        if transport is not None:
            transport.close()
        stdin_file.close()
    if crashed:
        raise crashed[0]


def _silence(stream: Any) -> None:
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        try:
            os.dup2(devnull, stream.fileno())
        finally:
            os.close(devnull)
    except (OSError, ValueError, AttributeError):  # not a real descriptor (tests' buffers)
        pass


def run_stdio(provider: Provider, *, max_line_bytes: int = DEFAULT_MAX_LINE_BYTES) -> None:
    """Run ``provider`` on the JSON-RPC binding over stdin/stdout; returns on shutdown or EOF."""
    anyio.run(_serve, provider, max_line_bytes, backend="asyncio")


async def _serve(provider: Provider, max_line_bytes: int) -> None:
    # The process is this provider's: move its start-up objects (modules, schemas, the
    # provider's own index) out of the collector's view, so no full collection walks
    # them again between two replies.
    gc.collect()
    gc.freeze()
    await serve_stdio(provider, max_line_bytes=max_line_bytes)
