"""The one JSON-RPC 2.0 envelope and dispatcher, shared by the daemon and the provider runtime.

Owns what both answering ends of a JSON-RPC wire do alike: decoding a line
(orjson, strict: ``NaN``, ``Infinity``, numbers past a double, invalid UTF-8 and
lone surrogates are parse errors, so an id like ``1e400`` is never echoed as
``Infinity``), the request shape check, the one error boundary each method is
wrapped in (params validated into a pydantic model first; every exception leaves
through ``hostd.errors.error_to_wire``), and encoding replies (orjson).

Dispatch is jsonrpcserver's public ``async_dispatch_to_serializable`` with an
explicit methods dict, our validator, and an identity deserializer: callers
decode first, because a connection reads a message's shape (batch,
``$/cancel``, ``$/authenticate``) before dispatching it. jsonrpcserver gathers
batches with asyncio, so run anyio on the asyncio backend.

Imports only ``hostd.errors`` and ``hostd.protocol`` (plus jsonrpcserver, orjson,
pydantic): ``hostd.server`` and ``hostd.provider`` both build on it.
"""

from __future__ import annotations

import inspect
import logging
import warnings
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any

import orjson
from pydantic import BaseModel, ValidationError

from hostd.errors import HostdError, InvalidParam, InvalidRequest, ParseError, error_to_wire
from hostd.protocol import (
    INVALID_PARAMS,
    INVALID_REQUEST,
    METHOD_NOT_FOUND,
    PARSE_ERROR,
    CgpErrorCode,
)

with warnings.catch_warnings():
    # jsonrpcserver 5 reads its schema with the deprecated importlib.resources.read_text;
    # harmless, but it must not break runs with warnings as errors.
    warnings.simplefilter("ignore", DeprecationWarning)
    from jsonrpcserver import Error, JsonRpcError, Result, Success, async_dispatch_to_serializable

__all__ = [
    "Dispatcher",
    "Handler",
    "Method",
    "OnError",
    "decode",
    "encode",
    "encode_reply",
    "error_reply",
    "reply_id",
    "validate_request",
]

#: A method's body: ``(context, params model) -> result`` (anything ``encode`` takes).
Handler = Callable[[Any, Any], Awaitable[Any]]
#: Told of every exception a method raised, by method name (for the caller's log).
OnError = Callable[[str, BaseException], None]

_log = logging.getLogger("hostd.rpc")


@dataclass(frozen=True, slots=True)
class Method:
    """One JSON-RPC method: the model its params are validated into, and its body."""

    params: type[BaseModel]
    handler: Handler


# -- the envelope ------------------------------------------------------------------------


def decode(line: bytes | str) -> Any:
    """One JSON value from a line; ``ParseError`` for anything that is not strict JSON."""
    try:
        return orjson.loads(line)
    except orjson.JSONDecodeError as exc:  # also invalid UTF-8, deep nesting, 1e400
        raise ParseError(f"Parse error: {exc}") from None


def _default(value: Any) -> Any:
    if isinstance(value, BaseModel):
        to_wire = getattr(value, "to_wire", None)
        return to_wire() if callable(to_wire) else value.model_dump(mode="json")
    raise TypeError(f"{type(value).__name__} has no JSON form")


def encode(value: Any) -> bytes:
    """Compact UTF-8 JSON (no newline: a string's control characters are escaped).

    Raises ``TypeError`` for what has no JSON form (an integer past 64 bits, a lone
    surrogate, an object other than a pydantic model)."""
    return orjson.dumps(value, default=_default, option=orjson.OPT_NON_STR_KEYS)


def error_reply(exc: BaseException, id_: Any = None) -> dict[str, Any]:
    """The JSON-RPC error response for ``exc`` (through the one ``error_to_wire``)."""
    return {"jsonrpc": "2.0", "error": error_to_wire(exc), "id": id_}


def encode_reply(reply: Any, on_error: OnError | None = None) -> bytes:
    """``reply`` encoded; a result with no JSON form becomes an ``internal`` error for
    each id it answered (the request is answered, never dropped). A message that is
    not a reply (a notification) with no JSON form raises ``TypeError``."""
    try:
        return encode(reply)
    except TypeError as exc:  # orjson.JSONEncodeError is a TypeError
        replies = reply if isinstance(reply, list) else [reply]
        if not all(isinstance(r, dict) and "id" in r for r in replies):
            raise
        (on_error or _log_unexpected)("encode", exc)
        errors = [error_reply(exc, r["id"]) for r in replies]
        return encode(errors if isinstance(reply, list) else errors[0])


_REQUEST_KEYS = frozenset({"jsonrpc", "method", "id", "params"})


