"""The HostdError tree and the one exception → wire translation.

Errors are named by condition and carry their CGP code, JSON-RPC number and a
short machine ``reason`` (``data.reason`` on the wire). Third-party errors are
translated where they enter (transport edge) and chained with ``from exc``.
This module imports only ``hostd.protocol`` (and ``hostd._param_words``, which imports
nothing of hostd) so every layer may raise these.
"""

from __future__ import annotations

import difflib
import errno
import functools
import sys
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any, ClassVar, TypeGuard

from hostd._param_words import expected, field_name, given
from hostd.protocol import INVALID_REQUEST, PARSE_ERROR, CgpErrorCode, read_cgp_code

if TYPE_CHECKING:  # pydantic loads with the first model, not with the error tree
    from pydantic import BaseModel, ValidationError

__all__ = [
    "IDS_NAMED",
    "MAX_ERROR_CHARS",
    "MAX_STDERR_TAIL_CHARS",
    "BadRequest",
    "CallTimeout",
    "ConfigError",
    "ConnectionLost",
    "CorrelationMismatch",
    "CredentialUnavailable",
    "DaemonNotPermitted",
    "EmptyBatch",
    "FloorsExceedBudget",
    "HandshakeFailed",
    "HostdError",
    "IdInUse",
    "IncompatibleVersion",
    "InsecureTransport",
    "InvalidParam",
    "InvalidRequest",
    "LineTooLong",
    "ListenerError",
    "MalformedReply",
    "MethodNotFound",
    "NoConsent",
    "NoDaemon",
    "NoProviderAvailable",
    "NotSupported",
    "Overloaded",
    "ParseError",
    "ProtocolFault",
    "ProviderCrashed",
    "ProviderError",
    "ProviderParked",
    "ProviderRefusal",
    "ProviderTimeout",
    "ProviderUnauthorized",
    "QuestionSetError",
    "RemoteCertificate",
    "RemoteTransport",
    "RemoteWire",
    "RequestLineTooLong",
    "RpcError",
    "ShadowDisabled",
    "ShadowUnavailable",
    "ShuttingDown",
    "Unauthorized",
    "UnexpectedReply",
    "UnknownCitation",
    "UnknownProvider",
    "UnknownRequest",
    "WriteRefused",
    "error_to_wire",
    "did_you_mean",
    "params_refused",
    "unknown_provider",
]

#: The longest error text a provider's health keeps (``hostd.engine.bounded_error``), and
#: so every report that quotes it (``hostd status``, a later leg): an error built to be
#: read whole there (a handshake timeout's hint) fits it.
MAX_ERROR_CHARS = 500

#: The most of a failed provider's stderr its failure carries beside its error text, as
#: its own field (``stderr_tail``: its last lines, in the leg, its health and the log
#: event), so a hint in the text never leaves it a few characters; bounded, so a health
#: record stays the same size however often the provider fails.
MAX_STDERR_TAIL_CHARS = 1000


class HostdError(Exception):
    """Base of every error hostd raises on purpose."""

    code: ClassVar[CgpErrorCode] = CgpErrorCode.INTERNAL
    reason: ClassVar[str] = "internal"

    #: The JSON-RPC number when it is not the CGP code's own (parse error, invalid request).
    wire_number: ClassVar[int | None] = None

    #: A failure told for a call that was never sent: answered at once, its peer not asked
    #: (a provider parked, or down with its next start not waited for: the engine's pool
    #: says so where it raises it). No failure of that peer's own; never on the wire.
    unsent: bool = False

    def __init__(self, message: str, **data: Any) -> None:
        super().__init__(message)
        self.message = message
        self.data = data

    @property
    def cgp(self) -> CgpErrorCode:
        """The CGP code on the wire: the class's, unless an instance carries its own."""
        return self.code

    @property
    def jsonrpc_code(self) -> int:
        return self.wire_number if self.wire_number is not None else self.cgp.jsonrpc_code


class BadRequest(HostdError):
    code = CgpErrorCode.BAD_REQUEST
    reason = "bad_request"


class UnknownProvider(BadRequest):
    reason = "unknown_provider"


