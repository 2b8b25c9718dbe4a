"""The CGP NDJSON envelope binding, host side (protocol.md §2).

Speaks the upstream envelope wire exactly: ``handshake`` → ``handshake_ack``,
``query`` → ``frames`` | ``error``, ``verify`` → ``verified``, ``shutdown``.
Strictly one request in flight unless the provider declared
``capabilities.correlation``; then queries carry an ``id`` and are
pipelined, and a ``frames``/``error`` with an unknown or missing id is a
``correlation_mismatch`` fault (H4). ``verify`` stays lock-step (the schema
gives ``verify`` no id). A timed-out lock-step request leaves the stream
unsynchronised, so the caller must break the connection (``desynchronised``).

``verify`` addresses identities by the provider's handshake name: the envelope
wire never tells a provider the id the host configured it under, so the one
``provider_id`` a provider can hold its served identities under is its own name
(the published SDK's providers do). The host's FrameIds keep the configured id;
it is swapped for the name on the way out and back in verdicts (V2 still
matches by full identity).
"""

from __future__ import annotations

from typing import Any

import anyio
import orjson
import structlog

from hostd.errors import (
    CorrelationMismatch,
    HostdError,
    IncompatibleVersion,
    ProtocolFault,
    ProviderError,
)
from hostd.protocol import (
    PROTOCOL_VERSION,
    CgpErrorCode,
    ContextQuery,
    ContextQueryResult,
    ErrorEnvelope,
    FrameIdentity,
    FramesEnvelope,
    HandshakeAck,
    HandshakeAckEnvelope,
    HostInfo,
    VerifiedEnvelope,
    VerifyResponse,
    parse_envelope,
    read_cgp_code,
)
from hostd.rpc import Pending, encode_line

from ..process._client import StartedCall, StreamClient, query_wire
from ._unquoted import bad_line, described_id, unquoted

__all__ = ["CgpClient"]

log = structlog.get_logger("hostd.transport")

_UNKEYED = object()  # the table key of the one lock-step request in flight


def _parse_line(line: bytes) -> Any:
    """One envelope from one line, its frames left raw for the leg audit. Raises
    ``ValueError`` (``orjson.JSONDecodeError`` and ``ValidationError`` are ones)."""
    return parse_envelope(orjson.loads(line))


def _envelope_error(env: ErrorEnvelope) -> HostdError:
    code = read_cgp_code(env.code)  # X1/X2: unknown or absent → internal
    # The message is the provider's own text (it may echo a frame): reported by size only.
    message = f"provider answered {code.value} (message: {unquoted(env.message)})"
    if code is CgpErrorCode.INCOMPATIBLE_VERSION:
        return IncompatibleVersion(message)
    return ProviderError(message, cgp_code=code)


def _frames(result: Any) -> ContextQueryResult:
    if not isinstance(result, ContextQueryResult):
        raise ProtocolFault("expected frames")
    return result


