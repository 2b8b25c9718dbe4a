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
from hostd.protocol import EncodedObject

__all__ = [
    "HEAD_BYTES",
    "OnError",
    "decode",
    "encode",
    "encode_line",
    "encode_reply",
    "error_reply",
    "id_in_line",
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


#: Params are objects (by name): an array, even an empty one, is refused (−32602) before
#: the method runs. jsonrpcserver passes an empty array on as no params at all.
BY_NAME = "invalid params: params must be an object (by name), not an array"


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


def _written(reply: Any) -> Any:
    """``reply`` with each ``EncodedObject`` member of its result as its own text (an
    ``orjson.Fragment``, written as it is): the same bytes, not encoded again."""
    result = reply.get("result") if type(reply) is dict else None
    if type(result) is not dict:
        return reply
    texts = {k: orjson.Fragment(v.text) for k, v in result.items() if type(v) is EncodedObject}
    return {**reply, "result": {**result, **texts}} if texts else reply


def encode_reply(reply: Any, on_error: OnError | None = None) -> bytes:
    """What an answering end writes: ``reply`` as its line (``encode_line``, keys as
    text; a result's ``EncodedObject`` members as their text); a result with no JSON
    form becomes an ``internal`` error for each id it answered (the request is
    answered, never dropped). A message that is not a reply (a notification) with no
    JSON form raises ``TypeError``."""
    try:
        return encode_line(_written(reply), strict=False)
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


#: How much of each end of an over-long line ``id_in_line`` reads: where a client puts its
#: id, before ``params`` or after them (as most JSON-RPC libraries, and hostd's, write it).
HEAD_BYTES = 4096

_SPACE = b" \t\r\n"


def _string_end(head: bytes, at: int) -> int:
    """The index just past the JSON string opening at ``head[at]`` (a quote), or -1 when
    it does not end within ``head``."""
    i = at + 1
    while (i := head.find(b'"', i)) != -1:
        backslashes = 0
        while head[i - 1 - backslashes] == 0x5C:  # '\\': an escaped quote is no end
            backslashes += 1
        if backslashes % 2 == 0:
            return i + 1
        i += 1
    return -1


def id_in_line(head: bytes, tail: bytes) -> Any:
    """The ``id`` of the request on a line too long to parse, read from its first and last
    bytes (``HEAD_BYTES`` of each at most), or None when it cannot be read for certain
    (docs/api.md, "Error −32600"): the first top-level ``id`` member ``head`` holds
    whole, or the line's last member when ``tail`` holds it whole and it is ``id``; the
    two, when both are found, must agree. None is the answer to anything else: a wrong
    id would settle another call, so none is guessed."""
    first = _id_in_head(head[:HEAD_BYTES])
    last = _id_in_tail(tail[-HEAD_BYTES:])
    if first is None or last is None:
        return last if first is None else first
    return first if encode(first) == encode(last) else None


def _id_in_tail(tail: bytes) -> Any:
    """The value of a line's last member when it is ``id``: the line ends ``"id": VALUE}``
    (whitespace allowed), the member's name after a ``,`` or ``{``, all within ``tail``.
    In a line that is JSON that is the top-level object's last member (the final ``}``
    closes it, and a string is read back to its opening quote, the first quote before
    it not escaped); it is the one a parse of the line would keep."""
    i = _back_space(tail, len(tail) - 1)
    if i < 0 or tail[i] != 0x7D:  # '}'
        return None
    end = _back_space(tail, i - 1) + 1
    if end <= 0:
        return None
    if tail[end - 1] == 0x22:
        start = _opening_quote(tail, end - 1)
    else:  # a number or a literal
        start = end
        while start > 0 and tail[start - 1] in _SCALAR:
            start -= 1
        start = start if 0 < start < end else -1
    if start < 0:
        return None
    colon = _back_space(tail, start - 1)
    if colon < 0 or tail[colon] != 0x3A:  # ':'
        return None
    name_end = _back_space(tail, colon - 1)
    if name_end < 0 or tail[name_end] != 0x22:
        return None
    name_start = _opening_quote(tail, name_end)
    before = _back_space(tail, name_start - 1) if name_start > 0 else -1
    if before < 0 or tail[before] not in b",{":
        return None
    try:
        name = orjson.loads(tail[name_start : name_end + 1])
        value = orjson.loads(tail[start:end])
    except orjson.JSONDecodeError:
        return None
    if name != "id" or value is None or not _valid_id(value):
        return None
    return value


#: The bytes of a JSON number or literal (``true``, ``false``, ``null``).
_SCALAR = b"0123456789+-.eEtrufalsn"


def _back_space(data: bytes, i: int) -> int:
    """The index of the last byte at or before ``i`` that is not JSON whitespace (-1)."""
    while i >= 0 and data[i] in _SPACE:
        i -= 1
    return i


def _opening_quote(data: bytes, closing: int) -> int:
    """The index of the quote opening the JSON string that ``data[closing]`` closes: the
    first quote before it not escaped (after an even run of backslashes); -1 when none
    is, or when a run of backslashes reaches the start of ``data`` (its parity unknown),
    or when ``data[closing]`` is itself escaped."""
    first = True
    i = closing
    while i >= 0 and (i := data.rfind(b'"', 0, i + 1)) != -1:
        run = 0
        while i - 1 - run >= 0 and data[i - 1 - run] == 0x5C:
            run += 1
        if run and i - run == 0:
            return -1  # the run may go on before ``data``: escaped or not, unknown
        if first:  # the closing quote: an escaped one closes nothing
            if run % 2:
                return -1
            first = False
        elif run % 2 == 0:
            return i
        i -= 1
    return -1


def _id_in_head(head: bytes) -> Any:
    """The value of the first top-level member named ``id`` when ``head`` holds it whole,
    followed by ``,`` or ``}``, everything before it strict JSON (that prefix, closed
    with ``}``, parsed as ``decode`` parses a line), and it is an id a reply can carry
    (``reply_id``: a string, a number under 2^63). A batch, an ``id`` past ``head``, a
    member inside ``params``, a prefix that is not JSON: None."""
    i = 0
    n = len(head)
    while i < n and head[i] in _SPACE:
        i += 1
    if i >= n or head[i] != 0x7B:  # '{': a batch or a scalar has no one id
        return None
    depth = 0
    key_next = False  # at depth 1, the next string is a member's name
    while i < n:
        c = head[i]
        if c == 0x22:  # '"'
            end = _string_end(head, i)
            if end == -1:
                return None
            if depth == 1 and key_next:
                key_next = False
                try:
                    name = orjson.loads(head[i:end])
                except orjson.JSONDecodeError:
                    return None
                if name == "id":
                    return _member_value(head, end)
            i = end
            continue
        if c in b"{[":
            depth += 1
            key_next = c == 0x7B and depth == 1
        elif c in b"}]":
            depth -= 1
            if depth == 0:
                return None  # the object ended (a short line): it has no id member
        elif c == 0x2C and depth == 1:  # ','
            key_next = True
        i += 1
    return None


def _member_value(head: bytes, after_name: int) -> Any:
    """The value of the member whose name ends at ``after_name``, when it is an id a
    reply can carry and the prefix up to it is strict JSON (``id_in_head``)."""
    i = after_name
    n = len(head)
    while i < n and head[i] in _SPACE:
        i += 1
    if i >= n or head[i] != 0x3A:  # ':'
        return None
    i += 1
    while i < n and head[i] in _SPACE:
        i += 1
    if i >= n:
        return None
    if head[i] == 0x22:
        end = _string_end(head, i)
    else:  # a number or a literal runs to the next delimiter
        end = i
        while end < n and head[end] not in b",}" and head[end] not in _SPACE:
            end += 1
    rest = end
    while 0 <= rest < n and head[rest] in _SPACE:
        rest += 1
    if end == -1 or rest >= n or head[rest] not in b",}":
        return None  # the value may go on past the head: it is not read whole
    try:
        obj = orjson.loads(head[:end] + b"}")  # strict, as ``decode``: everything before it
    except orjson.JSONDecodeError:
        return None
    value = obj.get("id") if isinstance(obj, dict) else None
    # ``reply_id``'s test: null (read, or nothing of use) never settles a call.
    return value if value is not None and _valid_id(value) else None


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
