"""The CGP NDJSON envelope binding's codec, host side (protocol.md §2).

Speaks the upstream envelope wire exactly: ``handshake`` → ``handshake_ack``,
``query`` → ``frames`` | ``error``, ``verify`` → ``verified``, ``shutdown``.
Requests are answered in lock-step (``UNKEYED``: one in flight) unless the
provider declared ``capabilities.correlation``; then queries carry an ``id``
and may be pipelined, and a ``frames``/``error`` with an unknown or missing id
is a ``correlation_mismatch`` fault (H4). ``verify`` stays lock-step (the
schema gives ``verify`` no id). A ``frames`` envelope's ``result`` is read into its
model by ``query_result``, in the call it answers, as the JSON-RPC codec reads a
``result``: a malformed one (no ``frames``) fails that query alone with the same
words, where an envelope that cannot name its request (not JSON, no ``type``, an
``id`` that is no string) ends the stream. An envelope whose ``type`` is outside the
vocabulary (one a later ``1.x`` may add) is ignored, never a fault (SPEC §2.1,
§13): whatever its members, an ``id`` included, it answers nothing hostd asked, as
hostd sends the requests. Pure and synchronous (``_codec``), but for one side
effect: it notes such a type in the log, once per type. The same codec serves a
child's pipes, an HTTPS endpoint (one envelope per body, the spec's HTTP binding)
and check-provider.

``verify`` addresses identities by the provider's handshake name: the envelope
wire never tells a provider the id the host configured it under, so the one
``provider_id`` a provider can hold its served identities under is its own name
(the published SDK's providers do). The host's FrameIds keep the configured id;
it is swapped for the name on the way out and back in verdicts (V2 still
matches by full identity), over every carrier alike.
"""

from __future__ import annotations

import itertools
import re
from typing import Any, Literal

import orjson

from hostd._log import get_logger
from hostd.errors import (
    CorrelationMismatch,
    HostdError,
    IncompatibleVersion,
    NotSupported,
    ProtocolFault,
    ProviderError,
)
from hostd.protocol import (
    PROTOCOL_VERSION,
    CgpErrorCode,
    ContextQuery,
    ContextQueryResult,
    ErrorEnvelope,
    ForgetRequest,
    ForgetResult,
    FrameIdentity,
    HandshakeAck,
    HandshakeAckEnvelope,
    HostInfo,
    RememberRequest,
    RememberResult,
    VerifiedEnvelope,
    VerifyResponse,
    WireModel,
    parse_envelope,
    read_cgp_code,
)
from hostd.rpc import encode_line

from ._codec import UNKEYED, Fault, Message, Refusal, Reply, Request, query_wire, validate_reply
from ._unquoted import answered, bad_line, described_id, parse_problem

__all__ = ["CGP_SDK_WIRE", "CgpCodec", "envelope_error"]

#: What a provider that answers the envelope handshake where a JSON-RPC one met silence
#: (or whose HTTP body is an envelope) is told: the words of every such hint.
CGP_SDK_WIRE = "a provider built with a CGP SDK (contextgraph-sdk) speaks the envelope wire"

_SHUTDOWN = encode_line({"type": "shutdown"})

log = get_logger("hostd.transport")

#: An envelope type logged as it is: a short token, as the vocabulary's own are. Any
#: other is the peer's free text, logged by its length only.
_TOKEN = re.compile(r"[a-z][a-z0-9_]{0,31}")
#: How many types a codec notes in the log before it notes no more (a provider inventing
#: types line after line costs a bounded log and a bounded set).
_NOTED_TYPES = 16


def envelope_error(env: ErrorEnvelope) -> HostdError:
    """An error envelope as the typed error its caller gets (X1, X2)."""
    code = read_cgp_code(env.code)  # X1/X2: unknown or absent → internal
    # The message is the provider's own text (it may echo a frame): reported by size only.
    message = answered(code, env.message, env.code)
    if code is CgpErrorCode.INCOMPATIBLE_VERSION:
        return IncompatibleVersion(message)
    return ProviderError(message, cgp_code=code)


class _FramesReply(WireModel):
    """A ``frames`` envelope with its ``result`` as sent. The envelope names the request
    it answers (its ``id``, or the lock-step request in flight), so a ``result`` of the
    wrong shape is that request's failure (``query_result`` reads it, as the JSON-RPC
    codec reads a ``result``), not a broken wire: R1 has a provider answer a malformed
    message with an error and serve on, and the host treats a provider's alike. One
    without ``result``, or whose ``id`` is no string, answers nothing it can name: a
    fault of the stream."""

    type: Literal["frames"] = "frames"
    result: Any
    id: str | None = None


def _parse(decoded: Any) -> Any:
    """One decoded envelope (``parse_envelope``), a ``frames`` one as a ``_FramesReply``."""
    if isinstance(decoded, dict) and decoded.get("type") == "frames":
        return _FramesReply.model_validate(decoded)
    return parse_envelope(decoded)


def _expected(what: str, payload: Any) -> ProtocolFault:
    got = payload.type if isinstance(payload, WireModel) and hasattr(payload, "type") else "?"
    return ProtocolFault(f"expected {what}, got {got!r}")