class CgpClient(StreamClient):
    """Envelope calls over one line stream, fed by ``on_line`` (a child's pipe)."""

    binding = "cgp"

    def _init_binding(self) -> None:
        self._lockstep = anyio.Lock()  # one unkeyed request at a time
        #: Set from the handshake's capabilities: pipeline queries with ids.
        self.correlation = False
        #: A lock-step request was abandoned mid-flight: its late reply would be
        #: read as the answer to the next request, so the stream is unusable.
        self.desynchronised = False
        #: The ``provider_id`` verify identities carry on the wire: the handshake name.
        self.wire_provider_id: str | None = None

    def __repr__(self) -> str:
        return (
            f"<CgpClient {self.provider_id} correlation={self.correlation} "
            f"desynchronised={self.desynchronised} {self._table!r}>"
        )

    def _dispatch(self, line: bytes) -> HostdError | None:
        if not line.strip():
            return None
        try:
            env = _parse_line(line)
        except ValueError as exc:  # orjson.JSONDecodeError and ValidationError are ones
            return bad_line(line, exc)
        if isinstance(env, FramesEnvelope | ErrorEnvelope):
            result: Any = env.result if isinstance(env, FramesEnvelope) else None
            if self.correlation and (env.id is not None or not self._table.has(_UNKEYED)):
                if env.id is None:
                    return CorrelationMismatch(f"{env.type} without the request id (H4)")
                slot = self._table.pop(env.id)
                if slot is None:
                    if self._late(env.id):
                        return None
                    return CorrelationMismatch(
                        f"{env.type} with unknown id {described_id(env.id)} (H4)"
                    )
            else:
                slot = self._table.pop(_UNKEYED)
                if slot is None:
                    return ProtocolFault(f"unsolicited {env.type} envelope")
            if isinstance(env, ErrorEnvelope):
                slot.fail(_envelope_error(env))
            else:
                slot.resolve(result)
            return None
        if isinstance(env, HandshakeAckEnvelope | VerifiedEnvelope):
            slot = self._table.pop(_UNKEYED)
            if slot is None:
                return ProtocolFault(f"unsolicited {env.type} envelope")
            slot.resolve(env)
            return None
        return ProtocolFault(f"a provider may not send {env.type!r}")

    async def _exchange(self, message: dict[str, Any], key: Any) -> Any:
        slot: Pending = self._table.add(key)
        try:
            async with self._send_lock:
                await self._send(encode_line(message))
            return await slot.wait()
        except BaseException:
            if key is _UNKEYED and not slot.done.is_set():
                self.desynchronised = True
            self._table.abandon(key)
            raise

    async def _unkeyed(self, message: dict[str, Any]) -> Any:
        if self.desynchronised:
            raise ProtocolFault("stream desynchronised by an abandoned request")
        async with self._lockstep:
            return await self._exchange(message, _UNKEYED)

    async def handshake(self, host: HostInfo) -> HandshakeAck:
        env = await self._unkeyed({"type": "handshake", "protocol_version": PROTOCOL_VERSION})
        if not isinstance(env, HandshakeAckEnvelope):
            raise ProtocolFault(f"expected handshake_ack, got {type(env).__name__}")
        ack = HandshakeAck(
            protocol_version=env.protocol_version,
            provider=env.provider,
            capabilities=env.capabilities,
        )
        self.correlation = ack.capabilities.correlation
        self.wire_provider_id = ack.provider.name
        return ack

    async def query(self, query: ContextQuery) -> ContextQueryResult:
        body = {"type": "query", "query": query.to_wire()}
        if self.correlation:
            key = f"q{next(self._ids)}"
            result = await self._exchange({**body, "id": key}, key)
        else:
            result = await self._unkeyed(body)
        return _frames(result)

    def start_query(self, query: ContextQuery | dict[str, Any]) -> StartedCall | None:
        """Write a ``query`` envelope now, with no event-loop turn, when the provider
        correlates and the pipe takes the line whole at once; ``None`` (nothing written)
        otherwise, a lock-step provider always: then use ``query``."""
        if not self.correlation:
            return None
        key = f"q{next(self._ids)}"
        line = encode_line({"type": "query", "query": query_wire(query), "id": key})
        return self._start(key, line, _frames)

    async def verify(self, frames: list[FrameIdentity]) -> VerifyResponse:
        ours, theirs = self.provider_id, self.wire_provider_id or self.provider_id
        wire = [
            {**f.to_wire(), "provider_id": theirs} if f.provider_id == ours else f.to_wire()
            for f in frames
        ]
        env = await self._unkeyed({"type": "verify", "request": {"frames": wire}})
        if not isinstance(env, VerifiedEnvelope):
            raise ProtocolFault(f"expected verified, got {type(env).__name__}")
        if theirs == ours:
            return env.response
        verdicts = [
            v.model_copy(update={"frame": v.frame.model_copy(update={"provider_id": ours})})
            if v.frame.provider_id == theirs
            else v
            for v in env.response.verdicts
        ]
        return env.response.model_copy(update={"verdicts": verdicts})

    async def shutdown(self) -> None:
        async with self._send_lock:
            await self._send(encode_line({"type": "shutdown"}))

    def close(self, error: HostdError) -> None:
        self._table.fail_all(error)
