"""The consent gate (C1, C2, C6), as a narrow interface over the consent ledger.

The engine asks one question before any query payload leaves for a provider:
which of the scopes its handshake ``data_flow`` requires have no live
receipt? Any answer but "none" refuses the leg (``no_consent``) and nothing
is sent. ``ConsentGate`` is what ``hostd.engine.consent.ConsentStore``
provides; tests may pass any object with the same method.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Protocol

from hostd.protocol import ProviderInfo

from .consent import required_scopes

__all__ = ["ConsentGate", "destination_of", "missing_consent"]


class ConsentGate(Protocol):
    def missing_scopes(self, provider_id: str, scopes: Iterable[str]) -> list[str]: ...


def missing_consent(gate: ConsentGate | None, provider_id: str, info: ProviderInfo) -> list[str]:
    """The required scopes without a receipt. With no gate at all nothing can be
    consented, so every required scope is missing (C1: never auto-enabled)."""
    scopes = required_scopes(info)
    if not scopes:
        return []
    if gate is None:
        return scopes
    return list(gate.missing_scopes(provider_id, scopes))


def destination_of(gate: ConsentGate | None, provider_id: str) -> str:
    """The origin a gate's receipts must name for ``provider_id`` (a ``ConsentStore``
    says; ``""`` for a child process, or a gate that keeps no destinations)."""
    where = getattr(gate, "destination", None)
    return str(where(provider_id)) if callable(where) else ""
