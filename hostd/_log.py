"""The one logger factory: every hostd module gets its logger here.

A leaf (it imports no hostd module), so every layer may use it: the transport
and the engine as well as the server. ``hostd.logs`` configures where the events
go (``configure_logging``) and re-exports this factory. ``hostd.rpc`` keeps a
stdlib logger on purpose: it also runs inside provider processes, whose stdout is
the protocol stream, and an unconfigured structlog would print there.
"""

from __future__ import annotations

from typing import Any

import structlog

__all__ = ["get_logger"]


def get_logger(name: str) -> Any:
    """The structlog logger named ``name`` (a module-level logger, dotted event names)."""
    return structlog.get_logger(name)