class CgpCodec:
    """The envelope wire for one provider: lock-step or keyed queries, and the name its
    verify identities go under, both learnt from its handshake."""

    name = "cgp"

    def __init__(self, provider_id: str = "?") -> None:
        self.provider_id = provider_id
        self._ids = itertools.count(1)
        #: Set from the handshake's capabilities: queries carry ids and may pipeline.
        self.correlation = False
        #: The ``provider_id`` verify identities carry on the wire: the handshake name.
        self.wire_provider_id: str | None = None
        #: The envelope types ignored and logged so far (``None``: those not a token).
        self._noted: set[str | None] = set()

    def __repr__(self) -> str:
        return f"<CgpCodec {self.provider_id} correlation={self.correlation}>"

    def handshake(self, host: HostInfo) -> Request:
        line = encode_line({"type": "handshake", "protocol_version": PROTOCOL_VERSION})
        return Request(line, UNKEYED, "handshake")

    def query(self, query: ContextQuery | dict[str, Any]) -> Request:
        body: dict[str, Any] = {"type": "query", "query": query_wire(query)}
        if not self.correlation:
            return Request(encode_line(body), UNKEYED, "query")
        key = f"q{next(self._ids)}"
        body["id"] = key
        return Request(encode_line(body), key, "query")

    def verify(self, frames: list[FrameIdentity]) -> Request:
        ours, theirs = self.provider_id, self.wire_provider_id or self.provider_id
        wire = [
            {**f.to_wire(), "provider_id": theirs} if f.provider_id == ours else f.to_wire()
            for f in frames
        ]
        line = encode_line({"type": "verify", "request": {"frames": wire}})
        return Request(line, UNKEYED, "verify")

    def remember(self, request: RememberRequest) -> Request:
        raise self._no_writes()

    def forget(self, request: ForgetRequest) -> Request:
        raise self._no_writes()

    def _no_writes(self) -> NotSupported:
        # The envelope vocabulary has no write: hostd's extension is JSON-RPC's alone.
        return NotSupported(
            f"provider {self.provider_id!r} speaks the cgp binding, which carries no memory "
            "write (memory/remember is a JSON-RPC method)",
            provider=self.provider_id,
        )

    def shutdown(self) -> Request:
        return Request(_SHUTDOWN, None, "shutdown")

    def read(self, data: bytes) -> Message | None:
        """One envelope, its frames left raw for the leg audit."""
        if not data.strip():
            return None
        try:
            decoded = orjson.loads(data)
            env = _parse(decoded)
        except ValueError as exc:  # orjson.JSONDecodeError and ValidationError are ones
            return Fault(bad_line(data, exc), parse_problem(exc))
        if env is None:  # §2.1: a type hostd does not implement is ignored, not rejected
            self._ignored(decoded["type"])
            return None
        if isinstance(env, _FramesReply | ErrorEnvelope):
            # Keyed only when the provider correlates and the reply names its request;
            # one without an id answers the lock-step request in flight, if any.
            key = env.id if self.correlation and env.id is not None else UNKEYED
            if isinstance(env, ErrorEnvelope):
                return Refusal(key, envelope_error(env), env.id, env.type)
            return Reply(key, env, env.id, env.type)
        if isinstance(env, HandshakeAckEnvelope | VerifiedEnvelope):
            return Reply(UNKEYED, env, None, env.type)
        return Fault(ProtocolFault(f"a provider may not send {env.type!r}"))

    def _ignored(self, kind: str) -> None:
        """Note an ignored envelope type in the log, once per type (every type that is
        not a token counts as one), for the first ``_NOTED_TYPES`` types."""
        token = _TOKEN.fullmatch(kind) is not None
        key = kind if token else None
        if key in self._noted or len(self._noted) >= _NOTED_TYPES:
            return
        self._noted.add(key)
        if token:
            log.info("provider.envelope.ignored", provider=self.provider_id, type=kind)
        else:
            log.info("provider.envelope.ignored", provider=self.provider_id, type_chars=len(kind))

    def unmatched(self, message: Reply | Refusal) -> HostdError:
        label = message.label
        if message.key is not UNKEYED:
            return CorrelationMismatch(
                f"{label} with unknown id {described_id(message.raw_key)} (H4)"
            )
        if self.correlation and label in ("frames", "error"):
            return CorrelationMismatch(f"{label} without the request id (H4)")
        return ProtocolFault(f"unsolicited {label} envelope")

    def answers_handshake(self, line: bytes) -> bool:
        """Whether ``line`` is a valid ``handshake_ack``: the provider answered the
        envelope handshake (a probe for the wire a silent provider speaks)."""
        message = self.read(line)
        if not isinstance(message, Reply):
            return False
        try:
            self.handshake_ack(message.payload)
        except (HostdError, ValueError):  # not a (valid) handshake_ack
            return False
        return True

    def handshake_ack(self, payload: Any) -> HandshakeAck:
        if not isinstance(payload, HandshakeAckEnvelope):
            raise _expected("handshake_ack", payload)
        ack = HandshakeAck(
            protocol_version=payload.protocol_version,
            provider=payload.provider,
            capabilities=payload.capabilities,
        )
        self.correlation = ack.capabilities.correlation
        self.wire_provider_id = ack.provider.name
        return ack

    def query_result(self, payload: Any) -> ContextQueryResult:
        if not isinstance(payload, _FramesReply):
            raise _expected("frames", payload)
        return validate_reply(ContextQueryResult, payload.result, "query result")

    def remember_result(self, payload: Any) -> RememberResult:
        raise self._no_writes()

    def forget_result(self, payload: Any) -> ForgetResult:
        raise self._no_writes()

    def verify_response(self, payload: Any) -> VerifyResponse:
        if not isinstance(payload, VerifiedEnvelope):
            raise _expected("verified", payload)
        ours, theirs = self.provider_id, self.wire_provider_id or self.provider_id
        if theirs == ours:
            return payload.response
        verdicts = [
            v.model_copy(update={"frame": v.frame.model_copy(update={"provider_id": ours})})
            if v.frame.provider_id == theirs
            else v
            for v in payload.response.verdicts
        ]
        return payload.response.model_copy(update={"verdicts": verdicts})
