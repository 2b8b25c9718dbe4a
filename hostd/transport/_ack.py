"""``Acked``: a connection's handshake ack and what every leg reads of it."""

from __future__ import annotations

from hostd.protocol import Capabilities, HandshakeAck, ProviderInfo

__all__ = ["Acked"]


class Acked:
    """The handshake's ack of a connection (pipe or remote). ``info`` and
    ``capabilities`` are read from it when it is set: plain attributes, since every leg
    of every request reads them."""

    _ack: HandshakeAck | None
    info: ProviderInfo | None
    capabilities: Capabilities | None

    @property
    def ack(self) -> HandshakeAck | None:
        return self._ack

    @ack.setter
    def ack(self, ack: HandshakeAck | None) -> None:
        self._ack = ack
        self.info = ack.provider if ack is not None else None
        self.capabilities = ack.capabilities if ack is not None else None
