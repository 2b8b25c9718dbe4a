"""Loopback on a host name's text alone: the line C7 draws between plaintext allowed
(this machine) and TLS required (anywhere else). No lookup: a name that resolves to
loopback is still a name, and resolving it would already be traffic."""

from __future__ import annotations

import ipaddress

__all__ = ["is_loopback_host"]


def is_loopback_host(host: str) -> bool:
    """``localhost``, an address in 127.0.0.0/8, or ``::1`` (brackets allowed)."""
    name = host.strip("[]").lower()
    if name == "localhost":
        return True
    try:
        return ipaddress.ip_address(name).is_loopback
    except ValueError:
        return False