class NoDaemon(HostdError, ConnectionError):
    """A client found no daemon at the socket (or TCP port) it was pointed at: a
    ``ConnectionError`` too, so code that catches ``OSError`` still does; its ``errno``
    and ``strerror`` are the OS's, its text hostd's message."""

    reason = "no_daemon"

    #: What a socket answers while its daemon is still starting: no socket yet, or refused.
    _NOT_YET = frozenset({errno.ENOENT, errno.ECONNREFUSED})

    @property
    def may_be_starting(self) -> bool:
        """Nothing listens there yet (no socket, or refused): a daemon may be starting,
        so waiting for it can help; any other failure will not go away by waiting."""
        return self.errno in self._NOT_YET

    def __str__(self) -> str:
        return self.message


class DaemonNotPermitted(NoDaemon):
    """A socket is there, but this user may not connect to it (``EACCES``): another
    user's daemon, its socket private to that user. A ``NoDaemon`` still (none this user
    can use), so code that catches that still does; its text says whose it is and how a
    daemon is shared, never that none is running."""

    reason = "not_permitted"


class NoProviderAvailable(HostdError):
    code = CgpErrorCode.UNAVAILABLE
    reason = "no_provider_available"


class ShuttingDown(HostdError):
    code = CgpErrorCode.SHUTTING_DOWN
    reason = "shutting_down"


class ProviderError(HostdError):
    """A provider answered with an error object (its code read per X1/X2)."""

    code = CgpErrorCode.INTERNAL
    reason = "provider_error"

    def __init__(
        self, message: str, *, cgp_code: CgpErrorCode = CgpErrorCode.INTERNAL, **data: Any
    ) -> None:
        super().__init__(message, cgp_code=cgp_code.value, **data)
        self.cgp_code = cgp_code


class MethodNotFound(ProviderError):
    """A provider answered JSON-RPC ``-32601``: it has no such method (a reranker written
    to the ``rerank`` method alone answers it to ``context/handshake``)."""


class ProviderTimeout(HostdError):
    code = CgpErrorCode.UNAVAILABLE
    reason = "timeout"


class ProviderCrashed(HostdError):
    code = CgpErrorCode.UNAVAILABLE
    reason = "crashed"


class ProviderParked(ProviderCrashed):
    """A leg not run: its provider is parked (``failed``) after its restart attempts;
    the failure was told once, when it was parked (``provider.parked``)."""

    reason = "parked"


class ProtocolFault(HostdError):
    """A peer broke the framing or the wire shape (garbage line, bad reply)."""

    reason = "protocol_fault"

    @property
    def breaks_connection(self) -> bool:
        """Whether the connection it came on can no longer be trusted, so the engine tears
        it down and counts a failure (a restart, its backoff, parking): the stream is in
        an unknown state after a line too long or not JSON, a reply nobody asked for, a
        lost connection or a desynchronised lock-step stream. ``MalformedReply`` (a reply
        read whole and matched to its call, its content alone wrong) does not: it fails
        its own call and the connection serves the others."""
        return True


class LineTooLong(ProtocolFault):
    reason = "line_too_long"


class CorrelationMismatch(ProtocolFault):
    """H4: a reply with an unknown or missing id."""

    reason = "correlation_mismatch"


class MalformedReply(ProtocolFault):
    """A provider's reply that answers its request but whose payload has the wrong shape
    (``malformed query result: result.frames is missing …``): that call fails, under
    the ``protocol_fault`` reason. ``problem`` is what is wrong without the words
    ``malformed <what>``, for a caller that says "malformed reply" itself."""

    def __init__(self, what: str, problem: str) -> None:
        super().__init__(f"malformed {what}: {problem}")
        self.problem = problem

    @property
    def breaks_connection(self) -> bool:
        """Never: the reply was read whole and answered its call, so the stream is intact
        and every other call on it is still answered (``ProtocolFault.breaks_connection``)."""
        return False


class HandshakeFailed(ProtocolFault):
    reason = "handshake_failed"


class IncompatibleVersion(HandshakeFailed):
    """H3: the provider's major family differs from ours."""

    code = CgpErrorCode.INCOMPATIBLE_VERSION
    reason = "incompatible_version"


class ConfigError(HostdError):
    """A config file that cannot be used; the message names the file, key and problem."""

    code = CgpErrorCode.BAD_REQUEST
    reason = "bad_config"


class Overloaded(HostdError):
    """A client over its per-connection limit (in-flight requests, batch size)."""

    code = CgpErrorCode.UNAVAILABLE
    reason = "overloaded"


# -- the JSON-RPC edge (hostd.rpc, hostd.server, hostd.provider, hostd.client) ----------


