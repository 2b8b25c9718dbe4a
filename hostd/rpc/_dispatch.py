"""The dispatchers: jsonrpcserver at the wire, a direct one in-process; one error boundary.

``Dispatcher`` is jsonrpcserver's ``async_dispatch_to_serializable``, called
through its public API (``_wire``): an explicit methods dict, our request-shape
validator, an identity deserializer (callers decode first: a connection reads a
message's shape, batch, ``$/cancel`` or ``$/authenticate``, before dispatching
it). jsonrpcserver (and the jsonschema it loads) is imported by the first request
a ``Dispatcher`` answers, not with this package: building one (the daemon's
method table, a provider's) and every in-process caller cost no more than the
direct dispatcher. Its serializable replies are rendered in hostd's wire form
once: every error reply carries ``data.reason`` and ``data.cgp_code``, the ones
jsonrpcserver makes itself (unknown method, bad shape) included. jsonrpcserver
gathers batches with asyncio, so run anyio on the asyncio backend.

``DirectDispatcher`` serves the same methods to an in-process caller (the
MCP SDK's direct dispatcher is the model): no envelope, no library in between;
a failure is raised as the ``RpcError`` a client of the wire would get.

Each method is wrapped once in the boundary (``Method.invoke``): params are
validated into its pydantic model, and every exception leaves through
``hostd.errors.error_to_wire``. What jsonrpcserver does not do (line limits,
auth, cancellation, refusing nested batches) is done once, at the connection
edge (``hostd.server``'s connection, the provider runtime's stdio loop).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel

from hostd.errors import EmptyBatch, InvalidParam, ParseError, RpcError, error_to_wire
from hostd.protocol import (
    INVALID_PARAMS,
    INVALID_REQUEST,
    METHOD_NOT_FOUND,
    PARSE_ERROR,
    CgpErrorCode,
)

from ._envelope import (
    BY_NAME,
    OnError,
    decode,
    encode_reply,
    error_reply,
    log_unexpected,
    reply_id,
    request_problem,
    tag_request,
    validate_params,
)

__all__ = ["DirectDispatcher", "Dispatcher", "Handler", "Method"]

#: A method's body: ``(context, params model) -> result`` (anything ``encode`` takes).
Handler = Callable[[Any, Any], Awaitable[Any]]


@dataclass(frozen=True, slots=True)
class Method:
    """One JSON-RPC method: the model its params are validated into, and its body."""

    params: type[BaseModel]
    handler: Handler

    async def invoke(self, context: Any, params: Mapping[str, Any] | None) -> Any:
        """The body on ``params`` validated into the model (``InvalidParam``: −32602)."""
        return await self.handler(context, validate_params(self.params, params or {}))


# jsonrpcserver's own errors (it answers these before any method runs) are bad input (R1).
_OWN_REASONS = {
    PARSE_ERROR: "parse_error",
    INVALID_REQUEST: "invalid_request",
    METHOD_NOT_FOUND: "method_not_found",
    INVALID_PARAMS: "invalid_params",
}


def _own_error_data(code: int, data: Any) -> dict[str, Any]:
    reason = _OWN_REASONS.get(code)
    if reason is None:  # an error of the library itself: its detail stays in its log
        return {"reason": "internal", "cgp_code": CgpErrorCode.INTERNAL.value}
    out: dict[str, Any] = {"reason": reason, "cgp_code": CgpErrorCode.BAD_REQUEST.value}
    if isinstance(data, str | int | float | list | dict):  # not jsonrpcserver's NODATA
        out["detail"] = data
    return out


def _rendered(reply: dict[str, Any]) -> dict[str, Any]:
    """One serializable reply in hostd's wire form: an error jsonrpcserver made itself
    gets ``data.reason`` and ``data.cgp_code`` (the boundary's errors carry them)."""
    error = reply.get("error")
    if error is not None:
        data = error.get("data")
        if not (isinstance(data, dict) and "cgp_code" in data):  # made by the library
            error["data"] = _own_error_data(error["code"], data)
    return reply


#: ``_wire.serializable``: a decoded request, the bound methods, the context → its reply.
_Serve = Callable[[Any, dict[str, Callable[..., Awaitable[Any]]], Any], Awaitable[Any]]


class Dispatcher:
    """Methods by name, each wrapped once in the error boundary; ``dispatch`` answers a
    decoded request (or batch) with its reply dict(s), ``None`` when nothing is owed."""

    def __init__(self, methods: Mapping[str, Method], *, on_error: OnError | None = None):
        self._on_error = on_error if on_error is not None else log_unexpected
        self.methods = dict(methods)
        #: The methods wrapped for jsonrpcserver and its dispatch, made by the first
        #: ``dispatch`` (an import per request would cost every request a lookup).
        self._bound: dict[str, Callable[..., Awaitable[Any]]] = {}
        self._serve: _Serve | None = None

    async def dispatch(self, request: Any, context: Any) -> Any:
        """The reply to one decoded request or batch (``None`` for notifications only).

        The shape is checked here, before jsonrpcserver sees it: its validator hook
        answers any refusal with ``id: null`` and words of its own, so a client that
        matches replies by id would never see the answer to a request it sent with a
        valid id. Here an invalid request (each invalid member of a batch) is answered
        under its own id when that id is valid (JSON-RPC 2.0 §5: null only when it
        cannot be read), naming the member that is wrong (``request_problem``)."""
        serve = self._serve
        if serve is None:
            from . import _wire  # jsonrpcserver: loaded by the first request at the wire

            self._bound = {
                name: _wire.bound(name, m.params, m.handler, self._on_error)
                for name, m in self.methods.items()
            }
            serve = self._serve = _wire.serializable
        if not isinstance(request, list):
            problem = request_problem(request)
            if problem is not None:
                return error_reply(problem, reply_id(request))
            if self._positional(request):
                return self._by_name(request)
            reply = await serve(request, self._bound, context)
            return None if reply is None else _rendered(reply)
        if not request:
            return error_reply(EmptyBatch("Invalid Request: empty batch"))
        problems = [request_problem(item) for item in request]
        if not any(problems) and not any(map(self._positional, request)):  # the common case
            reply = await serve(request, self._bound, context)
            return None if reply is None else [_rendered(r) for r in reply]
        # Each invalid member answered under its own id (a notification with array params
        # not at all); the rest served as a batch.
        positional = [
            not problem and self._positional(item)
            for item, problem in zip(request, problems, strict=True)
        ]
        valid = [
            item
            for item, problem, by_position in zip(request, problems, positional, strict=True)
            if not problem and not by_position
        ]
        served = iter(await serve(valid, self._bound, context) or []) if valid else iter(())
        replies = []
        for item, problem, by_position in zip(request, problems, positional, strict=True):
            if problem is not None:
                replies.append(error_reply(problem, reply_id(item)))
            elif by_position:
                if (refused := self._by_name(item)) is not None:
                    replies.append(refused)
            elif "id" in item:  # jsonrpcserver answers the requests, in order, not notifications
                replies.append(_rendered(next(served)))
        return replies

    def _positional(self, request: dict[str, Any]) -> bool:
        """A request (of a shape ``request_problem`` passed) for one of these methods with
        its params in an array: refused by ``_by_name`` (an unknown method is −32601 first)."""
        return isinstance(request.get("params"), list) and request["method"] in self.methods

    def _by_name(self, request: dict[str, Any]) -> dict[str, Any] | None:
        """The refusal of array params, as the method's own (told to ``on_error``); a
        notification gets none."""
        refusal = InvalidParam(BY_NAME, field="params")
        self._on_error(request["method"], refusal)
        return error_reply(refusal, request["id"]) if "id" in request else None

    async def answer(self, request: Any, context: Any, request_id: str) -> tuple[Any, bytes | None]:
        """``dispatch`` and ``encode_reply`` in one call: the reply (for the caller's
        accounting; an error's ``data`` names ``request_id``, ``tag_request``) and its
        line (``None`` when nothing is owed), for an end that writes the line as it is."""
        reply = tag_request(await self.dispatch(request, context), request_id)
        return reply, None if reply is None else self.encode_reply(reply)

    async def answer_line(self, line: bytes | str, context: Any) -> bytes | None:
        """Decode, dispatch and encode one line: the reply line (with its newline) or
        ``None`` when nothing is owed."""
        try:
            request = decode(line)
        except ParseError as exc:  # our message and data, not the library's parse error
            return self.encode_reply(error_reply(exc))
        reply = await self.dispatch(request, context)
        return None if reply is None else self.encode_reply(reply)

    def encode_reply(self, reply: Any) -> bytes:
        """``encode_reply`` with this dispatcher's error hook."""
        return encode_reply(reply, self._on_error)


class DirectDispatcher:
    """The same methods for an in-process caller: no envelope, no library in between.

    ``call`` validates the params into the method's model and awaits its body; a
    failure is told to ``on_error`` and raised as the ``RpcError`` its wire reply
    would carry (chained from the exception), so an in-process session and a
    client of the socket see one error contract."""

    def __init__(self, methods: Mapping[str, Method], *, on_error: OnError | None = None):
        self._on_error = on_error if on_error is not None else log_unexpected
        self.methods = dict(methods)

    async def call(self, name: str, params: Mapping[str, Any] | None, context: Any) -> Any:
        """``name``'s result on ``params``; ``RpcError`` as the wire would answer."""
        method = self.methods.get(name)
        if method is None:
            data = _own_error_data(METHOD_NOT_FOUND, name)
            raise RpcError(METHOD_NOT_FOUND, "Method not found", data)
        try:
            return await method.invoke(context, params)
        except Exception as exc:  # the boundary, as at the wire
            self._on_error(name, exc)
            wire = error_to_wire(exc)
            raise RpcError(wire["code"], wire["message"], wire["data"]) from exc