def _valid_id(value: Any) -> bool:
    # A string, an integer or null. A number with a fraction SHOULD NOT be an id
    # (JSON-RPC 2.0 §4); refusing every float also refuses an integer past 64 bits,
    # which orjson reads as a rounded float and which could only be echoed wrong.
    return value is None or (isinstance(value, str | int) and not isinstance(value, bool))


def _check(item: Any) -> None:
    if not isinstance(item, dict) or item.get("jsonrpc") != "2.0":
        raise InvalidRequest("not a JSON-RPC 2.0 request")
    if not isinstance(item.get("method"), str) or not _REQUEST_KEYS.issuperset(item):
        raise InvalidRequest("method must be a string; no members beyond the four")
    if "id" in item and not _valid_id(item["id"]):
        raise InvalidRequest("id must be a string, an integer or null")
    if "params" in item and not isinstance(item["params"], dict | list):
        raise InvalidRequest("params must be an object or an array")


def validate_request(request: Any) -> Any:
    """The JSON-RPC 2.0 request (or batch) shape, checked by hand: jsonrpcserver's default
    validator runs a jsonschema pass per request. Raising means Invalid Request."""
    items = request if isinstance(request, list) else [request]
    if not items:
        raise InvalidRequest("empty batch")
    for item in items:
        _check(item)
    return request


def reply_id(msg: Any) -> Any:
    """The id an error about ``msg`` is answered with: its own when valid, else null."""
    if isinstance(msg, dict) and _valid_id(msg.get("id")):
        return msg.get("id")
    return None


# -- jsonrpcserver's own errors get our data shape ----------------------------------------

_OWN_REASONS = {
    PARSE_ERROR: "parse_error",
    INVALID_REQUEST: "invalid_request",
    METHOD_NOT_FOUND: "method_not_found",
    INVALID_PARAMS: "invalid_params",
}


def _coded(reply: dict[str, Any]) -> dict[str, Any]:
    """Every error reply carries ``data.reason`` and ``data.cgp_code``: the ones
    jsonrpcserver makes itself (unknown method, bad shape) are bad input (R1)."""
    err = reply.get("error")
    if not isinstance(err, dict):
        return reply
    data = err.get("data")
    if isinstance(data, dict) and "cgp_code" in data:
        return reply
    reason = _OWN_REASONS.get(err.get("code"))  # type: ignore[arg-type]  # any peer int
    if reason is None:  # an error of the library itself: its detail stays in the log
        err["data"] = {"reason": "internal", "cgp_code": CgpErrorCode.INTERNAL.value}
    else:
        err["data"] = {"reason": reason, "cgp_code": CgpErrorCode.BAD_REQUEST.value}
        if data is not None:
            err["data"]["detail"] = data
    return reply


def _log_unexpected(method: str, exc: BaseException) -> None:
    if not isinstance(exc, HostdError | ValidationError):
        _log.error("method %s failed", method, exc_info=exc)


def _identity(value: Any) -> Any:
    return value


# -- the dispatcher ----------------------------------------------------------------------


class Dispatcher:
    """Methods by name, each wrapped once in the error boundary; ``dispatch`` answers a
    decoded request (or batch) with its reply dict(s), ``None`` when nothing is owed."""

    def __init__(self, methods: Mapping[str, Method], *, on_error: OnError | None = None):
        self._on_error = on_error if on_error is not None else _log_unexpected
        self.methods = {name: self._bound(name, method) for name, method in methods.items()}

    def _bound(self, name: str, method: Method) -> Callable[..., Awaitable[Result]]:
        on_error = self._on_error
        model = method.params
        handler = method.handler

        async def call(context: Any, *args: Any, **kwargs: Any) -> Result:
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
        # jsonrpcserver binds the params against the signature on every request; a
        # precomputed one is an attribute read instead of an introspection.
        call.__signature__ = inspect.signature(call)  # type: ignore[attr-defined]  # read by inspect
        return call

    async def dispatch(self, request: Any, context: Any) -> Any:
        """The reply to one decoded request or batch (``None`` for notifications only)."""
        reply = await async_dispatch_to_serializable(
            request,
            self.methods,
            context=context,
            deserializer=_identity,
            validator=validate_request,
        )
        if isinstance(reply, list):
            return [_coded(r) for r in reply]
        return None if reply is None else _coded(reply)

    async def answer_line(self, line: bytes | str, context: Any) -> bytes | None:
        """Decode, dispatch and encode one line: the reply line (no newline) or ``None``."""
        try:
            request = decode(line)
        except ParseError as exc:
            return self.encode_reply(error_reply(exc))
        reply = await self.dispatch(request, context)
        return None if reply is None else self.encode_reply(reply)

    def encode_reply(self, reply: Any) -> bytes:
        """``encode_reply`` with this dispatcher's error hook."""
        return encode_reply(reply, self._on_error)