class ParseError(BadRequest):
    """A line that is not JSON (or not UTF-8): JSON-RPC's parse error, answered ``id: null``."""

    reason = "parse_error"
    wire_number = PARSE_ERROR


class InvalidRequest(BadRequest):
    """A JSON value that is not a JSON-RPC 2.0 request (bad shape, bad id, empty batch)."""

    reason = "invalid_request"
    wire_number = INVALID_REQUEST


class EmptyBatch(InvalidRequest):
    """``[]``: a batch with no request in it, answered with one invalid-request error."""

    reason = "empty_batch"


class IdInUse(InvalidRequest):
    """A request whose id another request in flight on the same connection holds: it is
    refused, not run, since its reply and a ``$/cancel`` of that id could not tell
    the two apart."""

    reason = "id_in_use"


class RequestLineTooLong(InvalidRequest):
    """A request line over the reader's bound: answered once, its bytes discarded."""

    reason = "line_too_long"


class InvalidParam(BadRequest):
    """A param that parsed but does not name a known policy, provider or value."""

    reason = "invalid_params"


class UnknownRequest(BadRequest):
    """``usage/report`` for a request id this daemon does not remember."""

    reason = "unknown_request"


class UnknownCitation(InvalidParam):
    """``usage/feedback`` naming a label or FrameId the request's citation map does not hold."""

    reason = "unknown_citation"


class ShadowDisabled(BadRequest):
    """``usage/feedback`` on a daemon without ``[shadow] enabled``: there is nowhere to keep it."""

    reason = "shadow_disabled"


class ShadowUnavailable(HostdError):
    """The shadow store cannot be read or written (a damaged or unwritable ``shadow.db``):
    ``data.file`` names it and ``data.problem`` says what is wrong. Not ``overloaded``: a
    retry cannot succeed until the file is moved aside or restored."""

    code = CgpErrorCode.UNAVAILABLE
    reason = "shadow_unavailable"


class Unauthorized(BadRequest):
    """A TCP client whose first message is not ``$/authenticate`` with the right token."""

    reason = "unauthorized"


class ProviderRefusal(HostdError):
    """Raise from a provider's ``query``/``verify`` (or ``remember``/``forget``) to answer
    with a coded CGP error. ``data`` goes on the wire beside the code: a refused write
    names its ``field`` and its ``problem`` as short tokens, the words a host may show
    (it never quotes the message, which is the provider's own text)."""

    reason = "refused"

    def __init__(
        self, message: str, code: CgpErrorCode = CgpErrorCode.BAD_REQUEST, **data: Any
    ) -> None:
        super().__init__(message, **data)
        self.refusal = code

    @property
    def cgp(self) -> CgpErrorCode:
        return self.refusal


class NotSupported(BadRequest):
    """The provider asked does not do what the request needs (a memory write to a
    provider whose handshake declares no ``capabilities.remember``, or over a binding
    that carries no such request)."""

    reason = "not_supported"


class NoConsent(HostdError):
    """Nothing was sent: the provider's handshake requires consent scopes with no live
    receipt (C1, C2, C6); ``data.missing_scopes`` names them."""

    code = CgpErrorCode.UNAVAILABLE
    reason = "no_consent"


class WriteRefused(BadRequest):
    """The provider refused a memory write (its ``field`` and ``problem`` in ``data``,
    when it named them): nothing was stored."""

    reason = "write_refused"


class RpcError(HostdError):
    """The daemon answered with a JSON-RPC error object."""

    reason = "rpc_error"

    def __init__(self, code: int, message: str, data: Any = None) -> None:
        super().__init__(message)
        self.rpc_code = code
        self.rpc_data = data

    @property
    def cgp(self) -> CgpErrorCode:
        """The daemon's CGP code (``data.cgp_code``; X1: one unknown or absent reads
        ``internal``), not the class's."""
        data = self.rpc_data if isinstance(self.rpc_data, dict) else {}
        return read_cgp_code(data.get("cgp_code"))

    @property
    def remote_reason(self) -> str | None:
        """``data.reason`` of the error (e.g. ``floors_exceed_budget``), if any."""
        if isinstance(self.rpc_data, dict):
            reason = self.rpc_data.get("reason")
            return reason if isinstance(reason, str) else None
        return None

    @property
    def request_id(self) -> str | None:
        """``data.request_id``: the id the daemon's log lines of this request carry
        (``request.failed``, ``request.done``), to match this error to them; None from
        a daemon that does not say. ``usage/report`` and ``usage/feedback`` of an
        unknown request name the one asked about there."""
        if isinstance(self.rpc_data, dict):
            value = self.rpc_data.get("request_id")
            return value if isinstance(value, str) else None
        return None

    def __str__(self) -> str:
        request = f", request {self.request_id}" if self.request_id else ""
        return f"{self.message} (code {self.rpc_code}, reason {self.remote_reason}{request})"


