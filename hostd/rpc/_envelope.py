"""The JSON-RPC 2.0 envelope: decode a line, encode a message or a line, check a request's shape.

Every end of every JSON-RPC wire hostd speaks (the daemon, the provider runtime,
the provider transport, the client, check-provider) reads and writes through
these functions, so a value is decoded and encoded one way everywhere: orjson,
strict on the way in (``NaN``, ``Infinity``, numbers past a double, invalid UTF-8
and lone surrogates are parse errors, so an id like ``1e400`` is never echoed as
``Infinity``), compact UTF-8 on the way out, one message per line.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from typing import Any, TypeGuard, TypeVar

import orjson
from pydantic import BaseModel, ValidationError

from hostd._param_words import QUOTED, given, quoted
from hostd.errors import (
    EmptyBatch,
    HostdError,
    InvalidRequest,
    ParseError,
    error_to_wire,
    params_refused,
)

__all__ = [
    "OnError",
    "decode",
    "encode",
    "encode_line",
    "encode_reply",
    "error_reply",
    "is_mcp_id",
    "log_unexpected",
    "make_notification",
    "make_request",
    "reply_id",
    "request_line",
    "request_problem",
    "tag_request",
    "validate_params",
    "validate_request",
]

#: Told of every exception a method raised, by method name (for the caller's log).
OnError = Callable[[str, BaseException], None]

_log = logging.getLogger("hostd.rpc")

_Model = TypeVar("_Model", bound=BaseModel)


def validate_params(model: type[_Model], params: Mapping[str, Any]) -> _Model:
    """A method's ``params`` validated into its ``model``; a refusal is ``InvalidParam``
    in words that say what was sent and what the member takes (``params_refused``)."""
    try:
        return model.model_validate(params)
    except ValidationError as exc:
        raise params_refused(model, params, exc) from exc


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


def encode(value: Any, *, strict: bool = False, option: int = 0) -> bytes:
    """Compact UTF-8 JSON (no newline: a string's control characters are escaped);
    pydantic models as their wire form.

    Raises ``TypeError`` for what has no JSON form (an integer past 64 bits, a lone
    surrogate, an object other than a pydantic model). A non-string key is written
    as its text, unless ``strict`` (what a requester sends must be what it meant).
    ``option``: more orjson options (``encode_line``'s newline)."""
    if strict:
        return orjson.dumps(value, default=_default, option=option)
    try:
        # Every key text, the common case: written without OPT_NON_STR_KEYS, which
        # doubles the time of a large reply; the same bytes, since that option changes
        # only keys that are not exactly ``str`` (and without it those raise).
        return orjson.dumps(value, default=_default, option=option)
    except TypeError:
        return orjson.dumps(value, default=_default, option=option | orjson.OPT_NON_STR_KEYS)


def encode_line(message: Any, *, strict: bool = True) -> bytes:
    """The one line encoder: ``message`` as one compact JSON line and its newline (a
    JSON encoder never emits a raw newline; orjson appends it, so a large reply is not
    copied once more to add it). Strict by default: a value JSON-RPC cannot carry as
    given (a non-string key, an integer past 64 bits) raises ``TypeError``
    (``orjson.JSONEncodeError``) before anything is written."""
    return encode(message, strict=strict, option=orjson.OPT_APPEND_NEWLINE)


def make_request(method: str, params: Any, id_: int | str) -> dict[str, Any]:
    """A JSON-RPC request message."""
    return {"jsonrpc": "2.0", "method": method, "params": params, "id": id_}


def request_line(method: str, params: Any, id_: int | str) -> bytes:
    """A JSON-RPC request as the line a requester writes: ``make_request`` encoded by
    ``encode_line`` (strict: what a requester sends must be what it meant), in one call."""
    return encode_line(make_request(method, params, id_))


def make_notification(method: str, params: Any = None) -> dict[str, Any]:
    """A JSON-RPC notification message (``params`` left out when ``None``)."""
    msg: dict[str, Any] = {"jsonrpc": "2.0", "method": method}
    if params is not None:
        msg["params"] = params
    return msg


def error_reply(exc: BaseException, id_: Any = None) -> dict[str, Any]:
    """The JSON-RPC error response for ``exc`` (through the one ``error_to_wire``)."""
    return {"jsonrpc": "2.0", "error": error_to_wire(exc), "id": id_}


def log_unexpected(method: str, exc: BaseException) -> None:
    """The default ``OnError``: a failure that is not an answer (a bug) is logged."""
    if not isinstance(exc, HostdError | ValidationError):
        _log.error("method %s failed", method, exc_info=exc)


def encode_reply(reply: Any, on_error: OnError | None = None) -> bytes:
    """What an answering end writes: ``reply`` as its line (``encode_line``, keys as
    text); a result with no JSON form becomes an ``internal`` error for each id it
    answered (the request is answered, never dropped). A message that is not a reply
    (a notification) with no JSON form raises ``TypeError``."""
    try:
        return encode_line(reply, strict=False)
    except TypeError as exc:  # orjson.JSONEncodeError is a TypeError
        replies = reply if isinstance(reply, list) else [reply]
        if not all(isinstance(r, dict) and "id" in r for r in replies):
            raise
        (on_error or log_unexpected)("encode", exc)
        errors = [error_reply(exc, r["id"]) for r in replies]
        return encode_line(errors if isinstance(reply, list) else errors[0], strict=False)


_REQUEST_KEYS = ("jsonrpc", "method", "params", "id")


#: A number id's magnitude from which it may be an integer past 64 bits, which orjson
#: reads as a rounded float: echoed, it would not be the id sent.
_ROUNDED_FROM = 2.0**63


def _valid_id(value: Any) -> bool:
    """A string, a number or null (JSON-RPC 2.0 §4). A number with a fraction "SHOULD
    NOT" be an id, yet it is one, and the reply's id "MUST be the same" (§5): ``1.5``
    is served and answered under ``1.5``. A number of ``_ROUNDED_FROM`` or more is
    not: it may be an integer orjson rounded, which could only be echoed wrong."""
    if isinstance(value, float):
        return abs(value) < _ROUNDED_FROM
    return value is None or (isinstance(value, str | int) and not isinstance(value, bool))


#: What an id may be, in the words of a refusal: the daemon's wire, and MCP's.
_ID_WORDS = "a string, a number under 2^63 or null"
_MCP_ID_WORDS = "a string or an integer (MCP)"


def is_mcp_id(value: Any) -> TypeGuard[str | int]:
    """An MCP request id: "a string or integer", never null (JSON-RPC 2.0's null is
    refused), never a bool (JSON's ``true`` is no integer). The one check, for the
    request shape here and for ``hostd mcp``'s edge, which echoes an id only when it is
    one."""
    return isinstance(value, str | int) and not isinstance(value, bool)


def _refused(field: str, problem: str) -> InvalidRequest:
    """``Invalid Request: method: got 7; expected a string``, the member in ``data.field``:
    a client is told which member of its request is wrong, as a refused param is."""
    return InvalidRequest(f"Invalid Request: {field}: {problem}", field=field)


def request_problem(item: Any, *, mcp: bool = False) -> InvalidRequest | None:
    """What makes ``item`` not a JSON-RPC 2.0 request, naming the member (the first found,
    in the order ``jsonrpc``, ``method``, ``params``, ``id``, then any other), or None.

    ``mcp``: as ``hostd mcp`` reads a request, in the same words: an ``id`` is a string
    or an integer, never null (MCP), and other members are left to the MCP SDK, which
    ignores them (``params`` that are an array are refused there, as ``-32602``)."""
    if not isinstance(item, dict):
        return InvalidRequest(f"Invalid Request: got {given(item)}; expected an object")
    if "jsonrpc" not in item:
        return _refused("jsonrpc", "missing; expected the string '2.0'")
    if item["jsonrpc"] != "2.0":
        return _refused("jsonrpc", f"got {given(item['jsonrpc'])}; expected the string '2.0'")
    if "method" not in item:
        return _refused("method", "missing; expected a string")
    if not isinstance(item["method"], str):
        return _refused("method", f"got {given(item['method'])}; expected a string")
    if "params" in item and not isinstance(item["params"], dict | list):
        words = "an object (MCP)" if mcp else "an object or an array"
        return _refused("params", f"got {given(item['params'])}; expected {words}")
    if "id" in item and not (is_mcp_id if mcp else _valid_id)(item["id"]):
        words = _MCP_ID_WORDS if mcp else _ID_WORDS
        return _refused("id", f"got {given(item['id'])}; expected {words}")
    if mcp:
        return None
    for key in item:
        if key not in _REQUEST_KEYS:  # a peer's key, of any length: quoted short, else counted
            named = {"field": key} if len(key) <= QUOTED else {}
            return InvalidRequest(
                f"Invalid Request: unknown {quoted(key, 'member')}; "
                "a request has only jsonrpc, method, params and id",
                **named,
            )
    return None


def validate_request(request: Any) -> Any:
    """The JSON-RPC 2.0 request (or batch) shape, checked by hand (jsonrpcserver's default
    validator runs a jsonschema pass per request): ``InvalidRequest`` naming the first
    member that is wrong (``request_problem``), else ``request``."""
    items = request if isinstance(request, list) else [request]
    if not items:
        raise EmptyBatch("Invalid Request: empty batch")
    for item in items:
        problem = request_problem(item)
        if problem is not None:
            raise problem
    return request


def reply_id(msg: Any) -> Any:
    """The id an error about ``msg`` is answered with: its own when valid, else null."""
    if isinstance(msg, dict) and _valid_id(msg.get("id")):
        return msg.get("id")
    return None


def tag_request(reply: Any, request_id: str) -> Any:
    """``reply`` with its error's ``data.request_id``: the id the request's log lines
    carry, so a client's error is matched to them. An error whose ``data`` names
    another request there (``usage/report``'s ``unknown_request``: the one asked about)
    keeps it."""
    error = reply.get("error") if isinstance(reply, dict) else None
    data = error.get("data") if isinstance(error, dict) else None
    if isinstance(data, dict):
        data.setdefault("request_id", request_id)
    return reply
