"""The dispatcher: jsonrpcserver, called through its public API, with one error boundary.

Dispatch is jsonrpcserver's ``async_dispatch_to_response`` with an explicit
methods dict, our request-shape validator, an identity deserializer (callers
decode first: a connection reads a message's shape, batch, ``$/cancel`` or
``$/authenticate``, before dispatching it), and a ``post_process`` that renders each
response in hostd's wire form once: every error reply carries ``data.reason``
and ``data.cgp_code``, the ones jsonrpcserver makes itself (unknown method,
bad shape) included. Each method is wrapped once in the boundary: params are
validated into its pydantic model, and every exception leaves through
``hostd.errors.error_to_wire``. jsonrpcserver gathers batches with asyncio, so
run anyio on the asyncio backend.

What jsonrpcserver does not do (line limits, auth, cancellation, refusing
nested batches) is done once, at the connection edge (``hostd.server``'s
connection, the provider runtime's stdio loop).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any

from jsonrpcserver import Error, JsonRpcError, Result, Success, async_dispatch_to_response
from pydantic import BaseModel

from hostd.errors import InvalidParam, ParseError, error_to_wire
from hostd.protocol import (
    INVALID_PARAMS,
    INVALID_REQUEST,
    METHOD_NOT_FOUND,
    PARSE_ERROR,
    CgpErrorCode,
)

from ._envelope import OnError, decode, encode_reply, error_reply, log_unexpected, validate_request

__all__ = ["Dispatcher", "Handler", "Method"]

#: A method's body: ``(context, params model) -> result`` (anything ``encode`` takes).
Handler = Callable[[Any, Any], Awaitable[Any]]


@dataclass(frozen=True, slots=True)
class Method:
    """One JSON-RPC method: the model its params are validated into, and its body."""

    params: type[BaseModel]
    handler: Handler


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


def _to_wire(response: Any) -> dict[str, Any]:
    """jsonrpcserver's ``post_process``: one response (its ``Either``) as the reply dict.

    ``Right`` holds a ``SuccessResponse``, ``Left`` an ``ErrorResponse`` (named
    tuples); oslash's ``Either`` has no public accessor, so this reads its slot as
    jsonrpcserver's own ``to_serializable`` does."""
    if hasattr(response, "_error"):
        err = response._error
        data = err.data
        if not (isinstance(data, dict) and "cgp_code" in data):  # made by the library
            data = _own_error_data(err.code, data)
        return {
            "jsonrpc": "2.0",
            "error": {"code": err.code, "message": err.message, "data": data},
            "id": err.id,
        }
    ok = response._value
    return {"jsonrpc": "2.0", "result": ok.result, "id": ok.id}


def _as_decoded(value: Any) -> Any:
    return value


class Dispatcher:
    """Methods by name, each wrapped once in the error boundary; ``dispatch`` answers a
    decoded request (or batch) with its reply dict(s), ``None`` when nothing is owed."""

    def __init__(self, methods: Mapping[str, Method], *, on_error: OnError | None = None):
        self._on_error = on_error if on_error is not None else log_unexpected
        self.methods = {name: self._bound(name, method) for name, method in methods.items()}

    def _bound(self, name: str, method: Method) -> Callable[..., Awaitable[Result]]:
        on_error = self._on_error
        model = method.params
        handler = method.handler

        async def call(context: Any, *args: Any, **kwargs: Any) -> Result:
            # Positional params reach the body, so the boundary answers them, by name.
            try:
                if args:
                    raise InvalidParam(
                        "invalid params: params must be an object (by name), not an array",
                        field="params",
                    )
                return Success(await handler(context, model.model_validate(kwargs)))
            except JsonRpcError as exc:  # jsonrpcserver's public way to answer an error
                return Error(exc.code, exc.message, exc.data)
            except Exception as exc:  # the boundary: nothing escapes a method as a crash
                on_error(name, exc)
                wire = error_to_wire(exc)
                return Error(wire["code"], wire["message"], wire["data"])

        call.__name__ = call.__qualname__ = name
        return call

    async def dispatch(self, request: Any, context: Any) -> Any:
        """The reply to one decoded request or batch (``None`` for notifications only)."""
        return await async_dispatch_to_response(
            request,
            self.methods,
            context=context,
            deserializer=_as_decoded,
            validator=validate_request,
            post_process=_to_wire,
        )

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