class ConnectionLost(ProtocolFault):
    """The daemon closed the connection before answering."""

    reason = "connection_lost"


class CallTimeout(HostdError, TimeoutError):
    """A client call got no answer within the ``timeout`` its caller gave; the call was
    cancelled in the daemon (``$/cancel``). A ``TimeoutError`` too."""

    reason = "call_timeout"


class UnexpectedReply(ProtocolFault):
    """A daemon's result that does not have its method's shape (``.data["fields"]``
    names where, never what: the values are the peer's)."""

    reason = "unexpected_reply"


def _problem(error: Any) -> str:
    """A validation error's words; our own validators' without pydantic's prefix."""
    if error["type"] == "model_type":  # pydantic's words name the Python class
        return "Input should be an object"
    msg = str(error["msg"])
    return msg.removeprefix("Value error, ") if error["type"] == "value_error" else msg


#: Pydantic's error types said in their own words: our validators' (``must not be empty
#: or only whitespace``) and a member the model does not take (``unknown member``).
#: Every other is a value the schema words (``got …; expected …``), or a missing member.
_OWN_WORDS = frozenset({"value_error", "extra_forbidden"})


def _invalid_params(
    exc: ValidationError, schema: dict[str, Any] | None = None, sent: Any = None
) -> tuple[str, dict[str, Any]]:
    """The message and ``data`` of a refusal of params; with the model's JSON schema and
    the params ``sent``, a value's refusal says what was sent and what the member takes
    (``_param_words``), as ``hostd mcp`` words a tool's arguments, and every field is
    named by the path a client sends (``_member``: no name pydantic gives a union's
    member)."""
    errors = exc.errors(include_url=False, include_context=False)
    first = errors[0]
    path, member = list(first["loc"]), None
    if schema is not None:
        path, member = _member(schema, first["loc"])
        inner = _inside_a_member(path, member, first, errors)
        if inner is not None:  # the value took that member's shape: its error says more
            # The other members' refusals of that shape (an object is not a string)
            # are not what is wrong: only the errors inside the member taken are said.
            errors = [e for e in errors if not _at_member(e, path)]
            first = inner
            path, member = _member(schema, inner["loc"])
    field = field_name(path)
    if first["type"] == "extra_forbidden":
        msg = "unknown member"
    elif first["type"] in _OWN_WORDS or member is None:
        msg = _problem(first)
    elif first["type"] == "missing":
        msg = f"missing; expected {expected(member)}"
    else:
        msg = f"got {given(_at(sent, path, first))}; expected {expected(member)}"
    detail = [
        {
            "field": field_name(e["loc"] if schema is None else _member(schema, e["loc"])[0]),
            "problem": _problem(e),
        }
        for e in errors[:20]
    ]
    data = {"field": field, "errors": detail}
    return f"invalid params: {field}: {msg}", data


def _member(schema: dict[str, Any], loc: Iterable[int | str]) -> tuple[list[Any], Any]:
    """The path a pydantic error's ``loc`` names and the schema of that member, its
    ``$ref``s followed. pydantic names a union's member as one more part
    (``strategy.str``, ``used[0].FrameIdParam.provider_id``), a name no client sends:
    it is left out of the path, so an error at a member itself is the union's own, and
    one inside a member is named as sent (``used[0].provider_id``). The schema is
    ``None`` where ``loc`` leaves it (a member the model does not take), the rest of
    ``loc`` kept as it is."""
    defs = schema.get("$defs", {})

    def resolved(node: Any) -> Any:
        return defs.get(node.get("$ref", "").rpartition("/")[2], node)

    node: Any = schema
    path: list[Any] = []
    parts = list(loc)
    n = 0
    while n < len(parts):
        branches = [resolved(b) for b in resolved(node).get("anyOf", [node])]
        branches = [b for b in branches if b.get("type") != "null"]
        if len(branches) > 1:
            if n == len(parts) - 1:
                return path, resolved(node)  # an error at one member: the union's own
            n += 1  # past the member's name, into the member that holds the next part
            branches = [b for b in branches if _step(b, parts[n]) is not None]
        found = _step(branches[0], parts[n]) if len(branches) == 1 else None
        if found is None:
            return path + parts[n:], None
        node = found
        path.append(parts[n])
        n += 1
    return path, node


