"""The one logger factory: every hostd module gets its logger here.

A leaf (it imports no hostd module), so every layer may use it: the transport
and the engine as well as the server. ``hostd.logs`` configures where the events
go (``configure_logging``) and re-exports this factory. ``hostd.rpc`` keeps a
stdlib logger on purpose: it also runs inside provider processes, whose stdout is
the protocol stream, and an unconfigured structlog would print there.
"""

from __future__ import annotations

from typing import Any

__all__ = ["DEBUG", "INFO", "WARNING", "get_logger", "level"]

DEBUG = 10
INFO = 20
WARNING = 30


class _Level:
    """The level events below which are dropped (the stdlib's numbers), as
    ``hostd.logs.configure_logging`` set it; 0 until it runs (structlog's default
    writes every level). Read as ``level.at``: a hot path (a leg, a verify pass) skips
    building an event that would be dropped, with no call into the logger."""

    __slots__ = ("at",)

    def __init__(self) -> None:
        self.at = 0


level = _Level()


def get_logger(name: str) -> Any:
    """The structlog logger named ``name`` (a module-level logger, dotted event names).

    structlog is imported here, by the first logger made, not with this module: its
    package imports its console renderer, and with it rich when that is installed
    (about 100 modules), which a command that logs nothing (``--version``, ``--help``)
    never needs."""
    import structlog

    return structlog.get_logger(name)
