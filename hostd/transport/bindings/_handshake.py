"""A handshake ack judged the same over every binding and carrier (H1–H3, H2, C5)."""

from __future__ import annotations

from hostd.errors import HandshakeFailed, HostdError, IncompatibleVersion
from hostd.protocol import PROTOCOL_VERSION, HandshakeAck, Violation, check_handshake

__all__ = ["check_ack", "handshake_error"]


def handshake_error(violations: list[Violation]) -> HostdError:
    """The typed error of a rejected handshake: ``IncompatibleVersion`` for H1/H3, else
    ``HandshakeFailed``, with ``data["violations"]``."""
    summary = "; ".join(f"{v.rule} {v.field}: {v.message}" for v in violations)
    wire = [v.to_wire() for v in violations]
    if any(v.rule in ("H1", "H3") for v in violations):
        return IncompatibleVersion(f"handshake rejected: {summary}", violations=wire)
    return HandshakeFailed(f"handshake rejected: {summary}", violations=wire)


def check_ack(ack: HandshakeAck) -> None:
    """Raise the typed error when ``ack`` breaks a handshake rule."""
    violations = check_handshake(PROTOCOL_VERSION, ack)
    if violations:
        raise handshake_error(violations)