def _step(node: Any, part: int | str) -> Any:
    """The schema of ``part`` (an item's index, a member's name) inside ``node``, or
    ``None`` where ``node`` has no such part."""
    if isinstance(part, int):
        return node.get("items")
    if part in node.get("properties", {}):
        return node["properties"][part]
    extra = node.get("additionalProperties")
    return extra if isinstance(extra, dict) else None


def _inside_a_member(path: list[Any], member: Any, first: Any, errors: Iterable[Any]) -> Any:
    """The error that says more than ``first``, pydantic's error at one member of a union
    (at ``path``, its ``loc`` one part longer): when the value took another member's
    shape (an object for a FrameId), the first error inside that member
    (``used[0].FrameIdParam.provider_id``: an empty string), where "expected a string or
    an object" would not say what is wrong. ``None`` otherwise."""
    n = len(path)
    if member is None or len(first["loc"]) != n + 1:
        return None
    return next((e for e in errors if len(e["loc"]) > n + 1 and list(e["loc"][:n]) == path), None)


def _at_member(error: Any, path: list[Any]) -> bool:
    """Whether ``error`` is pydantic's refusal at one member of the union at ``path``
    (its ``loc`` that path and the member's name), not one inside that member."""
    return len(error["loc"]) == len(path) + 1 and list(error["loc"][:-1]) == path


def _at(sent: Any, path: Iterable[int | str], error: Any) -> Any:
    """The value at ``path`` in the params as sent (a union's, where pydantic's ``input``
    is what one of its members was given), else the error's ``input``."""
    try:
        for part in path:
            sent = sent[part]
    except (KeyError, IndexError, TypeError):
        return error.get("input")
    return sent


def params_refused(model: type[BaseModel], sent: Any, exc: ValidationError) -> InvalidParam:
    """``model``'s refusal of the params ``sent``, as the client API answers it: a value
    of the wrong type or out of range says what was sent and what the member takes,
    from the model's own schema (``invalid params: budget: got a string '100'; expected
    an integer from 1 to 10,000,000``), never pydantic's bare ``Input should be a valid
    integer``."""
    message, data = _invalid_params(exc, _schema_of(model), sent)
    return InvalidParam(message, **data)


@functools.cache
def _schema_of(model: type[BaseModel]) -> dict[str, Any]:
    return model.model_json_schema()


def _is_validation_error(exc: BaseException) -> TypeGuard[ValidationError]:
    """A pydantic ``ValidationError``: none can be raised before pydantic is loaded, so
    the error tree (every command's) does not load it to ask."""
    if "pydantic_core" not in sys.modules:
        return False
    from pydantic_core import ValidationError  # pydantic's own, re-exported there

    return isinstance(exc, ValidationError)


def error_to_wire(exc: BaseException) -> dict[str, Any]:
    """The JSON-RPC error object for any exception; unexpected ones hide their detail.

    A pydantic ``ValidationError`` is bad params (−32602) naming the first bad field.
    """
    if isinstance(exc, HostdError):
        data = {"reason": exc.reason, "cgp_code": exc.cgp.value, **exc.data}
        return {"code": exc.jsonrpc_code, "message": exc.message, "data": data}
    if _is_validation_error(exc):
        message, data = _invalid_params(exc)
        wire = {"reason": "invalid_params", "cgp_code": CgpErrorCode.BAD_REQUEST.value, **data}
        return {"code": CgpErrorCode.BAD_REQUEST.jsonrpc_code, "message": message, "data": wire}
    return {
        "code": CgpErrorCode.INTERNAL.jsonrpc_code,
        "message": "internal error",
        "data": {"reason": "internal", "cgp_code": CgpErrorCode.INTERNAL.value},
    }


# --- composition (hostd.compose) ---


