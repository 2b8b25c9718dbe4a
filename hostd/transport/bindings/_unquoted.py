"""Faults built from what a provider wrote, without quoting it (protocol.md, logs C8).

A provider's reply line, its error messages and the ids it sends are its own
text: a broken line may be half a frame, an error message may echo one. Every
fault message built here names sizes, positions, parse errors, JSON types, field
locations and member names (short tokens, a few) only, so nothing a provider wrote
on its protocol stream can reach a report (``providers[].error``), a health record
or the log. A provider's stderr is its own log and is forwarded as such
(``provider.stderr``).
"""

from __future__ import annotations

import re
from typing import Any

import orjson
from pydantic import ValidationError

from hostd.errors import MalformedReply, ProtocolFault
from hostd.protocol import CgpErrorCode

__all__ = [
    "STDERR_HINT",
    "answered",
    "bad_line",
    "described_id",
    "json_type",
    "member_names",
    "parse_problem",
    "refusal_tokens",
    "shape_error",
    "unquoted",
]


#: Where a local provider explains its own failure; a remote one's carrier says where
#: its own is (``hostd.transport.remote``).
STDERR_HINT = "; its stderr, logged as provider.stderr, may say why"


def answered(code: CgpErrorCode, message: Any, given: Any = None) -> str:
    """How an error a provider answered is reported: its code and its message's size. Its
    own failure (``internal``) is explained not in that message, which is not quoted, but
    on its stderr, which the log keeps: the report says so. ``given``: the code as the
    provider sent it (``None``: it sent none, X2). A code hostd does not know is read as
    ``internal`` (X1) and reported as such, by its size: the provider did not say
    ``internal``, and its code is its own text."""
    hint = STDERR_HINT if code is CgpErrorCode.INTERNAL else ""
    if given is not None and given != code.value:
        what = unquoted(given) if isinstance(given, str) else f"a JSON {json_type(given)}"
        return (
            f"provider answered an unknown error code ({what}), read as internal; "
            f"message: {unquoted(message)}{hint}"
        )
    return f"provider answered {code.value} (message: {unquoted(message)}{hint})"


def json_type(value: Any) -> str:
    """The JSON type name of a decoded value (``object``, ``array``, ``string`` …)."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int | float):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "array"
    return "object"


def unquoted(text: Any) -> str:
    """How a provider's own text is reported: its size, never its characters."""
    size = len(text) if isinstance(text, str) else 0
    return f"{size} chars, not quoted"


def described_id(key: Any) -> str:
    """A reply's id as reported: an integer (the only kind the host sends as-is) by
    value, any other by its JSON type and size."""
    if type(key) is int:
        return str(key)
    if isinstance(key, str):
        return f"a string id ({unquoted(key)})"
    return f"a {json_type(key)} id"


#: A member name shown as it is: a short token, as the protocol's own names are. Any
#: other is the peer's free text, counted only.
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,31}")
#: How many member names a fault shows at most (an object may have any number).
_NAMES_SHOWN = 8


def member_names(obj: dict[Any, Any]) -> str:
    """The member names of an object a peer sent, bounded: names only, never values; a
    name that is not a short token is counted, not shown."""
    shown = [n for n in obj if isinstance(n, str) and _NAME.fullmatch(n)][:_NAMES_SHOWN]
    others = len(obj) - len(shown)
    if not obj:
        return "none"
    if not shown:
        return f"{others} not shown"
    return ", ".join(shown) + (f" (+{others} more)" if others else "")


def _shape(exc: ValidationError, within: str = "") -> str:
    """Where the first error is (its path, under the member ``within`` when given) and
    what is wrong there."""
    err = exc.errors(include_url=False)[0]
    path = [str(p) for p in err["loc"]]
    loc = ".".join([within, *path] if within else path) or "<root>"
    message = err["msg"]
    given = err.get("input")
    # pydantic quotes some inputs in its message (a union's unknown tag): then only the
    # error's type is given. A field location is ours (model fields, tags we accept).
    if err["type"] == "union_tag_invalid" or (isinstance(given, str) and given in message):
        message = err["type"]
    if err["type"] == "missing" and isinstance(given, dict):
        # What it sent instead is most often the same thing under another name
        # (``results`` for ``frames``): its member names say so, its values stay unsaid.
        return f"{loc} is missing (members sent: {member_names(given)})"
    return f"{loc}: {message}"


#: A refusal's ``problem`` shown as it is: a short lower-case token, as the protocol's
#: own codes are (``unknown_entry``). Any other is the peer's free text, never shown.
_TOKEN = re.compile(r"[a-z][a-z0-9_]{0,31}")


def refusal_tokens(data: Any) -> dict[str, str]:
    """What an error reply's ``data`` names of the request it refuses, as short tokens:
    ``field`` (a member name) and ``problem`` (``unknown_entry``). Whatever is not such a
    token is left out, never quoted."""
    if not isinstance(data, dict):
        return {}
    field, problem = data.get("field"), data.get("problem")
    tokens: dict[str, str] = {}
    if isinstance(field, str) and _NAME.fullmatch(field):
        tokens["field"] = field
    if isinstance(problem, str) and _TOKEN.fullmatch(problem):
        tokens["problem"] = problem
    return tokens


def shape_error(what: str, exc: ValidationError) -> MalformedReply:
    """A reply that decoded but whose ``result`` (the member both bindings carry a reply's
    payload in) has the wrong shape: where, and what was expected."""
    return MalformedReply(what, _shape(exc, "result"))


def parse_problem(exc: ValueError) -> str:
    """Why a message did not parse: the parse error with its position, or where its
    shape is wrong; never the text itself."""
    if isinstance(exc, ValidationError):
        return f"not an envelope: {_shape(exc)}"
    if isinstance(exc, orjson.JSONDecodeError):
        return f"not JSON: {exc.msg} at position {exc.pos}"
    return "not JSON"


#: Why a line that is not JSON at all is there, most often: the provider printed to its
#: stdout (a debug line, a banner), which carries the protocol alone.
_STDOUT_IS_THE_WIRE = "not JSON; a provider writes only protocol messages to stdout (log to stderr)"


def bad_line(line: bytes, exc: ValueError) -> ProtocolFault:
    """A line that is not a reply: its size and why. A line that is not JSON at all (it
    fails at its first byte, or does not start as an object does) is most likely a
    print to stdout: the fault says what to do instead of what the parser expected. One
    that starts as JSON and breaks later gets the parse error and its position."""
    printed = isinstance(exc, orjson.JSONDecodeError) and (
        exc.pos == 0 or not line.lstrip().startswith(b"{")
    )
    why = _STDOUT_IS_THE_WIRE if printed else parse_problem(exc)
    return ProtocolFault(f"garbage line from provider ({len(line)} bytes, not quoted): {why}")