class FloorsExceedBudget(HostdError, ValueError):
    """The client's floors alone do not fit the budget; nothing is dropped silently.

    The budget bounds the whole prompt, so a floor costs its fenced block and
    the floors bring the constant preamble with them: ``floors`` lists
    ``(label, cost)`` for every floor's block, ``preamble`` the preamble's cost,
    and ``total`` (the prompt of floors alone) and ``budget`` the two numbers
    that disagree.
    """

    code = CgpErrorCode.BUDGET_UNSATISFIABLE
    reason = "floors_exceed_budget"

    def __init__(
        self,
        floors: list[tuple[str, int]],
        budget: int,
        *,
        preamble: int = 0,
        total: int | None = None,
    ) -> None:
        if total is None:
            total = preamble + sum(cost for _, cost in floors)
        detail = ", ".join(f"{label!r} costs {cost}" for label, cost in floors)
        super().__init__(
            f"floors cost {total} tokens with the evidence preamble ({preamble}) and their "
            f"fences, but the budget is {budget} ({detail})",
            floors=[{"label": label, "cost": cost} for label, cost in floors],
            budget=budget,
            total=total,
            preamble=preamble,
        )
        self.floors = floors
        self.budget = budget
        self.total = total
        self.preamble = preamble


# -- the daemon's listeners and the eval's question sets ----------------------------------


class ListenerError(HostdError):
    """A listener that cannot be opened safely (live socket, unsafe directory, bad bind)."""

    reason = "listener_failed"


class QuestionSetError(BadRequest):
    """A question set that cannot be read: names the file, the line and the problem."""

    reason = "bad_questions"


# -- remote providers over HTTPS (hostd.transport.remote; C4, C7, C8) ---------------------


class InsecureTransport(HostdError):
    """C7: plaintext ``http://`` to a host that is not loopback; refused before any byte."""

    code = CgpErrorCode.UNAVAILABLE
    reason = "insecure_transport"


class ProviderUnauthorized(HostdError):
    """A remote provider answered 401 or 403: its credential is missing, wrong or refused."""

    code = CgpErrorCode.UNAVAILABLE
    reason = "unauthorized"


class CredentialUnavailable(ProviderUnauthorized):
    """A remote provider's credential cannot be read (its token file is gone, unreadable
    or not one line; its variable unset): the message names the file or variable, and
    nothing is sent."""

    reason = "credential"


class RemoteTransport(ProviderCrashed):
    """A remote exchange failed below the envelope: no connection, TLS refused, a non-2xx
    status (``data.http_status``; the body is never quoted), a redirect, a broken body."""

    reason = "transport"


class RemoteCertificate(RemoteTransport):
    """The server's TLS certificate failed verification (no trusted CA signed it, it
    expired, it names another host), or the TLS files it is checked with cannot be
    loaded (``ca_file`` or ``client_cert`` missing, unreadable, holding no certificate):
    no check cures it until the user fixes the file or the server's certificate is
    renewed. The message says which and names the config key when one cures it."""

    reason = "certificate"


class RemoteWire(ProtocolFault):
    """A remote provider's response body is not one valid envelope (or is over the bound)."""

    reason = "wire"

    @property
    def breaks_connection(self) -> bool:
        """Not when it is the transport's word for a ``MalformedReply`` (raised from one:
        the body was one reply to its request, its content wrong), as over a pipe; any
        other bad body (not JSON, two values, another id, over the bound) does."""
        return not isinstance(self.__cause__, MalformedReply)


# -- words for a name hostd does not know ------------------------------------------------

#: An unknown provider's message names at most this many configured ids (the rest counted).
IDS_NAMED = 20


def did_you_mean(word: str, known: Iterable[str]) -> str | None:
    """The one of ``known`` closest to ``word`` when one is close (difflib's ratio at
    least 0.6), else None."""
    close = difflib.get_close_matches(word, list(known), 1)
    return close[0] if close else None


def unknown_provider(provider_id: str, configured: Iterable[str]) -> str:
    """``unknown provider 'fact' (configured: facts, notes); did you mean 'facts'?``: the
    id a request named, the ids configured (sorted; at most ``IDS_NAMED``, the rest
    counted) and, when one is close, the closest."""
    ids = sorted(set(configured))
    if not ids:
        named = "no provider is configured"
    else:
        more = len(ids) - IDS_NAMED
        named = "configured: " + ", ".join(ids[:IDS_NAMED])
        named += f" and {more} more" if more > 0 else ""
    close = did_you_mean(provider_id, ids)
    guess = f"; did you mean {close!r}?" if close is not None else ""
    return f"unknown provider {provider_id!r} ({named}){guess}"
